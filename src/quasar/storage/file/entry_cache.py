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

# Per-entry bookkeeping (dict slot, key tuple, bytes object header), counted against
# the bound so that many tiny entries cannot blow past it.
_ENTRY_OVERHEAD_BYTES = 128


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
        self._entries: OrderedDict[Position, bytes] = OrderedDict()
        self._per_ledger: dict[int, int] = {}  # ledger id -> cached entries
        self._size = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def put(self, position: Position, data: bytes) -> None:
        cost = len(data) + _ENTRY_OVERHEAD_BYTES
        if cost > self._max:
            return
        self._entries[position] = data
        self._size += cost
        lid = position.ledger_id
        self._per_ledger[lid] = self._per_ledger.get(lid, 0) + 1
        while self._size > self._max:
            old_pos, old = self._entries.popitem(last=False)
            self._forget(old_pos, old)
            self.evictions += 1

    def get(self, position: Position) -> bytes | None:
        data = self._entries.get(position)
        if data is None:
            self.misses += 1
        else:
            self.hits += 1
        return data

    def invalidate_ledger(self, ledger_id: int) -> None:
        """Drop every entry of a ledger (it was deleted)."""
        if not self._per_ledger.get(ledger_id):
            return
        doomed = [p for p in self._entries if p.ledger_id == ledger_id]
        for pos in doomed:
            self._forget(pos, self._entries.pop(pos))

    def _forget(self, position: Position, data: bytes) -> None:
        self._size -= len(data) + _ENTRY_OVERHEAD_BYTES
        lid = position.ledger_id
        left = self._per_ledger[lid] - 1
        if left:
            self._per_ledger[lid] = left
        else:
            del self._per_ledger[lid]

    def stats(self) -> EntryCacheStats:
        return EntryCacheStats(
            self._size, len(self._entries), self.hits, self.misses, self.evictions
        )
