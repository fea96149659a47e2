"""The Key_Shared selectors against reference models written from Pulsar's rules.

AUTO_SPLIT (consistent hashing): consumer ``c`` has points at ``hash(c.name + str(i))``
for ``i < replica_points``; a key hash belongs to the first point at or after it,
wrapping to the first point; consumers sharing a point (the same name) split it by
``hash % count`` in (name, join order) order. STICKY: the consumer whose inclusive
range holds ``hash % 65536``, none when no range does; ranges may not overlap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quasar.broker.key_shared import (
    ConsistentHashSelector,
    StickyRangeSelector,
    checked_ranges,
    declared_ranges,
    key_hash,
)
from quasar.config import ServiceConfiguration
from quasar.errors import REFUSED_KEY_SHARED_RANGES, ConsumerAssignError, take_refusal
from quasar.protocol import pb

_order = count()


@dataclass(eq=False)
class _C:
    consumer_name: str
    order: int = field(default_factory=lambda: next(_order))


def _reference_owner(consumers: list[_C], points: int, h: int) -> _C:
    ring: dict[int, list[_C]] = {}
    for c in consumers:
        for i in range(points):
            on = ring.setdefault(key_hash(f"{c.consumer_name}{i}".encode()), [])
            if c not in on:
                on.append(c)
    hashes = sorted(ring)
    at = next((p for p in hashes if p >= h), hashes[0])
    on = sorted(ring[at], key=lambda c: (c.consumer_name, c.order))
    return on[h % len(on)]


def _ring(consumers: list[_C], points: int = 100) -> ConsistentHashSelector:
    s = ConsistentHashSelector(points)
    for c in consumers:
        s.add(c)
    return s


def test_a_key_belongs_to_the_first_point_at_or_after_its_hash() -> None:
    consumers = [_C("alpha"), _C("beta"), _C("gamma")]
    s = _ring(consumers)
    for n in range(300):
        h = key_hash(f"key-{n}".encode())
        assert s.select(h) is _reference_owner(consumers, 100, h)
    assert {s.select(key_hash(f"key-{n}".encode())) for n in range(300)} == set(consumers)


def test_consumers_with_one_name_split_their_shared_points() -> None:
    twins = [_C("same"), _C("same")]
    s = _ring(twins, points=10)
    owners = {s.select(key_hash(f"k{n}".encode())) for n in range(200)}
    assert owners == set(twins)
    for n in range(200):
        h = key_hash(f"k{n}".encode())
        assert s.select(h) is _reference_owner(twins, 10, h)


def test_leaving_takes_exactly_the_consumers_points_off() -> None:
    consumers = [_C(f"c{n}") for n in range(30)]
    s = _ring(consumers, points=20)
    stay = [c for n, c in enumerate(consumers) if n % 3]
    for n, c in enumerate(consumers):
        if n % 3 == 0:
            s.remove(c)
    fresh = _ring(stay, points=20)
    for n in range(500):
        h = key_hash(f"k{n}".encode())
        assert s.select(h) is fresh.select(h)
    s.remove(_C("never-joined"))  # a no-op
    for c in stay:
        s.remove(c)
    assert s.select(123) is None


@given(st.integers(min_value=0, max_value=0x7FFF_FFFF))
def test_key_hash_ranges_cover_the_hash_space_once_and_match_select(h: int) -> None:
    consumers = [_C("alpha"), _C("beta")]
    s = _ring(consumers, points=5)
    ranges = sorted((start, end, c) for c, rs in s.ranges().items() for start, end in rs)
    assert ranges[0][0] == 0 and ranges[-1][1] == 0x7FFF_FFFF
    for (_, end, _), (start, _, _) in zip(ranges, ranges[1:], strict=False):
        assert start == end + 1
    holder = next(c for start, end, c in ranges if start <= h <= end)
    assert holder is s.select(h)


def test_sticky_ranges_select_by_slot_and_leave_gaps_empty() -> None:
    low, high = _C("low"), _C("high")
    s = StickyRangeSelector()
    s.add(low, [(0, 99), (200, 299)])
    s.add(high, [(100, 199)])
    assert s.select(0) is low and s.select(99) is low and s.select(250) is low
    assert s.select(100) is high and s.select(199) is high
    assert s.select(300) is None and s.select(65535) is None
    assert s.select(65536 + 150) is high  # the slot is hash % 65536
    assert s.ranges() == {low: [(0, 99), (200, 299)], high: [(100, 199)]}
    s.remove(high)
    assert s.select(150) is None
    s.add(_C("again"), [(100, 199)])  # the freed range can be taken
    assert s.select(150) is not None


@pytest.mark.parametrize(
    "theirs", [[(50, 150)], [(0, 0)], [(99, 99)], [(250, 260)], [(0, 65535)], [(300, 400), (10, 20)]]
)
def test_overlapping_another_consumers_range_is_refused_and_changes_nothing(
    theirs: list[tuple[int, int]],
) -> None:
    first = _C("first")
    s = StickyRangeSelector()
    s.add(first, [(0, 99), (200, 299)])
    with pytest.raises(ConsumerAssignError, match="Range conflict with consumer first"):
        s.add(_C("second"), theirs)
    assert s.ranges() == {first: [(0, 99), (200, 299)]}


@pytest.mark.parametrize(
    "ranges",
    [[], [(10, 5)], [(-1, 10)], [(0, 65536)], [(0, 2**31 - 1)], [(0, 10), (10, 20)]],
)
def test_malformed_ranges_are_refused_as_hostile_input(ranges: list[tuple[int, int]]) -> None:
    with pytest.raises(ConsumerAssignError) as raised:
        checked_ranges(ranges)
    assert take_refusal(raised.value) == REFUSED_KEY_SHARED_RANGES
    with pytest.raises(ConsumerAssignError):
        StickyRangeSelector().add(_C("x"), ranges)


def test_well_formed_ranges_come_back_sorted() -> None:
    assert checked_ranges([(100, 200), (0, 99), (65535, 65535)]) == [
        (0, 99), (100, 200), (65535, 65535)
    ]


def test_the_key_shared_settings_load_with_pulsars_defaults() -> None:
    dispatch = ServiceConfiguration.load().dispatch
    assert dispatch.subscription_key_shared_use_consistent_hashing is True
    assert dispatch.subscription_key_shared_consistent_hashing_replica_points == 100
    loaded = ServiceConfiguration.load(
        overrides={"subscriptionKeySharedConsistentHashingReplicaPoints": "7"}
    )
    assert loaded.dispatch.subscription_key_shared_consistent_hashing_replica_points == 7
    with pytest.raises(ValueError, match="subscriptionKeySharedUseConsistentHashing"):
        ServiceConfiguration.load(overrides={"subscriptionKeySharedUseConsistentHashing": "false"})
    with pytest.raises(ValueError, match="subscriptionKeySharedConsistentHashingReplicaPoints"):
        ServiceConfiguration.load(
            overrides={"subscriptionKeySharedConsistentHashingReplicaPoints": "0"}
        )


def test_replica_points_set_how_many_points_a_consumer_puts_on_the_ring() -> None:
    s = ConsistentHashSelector(7)
    c = _C("only")
    s.add(c)
    (ranges,) = s.ranges().values()
    # Seven points give seven ranges, plus the one that wraps round to the first point.
    assert len(ranges) == 8


def test_declared_ranges_are_kept_for_sticky_only_and_bounded_by_the_hash_space() -> None:
    meta = pb.KeySharedMeta(keySharedMode=pb.STICKY)
    meta.hashRanges.add(start=0, end=9)
    assert declared_ranges(pb.STICKY, meta.hashRanges) == ((0, 9),)
    assert declared_ranges(pb.AUTO_SPLIT, meta.hashRanges) == ()
    assert declared_ranges(None, meta.hashRanges) == ()
    for n in range(65536):
        meta.hashRanges.add(start=n, end=n)
    with pytest.raises(ConsumerAssignError) as raised:
        declared_ranges(pb.STICKY, meta.hashRanges)
    assert take_refusal(raised.value) == REFUSED_KEY_SHARED_RANGES
