"""The arithmetic behind the topic stats and series: per-interval buckets, rates over
a period, the estimated backlog size, bucket names, and what a managed ledger counts."""

from __future__ import annotations

import pytest

from quasar.broker.metrics_topics import ENTRY_SIZE_NAMES, WRITE_LATENCY_NAMES
from quasar.broker.stats_rates import (
    MessageRate,
    average_msg_size,
    estimated_backlog_size,
)
from quasar.clock import ManualClock
from quasar.storage import MemoryManagedLedgerFactory, MemoryMetadataStore
from quasar.storage.api import LedgerInfo, ManagedLedgerConfig, Position
from quasar.storage.stats_buckets import ENTRY_LATENCY_BOUNDS_MS, StatsBuckets


def test_buckets_have_inclusive_upper_bounds_and_an_overflow() -> None:
    b = StatsBuckets((1, 5, 10))
    for v in (0, 1, 1.5, 5, 10, 10.01, 1000):
        b.add_value(v)
    # Nothing is visible before the interval ends.
    assert b.values == (0, 0, 0, 0) and b.count == 0 and b.sum == 0
    b.refresh()
    assert b.values == (2, 2, 1, 2)
    assert b.overflow == 2
    assert b.count == 7
    assert b.sum == pytest.approx(1027.51)


def test_buckets_hold_the_last_interval_only() -> None:
    b = StatsBuckets(ENTRY_LATENCY_BOUNDS_MS)
    b.add_value(0.2)
    b.refresh()
    b.add_value(3)
    b.add_value(3)
    assert b.values[0] == 1  # still the first interval
    b.refresh()
    assert b.values == (0, 0, 2, 0, 0, 0, 0, 0, 0, 0)
    assert (b.count, b.sum) == (2, 6)
    b.refresh()  # an idle interval reads all zero
    assert b.values == (0,) * 10 and b.count == 0 and b.sum == 0


@pytest.mark.parametrize("bounds", [(), (1, 1), (5, 1)])
def test_bucket_bounds_must_increase(bounds: tuple[int, ...]) -> None:
    with pytest.raises(ValueError):
        StatsBuckets(bounds)


def test_rate_is_the_change_over_the_elapsed_time() -> None:
    r = MessageRate()
    r.update(100, 10_000, 2.0)
    assert (r.msg_rate, r.byte_rate) == (50.0, 5000.0)
    assert average_msg_size(r) == 100.0
    r.update(100, 10_000, 2.0)  # nothing new: idle
    assert (r.msg_rate, r.byte_rate) == (0.0, 0.0)
    assert average_msg_size(r) == 0.0
    r.update(130, 10_600, 0.5)
    assert (r.msg_rate, r.byte_rate) == (60.0, 1200.0)


def test_a_counter_that_drops_gives_zero_not_a_negative_rate() -> None:
    r = MessageRate()
    r.update(10, 1000, 1.0)
    r.update(4, 400, 1.0)
    assert (r.msg_rate, r.byte_rate) == (0.0, 0.0)
    r.update(6, 500, 1.0)  # counts on from the new value
    assert (r.msg_rate, r.byte_rate) == (2.0, 100.0)


def test_no_elapsed_time_keeps_the_last_rate() -> None:
    r = MessageRate()
    r.update(10, 100, 1.0)
    r.update(20, 200, 0.0)
    assert r.msg_rate == 10.0


def test_estimated_backlog_size() -> None:
    ledgers = [LedgerInfo(1, 10, 1000, 0), LedgerInfo(2, 4, 800, 0), LedgerInfo(3, 0, 0, 0)]
    assert estimated_backlog_size(ledgers, Position(1, -1)) == 1800  # nothing acked
    assert estimated_backlog_size(ledgers, Position(1, 4)) == 500 + 800
    assert estimated_backlog_size(ledgers, Position(1, 9)) == 800
    assert estimated_backlog_size(ledgers, Position(2, 1)) == 400
    assert estimated_backlog_size(ledgers, Position(2, 3)) == 0
    assert estimated_backlog_size(ledgers, Position(3, -1)) == 0
    # A mark-delete in a trimmed ledger: every retained ledger is backlog.
    assert estimated_backlog_size(ledgers, Position(0, 7)) == 1800


def test_bucket_series_names_are_pulsars() -> None:
    assert WRITE_LATENCY_NAMES == tuple(
        f"pulsar_storage_write_latency_{s}" for s in (
            "le_0_5", "le_1", "le_5", "le_10", "le_20", "le_50", "le_100", "le_200",
            "le_1000", "le_overflow", "count", "sum",
        )
    )
    assert ENTRY_SIZE_NAMES == tuple(
        f"pulsar_entry_size_{s}" for s in (
            "le_128", "le_512", "le_1_kb", "le_2_kb", "le_4_kb", "le_16_kb", "le_100_kb",
            "le_1_mb", "le_overflow", "count", "sum",
        )
    )


async def test_a_managed_ledger_counts_appends_and_reads() -> None:
    clock = ManualClock()
    factory = MemoryManagedLedgerFactory(MemoryMetadataStore(), clock=clock)
    ledger = await factory.open("t/ns/persistent/a", ManagedLedgerConfig())
    futures = [ledger.add_entry(b"x" * size) for size in (100, 200, 5000)]
    clock.advance(3)  # every append completes 3 ms after it was made
    positions = [await f for f in futures]
    stats = ledger.stats
    assert (stats.entries_added, stats.bytes_added) == (3, 5300)
    await ledger.read_entries(positions[0], 10)
    assert (stats.entries_read, stats.bytes_read) == (3, 5300)
    stats.refresh()
    latency = stats.add_entry_latency_ms
    assert latency.count == 3
    assert latency.values[2] == 3 and latency.sum == 9  # in (1, 5] ms
    sizes = stats.entry_size_bytes
    assert sizes.values[:6] == (1, 1, 0, 0, 0, 1)  # <=128, <=512, ..., <=16 KiB
    assert (sizes.count, sizes.sum) == (3, 5300)
    await ledger.close()
    await factory.close()
