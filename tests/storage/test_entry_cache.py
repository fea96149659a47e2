"""The entry cache: bounded by bytes, FIFO eviction, tail reads served from memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

from quasar.storage import (
    EARLIEST,
    FileManagedLedgerFactory,
    Position,
    SqliteMetadataStore,
)
from quasar.storage.file.entry_cache import EntryCache


def test_bounded_fifo_eviction() -> None:
    cache = EntryCache(cache_size_bytes_max=3 * (100 + 128))
    for i in range(5):
        cache.put(Position(1, i), bytes(100))
    stats = cache.stats()
    assert stats.entries == 3 and stats.evictions == 2
    assert stats.size_bytes <= 3 * 228
    assert cache.get(Position(1, 0)) is None  # oldest went first
    assert cache.get(Position(1, 4)) == bytes(100)
    cache.put(Position(2, 0), bytes(10))
    cache.invalidate_ledger(1)
    assert cache.stats().entries == 1
    cache.put(Position(3, 0), bytes(10_000))  # larger than the whole cache: skipped
    assert cache.get(Position(3, 0)) is None


async def test_tailing_reads_hit_the_cache_and_cold_reads_go_to_disk(
    tmp_path: Path,
) -> None:
    meta = SqliteMetadataStore(tmp_path / "m.db")
    factory = FileManagedLedgerFactory(
        tmp_path / "d", meta, cache_size_bytes_max=10 * (1024 + 128)
    )
    ml = await factory.open("t")
    data = [bytes([i]) * 1024 for i in range(50)]
    positions = await asyncio.gather(*(ml.add_entry(d) for d in data))
    before = factory.cache_stats()
    tail = await ml.read_entries(positions[-5], 5)
    after = factory.cache_stats()
    assert [e.data for e in tail] == data[-5:]
    assert after.hits - before.hits == 5
    cold = await ml.read_entries(EARLIEST, 50)  # evicted: read back with pread
    assert [e.data for e in cold] == data
    assert factory.cache_stats().misses - after.misses >= 40
    await factory.close()
    meta.close()
