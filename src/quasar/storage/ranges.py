"""Sorted, disjoint ranges of acknowledged positions (a cursor's individually deleted set).

A range never crosses a ledger boundary: ``(ledger_id, first, last)`` covers entries
``first..last`` of one ledger. Whether the last entry of one ledger is "adjacent" to the
first of the next depends on the ledger list, which only the managed ledger knows, so
the cursor (not this class) decides when mark-delete can jump such a boundary.

The ranges live in one Python list sorted by ``(ledger_id, first)``; membership is a
bisect, insertion an O(n) memmove, which stays cheap up to the hundreds of thousands
of ranges that out-of-order acknowledgement can create. In-order acknowledgement never
reaches this class: the cursor advances mark-delete directly.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator

from quasar.storage.api import Position

_MAX = 2**63 - 1


class PositionRangeSet:
    """Disjoint inclusive ranges of positions, each within a single ledger."""

    __slots__ = ("_ranges", "_count")

    def __init__(self) -> None:
        self._ranges: list[tuple[int, int, int]] = []
        self._count = 0  # total number of positions covered, kept incrementally

    def __len__(self) -> int:
        """Number of ranges (not positions)."""
        return len(self._ranges)

    def __bool__(self) -> bool:
        return bool(self._ranges)

    @property
    def count(self) -> int:
        """Number of positions covered by all ranges."""
        return self._count

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return iter(self._ranges)

    def first(self) -> tuple[int, int, int] | None:
        return self._ranges[0] if self._ranges else None

    def as_pairs(self) -> list[tuple[Position, Position]]:
        """The ranges as inclusive ``(first, last)`` position pairs."""
        return [(Position(lid, a), Position(lid, b)) for lid, a, b in self._ranges]

    def _index_at_or_before(self, position: Position) -> int:
        """Index of the last range starting at or before ``position`` (or -1)."""
        return (
            bisect_right(self._ranges, (position.ledger_id, position.entry_id, _MAX))
            - 1
        )

    def range_containing(self, position: Position) -> tuple[int, int, int] | None:
        """The range that contains ``position``, if any."""
        i = self._index_at_or_before(position)
        if i >= 0:
            lid, first, last = self._ranges[i]
            if lid == position.ledger_id and first <= position.entry_id <= last:
                return self._ranges[i]
        return None

    def __contains__(self, position: object) -> bool:
        assert isinstance(position, Position)
        return self.range_containing(position) is not None

    def add(self, position: Position) -> bool:
        """Add one position, merging with neighbours; False if it was already present."""
        lid, entry = position
        i = self._index_at_or_before(position)
        ranges = self._ranges
        left = ranges[i] if i >= 0 and ranges[i][0] == lid else None
        if left is not None and left[1] <= entry <= left[2]:
            return False
        right_i = i + 1
        right = (
            ranges[right_i]
            if right_i < len(ranges) and ranges[right_i][0] == lid
            else None
        )
        joins_left = left is not None and left[2] + 1 == entry
        joins_right = right is not None and right[1] - 1 == entry
        if joins_left and joins_right:
            assert left is not None and right is not None
            ranges[i] = (lid, left[1], right[2])
            del ranges[right_i]
        elif joins_left:
            assert left is not None
            ranges[i] = (lid, left[1], entry)
        elif joins_right:
            assert right is not None
            ranges[right_i] = (lid, entry, right[2])
        else:
            ranges.insert(right_i, (lid, entry, entry))
        self._count += 1
        return True

    def add_range(self, ledger_id: int, first: int, last: int) -> None:
        """Add ``first..last`` of one ledger, disjoint from every range already held.

        Used when restoring persisted state, whose ranges are already merged.

        Raises:
            ValueError: the range is empty or overlaps an existing one.
        """
        if last < first:
            raise ValueError(f"empty range {ledger_id}:{first}..{last}")
        i = self._index_at_or_before(Position(ledger_id, first))
        prev = self._ranges[i] if i >= 0 else None
        nxt = self._ranges[i + 1] if i + 1 < len(self._ranges) else None
        if (prev is not None and (prev[0], prev[2]) >= (ledger_id, first)) or (
            nxt is not None and (nxt[0], nxt[1]) <= (ledger_id, last)
        ):
            raise ValueError(f"range {ledger_id}:{first}..{last} overlaps another")
        self._ranges.insert(i + 1, (ledger_id, first, last))
        self._count += last - first + 1

    def pop_first(self) -> tuple[int, int, int]:
        """Remove and return the first range."""
        first = self._ranges.pop(0)
        self._count -= first[2] - first[1] + 1
        return first

    def remove_through(self, position: Position) -> None:
        """Forget every position at or before ``position`` (mark-delete moved past it)."""
        ranges = self._ranges
        i = self._index_at_or_before(position)
        if i < 0:
            return
        lid, first, last = ranges[i]
        if lid == position.ledger_id and last > position.entry_id:
            # The range straddles the new mark-delete: keep its tail.
            self._count -= position.entry_id - first + 1
            ranges[i] = (lid, position.entry_id + 1, last)
            doomed = ranges[:i]
            del ranges[:i]
        else:
            doomed = ranges[: i + 1]
            del ranges[: i + 1]
        self._count -= sum(b - a + 1 for _, a, b in doomed)

    def clear(self) -> None:
        self._ranges.clear()
        self._count = 0

    def head(self, max_ranges: int) -> list[tuple[int, int, int]]:
        """The first ``max_ranges`` ranges (those nearest mark-delete)."""
        return self._ranges[:max_ranges]
