"""The ordered ledger list of one managed ledger and the position arithmetic over it.

A managed ledger is a list of ledgers sorted by id; entry ids within a ledger are
dense (``0..n-1``). Two counts exist per ledger: ``assigned`` (positions handed out by
``add_entry``) and ``entries`` (those already durable). Appends confirm in position
order, so every ledger before the one holding the last confirmed entry is complete.

Boundary arithmetic (``next_position``, ``previous_position``) uses ``assigned`` so a
cursor never skips an entry that is still being written; counting and reading use
``entries`` so nothing unconfirmed is ever visible.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from quasar.storage.api import LedgerInfo, Position, new_position


@dataclass
class LedgerState:
    """Bookkeeping for one ledger of a managed ledger."""

    ledger_id: int
    timestamp_ms: int  # creation time, wall clock (LedgerInfo.timestamp_ms)
    entries: int = 0  # confirmed (durable) entries
    size: int = 0  # confirmed payload bytes
    assigned: int = 0  # positions handed out, confirmed or not
    assigned_size: int = 0
    sealed: bool = False  # no further appends will be assigned to it
    closed_at_ms: int = 0  # wall time it was sealed; retention ages ledgers from here
    created_mono_ms: float = 0.0  # this process's monotonic clock, for rollover age

    @property
    def complete(self) -> bool:
        """Sealed and every assigned entry confirmed: its contents are final."""
        return self.sealed and self.entries == self.assigned

    def info(self) -> LedgerInfo:
        return LedgerInfo(self.ledger_id, self.entries, self.size, self.timestamp_ms)


class LedgerList:
    """Ledgers sorted by id, with running totals of confirmed entries and bytes."""

    def __init__(self) -> None:
        self._ledgers: list[LedgerState] = []
        self._ids: list[int] = []
        self.number_of_entries = 0
        self.total_size = 0

    def __len__(self) -> int:
        return len(self._ledgers)

    def __iter__(self) -> Iterator[LedgerState]:
        return iter(self._ledgers)

    def all(self) -> list[LedgerState]:
        return list(self._ledgers)

    @property
    def last(self) -> LedgerState:
        assert self._ledgers, "a managed ledger always has a current ledger"
        return self._ledgers[-1]

    def get(self, ledger_id: int) -> LedgerState | None:
        i = bisect_left(self._ids, ledger_id)
        if i < len(self._ids) and self._ids[i] == ledger_id:
            return self._ledgers[i]
        return None

    def append(self, state: LedgerState) -> None:
        assert not self._ids or state.ledger_id > self._ids[-1], (
            "ledger ids must increase"
        )
        self._ledgers.append(state)
        self._ids.append(state.ledger_id)
        self.number_of_entries += state.entries
        self.total_size += state.size

    def insert(self, state: LedgerState) -> None:
        """Put back a ledger removed earlier (undoing a trim whose metadata write failed)."""
        i = bisect_left(self._ids, state.ledger_id)
        assert i == len(self._ids) or self._ids[i] != state.ledger_id, (
            "duplicate ledger"
        )
        self._ledgers.insert(i, state)
        self._ids.insert(i, state.ledger_id)
        self.number_of_entries += state.entries
        self.total_size += state.size

    def remove(self, ledger_id: int) -> LedgerState:
        i = bisect_left(self._ids, ledger_id)
        assert i < len(self._ids) and self._ids[i] == ledger_id, (
            f"no ledger {ledger_id}"
        )
        state = self._ledgers.pop(i)
        del self._ids[i]
        self.number_of_entries -= state.entries
        self.total_size -= state.size
        return state

    def confirm(self, state: LedgerState, size: int) -> None:
        """Record that the next assigned entry of ``state`` became durable."""
        assert state.entries < state.assigned, (
            "confirming an entry that was never assigned"
        )
        state.entries += 1
        state.size += size
        self.number_of_entries += 1
        self.total_size += size

    # ----------------------------------------------------------------------------
    # Position arithmetic.

    def first_at_or_after(self, position: Position) -> Position | None:
        """The first confirmed, retained entry at or after ``position``."""
        ledgers = self._ledgers
        i = bisect_left(self._ids, position.ledger_id)
        if i < len(ledgers) and ledgers[i].ledger_id == position.ledger_id:
            entry = max(position.entry_id, 0)
            if entry < ledgers[i].entries:
                return new_position((position.ledger_id, entry))
            i += 1
        for state in ledgers[i:]:
            if state.entries > 0:
                return new_position((state.ledger_id, 0))
            if state.assigned > 0:
                break  # confirmations are in order: nothing later is confirmed either
        return None

    def next_position(self, position: Position) -> Position:
        """The position right after ``position``, crossing into the next ledger."""
        ledgers = self._ledgers
        n = len(ledgers)
        i = bisect_left(self._ids, position.ledger_id)
        if i == n:
            # Beyond the last ledger: there is nothing to cross into.
            return new_position((position.ledger_id, position.entry_id + 1))
        if ledgers[i].ledger_id == position.ledger_id:
            if position.entry_id + 1 < ledgers[i].assigned or i == n - 1:
                return new_position((position.ledger_id, position.entry_id + 1))
            i += 1
        # Skip empty ledgers; the last ledger is where the next entry will go.
        while i < n - 1 and ledgers[i].assigned == 0:
            i += 1
        return new_position((ledgers[i].ledger_id, 0))

    def previous_position(self, position: Position) -> Position:
        """The position right before ``position``, crossing into the previous ledger.

        With no earlier entry, returns ``(ledger, -1)`` for the first ledger at or
        after ``position`` ("before its first entry").
        """
        ledgers = self._ledgers
        i = bisect_left(self._ids, position.ledger_id)
        found = i < len(ledgers) and ledgers[i].ledger_id == position.ledger_id
        if found and position.entry_id > 0:
            return Position(position.ledger_id, position.entry_id - 1)
        j = i - 1
        while j >= 0 and ledgers[j].assigned == 0:
            j -= 1
        if j >= 0:
            return Position(ledgers[j].ledger_id, ledgers[j].assigned - 1)
        if i < len(ledgers):
            return Position(ledgers[i].ledger_id, -1)
        return Position(position.ledger_id, min(position.entry_id - 1, -1))

    def count_entries(self, first: Position, last: Position) -> int:
        """Confirmed, retained entries in the inclusive range ``[first, last]``."""
        if last < first:
            return 0
        lo_i = bisect_left(self._ids, first.ledger_id)
        hi_i = bisect_right(self._ids, last.ledger_id)
        total = 0
        for state in self._ledgers[lo_i:hi_i]:
            lo = max(first.entry_id, 0) if state.ledger_id == first.ledger_id else 0
            hi = (
                last.entry_id
                if state.ledger_id == last.ledger_id
                else state.entries - 1
            )
            hi = min(hi, state.entries - 1)
            if hi >= lo:
                total += hi - lo + 1
        return total

    def first_position(self) -> Position:
        """The first retained entry, or where the next entry will go if there is none."""
        # Whole ledgers are trimmed, so the first non-empty ledger starts at entry 0.
        # An entry still being written counts: it is what an earliest cursor reads first.
        for state in self._ledgers:
            if state.assigned > 0:
                return Position(state.ledger_id, 0)
        return Position(self.last.ledger_id, 0)
