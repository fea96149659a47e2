"""``TxnLogBufferedWriter``: positions, thresholds, order, failures, close, switch."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from quasar.errors import ManagedLedgerClosed, PersistenceError
from quasar.storage.api import ManagedLedger
from quasar.transaction.batched_log import (
    BatchedWriteConfig,
    LogPosition,
    TxnLogBufferedWriter,
    batched_payload,
    is_batched_entry,
)
from quasar.transaction.batched_log.metrics import (
    BatchedLogStats,
    coordinator_log_metrics,
)
from quasar.transaction.scheduler import settle

from ..helpers import FailingLedger
from .conftest import Env


def _ident(record: bytes) -> bytes:
    return record


def _records_of(data: bytes) -> list[bytes]:
    """Split a batched entry into its records (field 1 occurrences)."""
    from quasar.protocol import txnlog_pb

    batch = txnlog_pb.BatchedTransactionMetadataEntry()
    batch.ParseFromString(batched_payload(data))
    return [r.SerializeToString() for r in batch.transaction_logs]


def _rec(i: int, pad: int = 0) -> bytes:
    # A valid TransactionMetadataEntry: field 1 (txnid_least_bits) varint, plus padding
    # in field 8 (a string-ish partitions entry) to reach a size.
    from quasar.protocol import txnlog_pb

    r = txnlog_pb.TransactionMetadataEntry(txnid_least_bits=i, txnid_most_bits=0)
    if pad:
        r.partitions.append("x" * pad)
    return r.SerializeToString()


def _writer(
    env: Env, ledger: ManagedLedger | None = None, stats: BatchedLogStats | None = None,
    **settings: Any,
) -> TxnLogBufferedWriter[bytes]:
    values: dict[str, Any] = {"enabled": True, "max_records": 4, "max_size": 1 << 20,
                              "max_delay_in_millis": 10}
    values.update(settings)
    return TxnLogBufferedWriter(
        ledger or env.ledger, _ident, BatchedWriteConfig(**values),
        scheduler=env.sched, clock=env.clock, stats=stats, name="0",
    )


def _track(futures: list[asyncio.Future[LogPosition]]) -> list[int]:
    """Indexes of ``futures`` in the order their callbacks run."""
    order: list[int] = []
    for i, f in enumerate(futures):
        f.add_done_callback(lambda _f, i=i: order.append(i))
    return order


async def _entries(ledger: ManagedLedger) -> list[bytes]:
    if ledger.number_of_entries == 0:
        return []
    return [e.data for e in await ledger.read_entries(ledger.first_position, 10_000)]


async def test_one_entry_per_batch_with_positions(wenv: Env) -> None:
    w = _writer(wenv)
    records = [_rec(i) for i in range(4)]
    futures = [w.append(r) for r in records]
    order = _track(futures)
    await settle()
    positions = [f.result() for f in futures]
    entry = positions[0].position
    assert positions == [LogPosition(entry, i, 4) for i in range(4)]
    assert order == [0, 1, 2, 3]
    data = await _entries(wenv.ledger)
    assert len(data) == 1 and is_batched_entry(data[0])
    assert _records_of(data[0]) == records
    assert (w.entries_written, w.records_written) == (1, 4)


async def test_records_threshold_alone(wenv: Env) -> None:
    metrics = coordinator_log_metrics()
    w = _writer(wenv, stats=metrics.child("c", "0"), max_records=3)
    futures = [w.append(_rec(i)) for i in range(7)]
    await settle()
    assert [f.done() for f in futures] == [True] * 6 + [False]
    assert w.buffered == 1
    assert metrics.child("c", "0").triggers[_trigger("RECORDS")] == 2
    await wenv.sched.advance(10)
    assert futures[6].result().batch_size == 1
    assert metrics.child("c", "0").triggers[_trigger("DELAY")] == 1


async def test_size_threshold_alone(wenv: Env) -> None:
    metrics = coordinator_log_metrics()
    w = _writer(wenv, stats=metrics.child("c", "0"), max_records=1000, max_size=100)
    one = _rec(0, pad=25)
    assert 25 < len(one) < 34
    futures = [w.append(_rec(i, pad=25)) for i in range(4)]  # 4 * ~30 >= 100
    await settle()
    assert all(f.done() for f in futures[:4]) and wenv.ledger.number_of_entries == 1
    assert metrics.child("c", "0").triggers[_trigger("SIZE")] == 1
    assert metrics.child("c", "0").triggers[_trigger("RECORDS")] == 0


async def test_delay_threshold_alone_counts_from_the_first_record(wenv: Env) -> None:
    metrics = coordinator_log_metrics()
    w = _writer(
        wenv, stats=metrics.child("c", "0"), max_records=1000, max_delay_in_millis=5
    )
    first = w.append(_rec(0))
    await wenv.sched.advance(3)
    second = w.append(_rec(1))
    await wenv.sched.advance(1)
    assert not first.done() and wenv.ledger.number_of_entries == 0
    await wenv.sched.advance(1)  # 5 ms after the first record, not the second
    assert first.result().batch_size == 2 and second.result().batch_index == 1
    assert metrics.child("c", "0").triggers[_trigger("DELAY")] == 1
    registry = CollectorRegistry()
    registry.register(metrics)
    delay = "pulsar_txn_tc_batched_log_oldest_record_delay_time_seconds"
    labels = {"cluster": "c", "coordinator_id": "0"}
    assert registry.get_sample_value(f"{delay}_count", labels) == 1
    assert registry.get_sample_value(f"{delay}_sum", labels) == pytest.approx(0.005)
    # An empty buffer arms no timer: nothing runs until the next record.
    assert wenv.sched.pending() == 0


async def test_large_record_flushes_the_buffer_then_goes_alone(wenv: Env) -> None:
    metrics = coordinator_log_metrics()
    w = _writer(wenv, stats=metrics.child("c", "0"), max_records=1000, max_size=100)
    big = _rec(9, pad=150)
    futures = [w.append(_rec(0)), w.append(_rec(1)), w.append(big), w.append(_rec(2))]
    order = _track(futures)
    await wenv.sched.advance(10)
    assert order == [0, 1, 2, 3]
    p = [f.result() for f in futures]
    assert p[0].batch_size == 2 and p[1].batch_index == 1
    assert not p[2].is_batched and p[2].position > p[1].position
    assert p[3].position > p[2].position and p[3].batch_size == 1
    data = await _entries(wenv.ledger)
    assert [is_batched_entry(d) for d in data] == [True, False, True]
    assert data[1] == big
    assert metrics.child("c", "0").triggers[_trigger("FORCE")] == 1


async def test_many_records_keep_order(wenv: Env) -> None:
    w = _writer(wenv, max_records=7)
    futures = [w.append(_rec(i)) for i in range(100)]
    order = _track(futures)
    await wenv.sched.advance(10)
    assert order == list(range(100))
    seen = [(f.result().position, f.result().batch_index) for f in futures]
    assert seen == sorted(seen)
    data = await _entries(wenv.ledger)
    assert [r for d in data for r in _records_of(d)] == [_rec(i) for i in range(100)]


async def test_failed_write_fails_every_record_of_the_batch(wenv: Env) -> None:
    ledger = FailingLedger(wenv.ledger)
    w = _writer(wenv, ledger=ledger)  # type: ignore[arg-type]
    ok = [w.append(_rec(i)) for i in range(4)]
    ledger.failing = True
    bad = [w.append(_rec(i)) for i in range(4, 8)]
    ledger.failing = False
    after = [w.append(_rec(i)) for i in range(8, 10)]
    await wenv.sched.advance(10)
    assert all(f.result().batch_size == 4 for f in ok)
    for f in bad:
        assert isinstance(f.exception(), PersistenceError)
    assert [f.result().batch_index for f in after] == [0, 1]
    ledger.raise_now = True
    raised = [w.append(_rec(i)) for i in range(4)]
    await settle()
    assert all(isinstance(f.exception(), ManagedLedgerClosed) for f in raised)


async def test_close_writes_the_buffer_then_refuses(wenv: Env) -> None:
    w = _writer(wenv, max_records=100, max_delay_in_millis=1000)
    pending = [w.append(_rec(i)) for i in range(3)]
    await w.close()
    late = w.append(_rec(3))
    await settle()
    assert [f.result().batch_index for f in pending] == [0, 1, 2]
    with pytest.raises(ManagedLedgerClosed):
        late.result()
    assert wenv.ledger.number_of_entries == 1
    await w.close()  # idempotent


async def test_disabled_writes_one_record_per_entry(wenv: Env) -> None:
    w = _writer(wenv, enabled=False)
    futures = [w.append(_rec(i)) for i in range(3)]
    await settle()
    assert all(not f.result().is_batched for f in futures)
    assert await _entries(wenv.ledger) == [_rec(i) for i in range(3)]


async def test_batching_needs_more_than_one_record(wenv: Env) -> None:
    w = _writer(wenv, max_records=1)
    assert not w.enabled
    f = w.append(_rec(0))
    await settle()
    assert not f.result().is_batched


async def test_switching_off_writes_the_buffer_first(wenv: Env) -> None:
    w = _writer(wenv, max_records=100, max_delay_in_millis=1000)
    futures = [w.append(_rec(0)), w.append(_rec(1))]
    w.set_enabled(False)
    futures.append(w.append(_rec(2)))
    w.set_enabled(True)
    futures.append(w.append(_rec(3)))
    order = _track(futures)
    await wenv.sched.advance(1000)
    assert order == [0, 1, 2, 3]
    p = [f.result() for f in futures]
    assert (p[0].batch_size, p[2].is_batched, p[3].batch_size) == (2, False, 1)
    assert p[0].position < p[2].position < p[3].position


async def test_metrics_values(wenv: Env) -> None:
    registry = CollectorRegistry()
    metrics = coordinator_log_metrics()
    registry.register(metrics)
    w = _writer(
        wenv, stats=metrics.child("standalone", "3"), max_records=3, max_delay_in_millis=2
    )
    for i in range(3):
        w.append(_rec(i))  # by records, delay 0
    await wenv.sched.advance(0)
    w.append(_rec(3))
    await wenv.sched.advance(2)  # by delay, one record, 2 ms old
    text = generate_latest(registry).decode()
    labels = 'cluster="standalone",coordinator_id="3"'
    p = "pulsar_txn_tc_batched_log"
    size_of_3 = len((await _entries(wenv.ledger))[0])
    for line in (
        f'{p}_records_count_per_entry_bucket{{{labels},le="10.0"}} 2.0',
        f'{p}_records_count_per_entry_bucket{{{labels},le="+Inf"}} 2.0',
        f"{p}_records_count_per_entry_sum{{{labels}}} 4.0",
        f"{p}_records_count_per_entry_count{{{labels}}} 2.0",
        f'{p}_oldest_record_delay_time_seconds_bucket{{{labels},le="0.001"}} 1.0',
        f'{p}_oldest_record_delay_time_seconds_bucket{{{labels},le="0.005"}} 2.0',
        f"{p}_triggering_count_by_records_total{{{labels}}} 1.0",
        f"{p}_triggering_count_by_delay_time_total{{{labels}}} 1.0",
        f"{p}_triggering_count_by_size_total{{{labels}}} 0.0",
        f"{p}_triggering_count_by_force_total{{{labels}}} 0.0",
        f"# TYPE {p}_entry_size_bytes histogram",
        f'{p}_entry_size_bytes_bucket{{{labels},le="128.0"}} 2.0',
    ):
        assert line in text.splitlines(), line
    assert f"{p}_entry_size_bytes_sum{{{labels}}} " in text
    assert size_of_3 < 128


def _trigger(name: str) -> Any:
    from quasar.transaction.batched_log.metrics import Trigger

    return Trigger[name]
