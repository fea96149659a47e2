"""The transaction metrics collector and Pulsar's per-interval latency buckets, on a
virtual clock (the broker-process tests check the series after real workloads)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from quasar.clock import ManualClock
from quasar.protocol.txn_id import TxnID
from quasar.storage.stats_buckets import StatsBuckets, bucket_suffixes
from quasar.transaction.coordinator import CoordinatorStats
from quasar.transaction.metrics import TransactionMetrics, _quantile


def test_buckets_report_the_last_closed_interval_only() -> None:
    b = StatsBuckets((10, 100))
    b.add_value(5)
    b.add_value(10)  # bounds are inclusive
    b.add_value(50)
    b.add_value(1_000)
    assert b.values == (0, 0, 0)  # the interval is not closed yet
    b.refresh()
    assert b.values == (2, 1, 1) and b.count == 4 and b.sum == 1065
    b.add_value(1)
    b.refresh()
    assert b.values == (1, 0, 0)  # not cumulative
    b.refresh()
    assert b.values == (0, 0, 0)


def test_bucket_bounds_must_ascend() -> None:
    with pytest.raises(ValueError):
        StatsBuckets((10, 5))


def test_bucket_suffixes_follow_pulsar() -> None:
    assert bucket_suffixes((0.5, 10, 1_500_000)) == [
        "le_0_5", "le_10", "le_1500000", "le_overflow"]


def test_quantiles_of_recent_samples() -> None:
    assert math.isnan(_quantile([], 0.5))
    ordered = [float(i) for i in range(1, 101)]
    assert _quantile(ordered, 0.5) == 50
    assert _quantile(ordered, 0.99) == 99
    assert _quantile(ordered, 0.999) == 100


def fake_coordinator(tc_id: int, opened: dict[TxnID, int]) -> Any:
    stats = CoordinatorStats(created=3, committed=1, aborted=1, timed_out=1, appended=9)
    return SimpleNamespace(
        tc_id=tc_id,
        stats=stats,
        active_transactions=lambda: len(opened),
        open_timestamps=lambda: dict(opened),
    )


def scrape(registry: CollectorRegistry) -> dict[str, float]:
    out = {}
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def test_coordinator_series_and_interval_refresh() -> None:
    clock = ManualClock()
    now = clock.wall_ms()
    tc = fake_coordinator(0, {TxnID(0, 7): now - 90_000})
    registry = CollectorRegistry()
    registry.register(TransactionMetrics("c1", lambda: [tc], lambda: [], clock,
                                         stats_interval_ms=60_000))
    labels = '{cluster="c1",coordinator_id="0"}'
    tc.stats.execution_latency.add_value(15)
    tc.stats.execution_latency.add_value(4_000_000)
    samples = scrape(registry)
    assert samples["pulsar_txn_active_count" + labels] == 1
    assert samples["pulsar_txn_created_total" + labels] == 3
    assert samples["pulsar_txn_timeout_total" + labels] == 1
    assert samples["pulsar_txn_append_log_total" + labels] == 9
    assert samples["quasar_txn_oldest_open_age_seconds" + labels] == 90
    assert samples["pulsar_txn_execution_latency_le_20" + labels] == 0  # interval open
    clock.advance(60_000)
    samples = scrape(registry)
    assert samples["pulsar_txn_execution_latency_le_20" + labels] == 1
    assert samples["pulsar_txn_execution_latency_le_overflow" + labels] == 1
    assert samples["pulsar_txn_execution_latency_le_10" + labels] == 0
    # The same interval is reported until the next one closes.
    assert scrape(registry)["pulsar_txn_execution_latency_le_20" + labels] == 1
    clock.advance(60_000)
    assert scrape(registry)["pulsar_txn_execution_latency_le_20" + labels] == 0
    # Printed as gauges, as Pulsar prints coordinator series.
    text = generate_latest(registry).decode()
    assert "# TYPE pulsar_txn_created_total gauge" in text


def test_topic_and_subscription_series_in_both_formats() -> None:
    from prometheus_client.openmetrics.exposition import generate_latest as om_latest
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from quasar.storage.api import Position
    from quasar.transaction.metrics import TopicTransactions
    from quasar.transaction.pending_ack.stats import PendingAckCounters

    clock = ManualClock()
    now = clock.wall_ms()
    open_txn = TxnID(0, 7)
    tc = fake_coordinator(0, {open_txn: now - 2_500})
    ledger = SimpleNamespace(
        last_confirmed_entry=Position(3, 9),
        count_entries=lambda first, last: (last.entry_id - first.entry_id + 1)
        if first.ledger_id == last.ledger_id else 0,
    )
    buffer = SimpleNamespace(
        ongoing_transactions=lambda: {open_txn: Position(3, 6)},
        committed_count=4, aborted_count=2, max_read_position=Position(3, 5),
    )
    counters = PendingAckCounters(committed=2, aborted=1, commit_failed=1)
    for ms in (3.0, 8.0):
        counters.observe_commit_latency(ms)
    counters.committed = 2
    topic = TopicTransactions(
        topic="persistent://a/b/t", namespace="a/b", ledger=ledger,  # type: ignore[arg-type]
        buffer=buffer,  # type: ignore[arg-type]
        pending_acks=[("s", SimpleNamespace(counters=counters))],  # type: ignore[list-item]
    )
    registry = CollectorRegistry()
    registry.register(TransactionMetrics("c1", lambda: [tc], lambda: [topic], clock))
    samples = scrape(registry)
    tb = '{cluster="c1",namespace="a/b",topic="persistent://a/b/t"}'
    assert samples["pulsar_txn_tb_active_total" + tb] == 1
    assert samples["pulsar_txn_tb_committed_total" + tb] == 4
    assert samples["pulsar_txn_tb_aborted_total" + tb] == 2
    assert samples["quasar_txn_topic_oldest_open_age_seconds" + tb] == 2.5
    assert samples["quasar_txn_topic_held_back_entries" + tb] == 4  # 3:6 .. 3:9
    def tp(name: str, **labels: str) -> float:
        wanted = {"namespace": "a/b", "topic": "persistent://a/b/t", "subscription": "s",
                  **labels}
        found = [v for k, v in samples.items() if k.split("{")[0] == name
                 and all(f'{lk}="{lv}"' in k for lk, lv in wanted.items())]
        assert len(found) == 1, (name, labels)
        return found[0]

    assert tp("pulsar_txn_tp_committed_count_total", status="succeed") == 2
    assert tp("pulsar_txn_tp_committed_count_total", status="failed") == 1
    assert tp("pulsar_txn_tp_aborted_count_total", status="succeed") == 1
    assert tp("pulsar_txn_tp_commit_latency", quantile="0.5") == 3
    assert tp("pulsar_txn_tp_commit_latency", quantile="0.99") == 8
    assert tp("pulsar_txn_tp_commit_latency_count") == 2
    assert tp("pulsar_txn_tp_commit_latency_sum") == 11
    # OpenMetrics (what Prometheus asks for) parses too, with the same families.
    families = {f.name for f in text_string_to_metric_families(om_latest(registry).decode())}
    assert {"pulsar_txn_tp_commit_latency", "pulsar_txn_tp_committed_count",
            "quasar_txn_topic_held_back_entries"} <= families
