"""Unit tests of the building blocks: range set, ledger-list arithmetic, retention."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quasar.storage import Position, RetentionPolicy
from quasar.storage.ledger_list import LedgerList, LedgerState
from quasar.storage.ledger_policy import ledgers_to_trim
from quasar.storage.ranges import PositionRangeSet


def P(ledger: int, entry: int) -> Position:
    return Position(ledger, entry)


def test_range_set_merges_and_counts() -> None:
    r = PositionRangeSet()
    for e in [5, 7, 6, 1, 2, 9]:
        assert r.add(P(3, e))
    assert not r.add(P(3, 6))
    r.add(P(4, 0))
    assert list(r) == [(3, 1, 2), (3, 5, 7), (3, 9, 9), (4, 0, 0)]
    assert r.count == 7 and len(r) == 4
    assert r.range_containing(P(3, 6)) == (3, 5, 7)
    assert P(3, 8) not in r and P(4, 0) in r and P(2, 1) not in r


def test_range_set_remove_through_keeps_straddling_tail() -> None:
    r = PositionRangeSet()
    for e in range(10, 20):
        r.add(P(1, e))
    r.add(P(2, 3))
    r.remove_through(P(1, 14))
    assert list(r) == [(1, 15, 19), (2, 3, 3)]
    assert r.count == 6
    r.remove_through(P(2, 0))
    assert list(r) == [(2, 3, 3)] and r.count == 1
    r.remove_through(P(0, 0))
    assert r.count == 1


def test_range_set_add_range_rejects_overlap() -> None:
    r = PositionRangeSet()
    r.add_range(1, 5, 10)
    r.add_range(1, 12, 12)
    with pytest.raises(ValueError):
        r.add_range(1, 10, 11)
    with pytest.raises(ValueError):
        r.add_range(1, 3, 2)
    assert r.count == 7


@given(st.sets(st.tuples(st.integers(0, 3), st.integers(0, 40)), max_size=80))
def test_range_set_matches_a_set(points: set[tuple[int, int]]) -> None:
    r = PositionRangeSet()
    for lid, e in points:
        r.add(P(lid, e))
    assert r.count == len(points)
    covered = {(lid, e) for lid, a, b in r for e in range(a, b + 1)}
    assert covered == points
    ranges = list(r)
    assert ranges == sorted(ranges)
    for (l1, _, b1), (l2, a2, _) in zip(ranges, ranges[1:], strict=False):
        assert l1 < l2 or b1 + 1 < a2  # disjoint and not adjacent within a ledger


def ledger_list(*counts: int, first_id: int = 10) -> LedgerList:
    ll = LedgerList()
    for i, n in enumerate(counts):
        ll.append(
            LedgerState(
                first_id + i, 0, entries=n, assigned=n, sealed=i < len(counts) - 1
            )
        )
    return ll


def test_position_arithmetic_skips_empty_ledgers() -> None:
    ll = ledger_list(2, 0, 3, 0)  # ledgers 10, 11 (empty), 12, 13 (current, empty)
    assert ll.next_position(P(10, 1)) == P(12, 0)
    assert ll.previous_position(P(12, 0)) == P(10, 1)
    assert ll.next_position(P(12, 2)) == P(13, 0)
    assert ll.previous_position(P(13, 0)) == P(12, 2)
    assert ll.previous_position(P(10, 0)) == P(10, -1)
    assert ll.next_position(P(1, 5)) == P(10, 0)  # before every ledger
    assert ll.first_at_or_after(P(10, 2)) == P(12, 0)
    assert ll.first_at_or_after(P(12, 3)) is None
    assert ll.count_entries(P(10, 1), P(12, 1)) == 3
    assert ll.first_position() == P(10, 0)
    assert ll.number_of_entries == 5


def test_unconfirmed_entries_are_not_counted_but_not_skipped() -> None:
    ll = LedgerList()
    ll.append(LedgerState(1, 0, entries=1, assigned=3, sealed=True))
    ll.append(LedgerState(2, 0, entries=0, assigned=2))
    assert ll.next_position(P(1, 0)) == P(1, 1)  # pending entries are not jumped over
    assert ll.first_at_or_after(P(1, 1)) is None  # nor readable
    assert ll.count_entries(P(1, 0), P(2, 5)) == 1


def test_retention_selection() -> None:
    ledgers = [
        LedgerState(
            i, 0, entries=1, size=100, assigned=1, sealed=True, closed_at_ms=1000 * i
        )
        for i in range(1, 5)
    ]
    ledgers[-1].sealed = False  # current
    keep_all = RetentionPolicy(-1, -1)
    assert ledgers_to_trim(ledgers, 99, 400, keep_all, 10_000) == []
    assert [
        s.ledger_id for s in ledgers_to_trim(ledgers, 99, 400, RetentionPolicy(), 0)
    ] == [1, 2, 3]
    assert [
        s.ledger_id for s in ledgers_to_trim(ledgers, 3, 400, RetentionPolicy(), 0)
    ] == [1, 2]
    by_time = RetentionPolicy(retention_time_minutes=1, retention_size_mb=-1)
    assert ledgers_to_trim(ledgers, 99, 400, by_time, 60_000 + 1000) == []
    assert [
        s.ledger_id for s in ledgers_to_trim(ledgers, 99, 400, by_time, 60_000 + 1001)
    ] == [1]
