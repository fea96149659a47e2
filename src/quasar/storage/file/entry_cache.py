"""Recently appended entries kept in memory, so tailing readers never touch disk.

One cache per factory, shared by all its managed ledgers and bounded by
``cache_size_bytes_max``. Entries are inserted when appended and evicted oldest
first (FIFO): readers that keep up with the producers hit, readers catching up on an
old backlog read from disk and do not flush the cache for everyone else (disk reads
are not inserted).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from quasar.storage.api import Position

# Per-entry bookkeeping (dict slot, key, bytes object header), counted against
# the bound so that many tiny entries cannot blow past it.
_ENTRY_OVERHEAD_BYTES = 128

# Entries are keyed by an int, not by Position: a NamedTuple stays tracked by the
# cyclic garbage collector for its whole life, so tens of thousands of cached
# positions made every full collection walk them (25-150 ms pauses at 10k msg/s).
# Ints are never tracked.
_ENTRY_BITS = 40


def _ledger_of(key: int) -> int:
    return key >> _ENTRY_BITS


@dataclass
class EntryCacheStats:
    size_bytes: int
    entries: int
    hits: int
    misses: int
    evictions: int


class EntryCache:
    """FIFO cache of entry bytes keyed by position."""

    def __init__(self, cache_size_bytes_max: int) -> None:
        self._max = cache_size_bytes_max
        self._entries: OrderedDict[int, bytes] = OrderedDict()
        self._per_ledger: dict[int, int] = {}  # ledger id -> cached entries
        self._size = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def put(self, position: Position, data: bytes) -> None:
        self.put_at(position.ledger_id, position.entry_id, data)

    def put_at(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        """``put`` without building a ``Position`` (the append path)."""
        cost = len(data) + _ENTRY_OVERHEAD_BYTES
        if cost > self._max:
            return
        assert 0 <= entry_id < 1 << _ENTRY_BITS, (ledger_id, entry_id)
        self._entries[(ledger_id << _ENTRY_BITS) | entry_id] = data
        self._size += cost
        lid = ledger_id
        self._per_ledger[lid] = self._per_ledger.get(lid, 0) + 1
        while self._size > self._max:
            old_key, old = self._entries.popitem(last=False)
            self._forget(old_key, old)
            self.evictions += 1

    def get(self, position: Position) -> bytes | None:
        return self.get_at(position.ledger_id, position.entry_id)

    def get_at(self, ledger_id: int, entry_id: int) -> bytes | None:
        """``get`` without building a ``Position`` (the read path)."""
        if entry_id < 0:
            return None
        data = self._entries.get((ledger_id << _ENTRY_BITS) | entry_id)
        if data is None:
            self.misses += 1
        else:
            self.hits += 1
        return data

    def invalidate_ledger(self, ledger_id: int) -> None:
        """Drop every entry of a ledger (it was deleted)."""
        if not self._per_ledger.get(ledger_id):
            return
        doomed = [k for k in self._entries if _ledger_of(k) == ledger_id]
        for key in doomed:
            self._forget(key, self._entries.pop(key))

    def _forget(self, key: int, data: bytes) -> None:
        self._size -= len(data) + _ENTRY_OVERHEAD_BYTES
        lid = key >> _ENTRY_BITS  # _ledger_of, inlined: once per entry evicted
        left = self._per_ledger[lid] - 1
        if left:
            self._per_ledger[lid] = left
        else:
            del self._per_ledger[lid]

    def stats(self) -> EntryCacheStats:
        return EntryCacheStats(
            self._size, len(self._entries), self.hits, self.misses, self.evictions
        )
