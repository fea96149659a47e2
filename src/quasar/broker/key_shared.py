"""Key_Shared: which consumer a message's key belongs to (Pulsar's sticky key selectors).

The *sticky key* of an entry is its ordering key if it has one, else its partition key,
else Pulsar's fixed ``NONE_KEY``. A key batch carries the key of its messages in the
outer metadata (``BatchingType.KeyBased``), so a whole entry goes to one consumer.

Its hash is Pulsar's ``Murmur3_32Hash.makeHash``: Murmur3 x86 32-bit with seed 0 over
the key's bytes, made non-negative (``& Integer.MAX_VALUE``). The two selectors follow
Pulsar 3.x:

* ``ConsistentHashSelector`` (AUTO_SPLIT, ``subscriptionKeySharedUseConsistentHashing``):
  every consumer puts ``subscriptionKeySharedConsistentHashingReplicaPoints`` points on
  a ring, point ``i`` at the hash of ``consumerName + str(i)``. A key belongs to the
  first point at or after its hash, wrapping to the first point. Consumers sharing a
  name share points; the key's hash modulo their number picks one of them, ordered by
  name and then by when they joined.
* ``StickyRangeSelector`` (STICKY): each consumer declares inclusive ranges of the
  hash space ``[0, 65535]``; a key's slot is its hash modulo 65536. Ranges of two
  consumers may not overlap (``ConsumerAssignError``), and a slot no consumer covers
  has no consumer: its entries wait until one does.

Both are pure: no I/O and no clock, tested with plain calls.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Protocol

import mmh3

from quasar.errors import REFUSED_KEY_SHARED_RANGES, ConsumerAssignError, tag_refusal
from quasar.protocol import pb

# Pulsar's DEFAULT_HASH_RANGE_SIZE: the space STICKY hash ranges are expressed in.
KEY_HASH_RANGE_SIZE = 65536
# The sticky key of a message that has neither an ordering key nor a partition key.
NONE_KEY = b"NONE_KEY"
_INT32_MAX = 0x7FFF_FFFF


class KeyedConsumer(Protocol):
    """What a selector needs of a consumer."""

    @property
    def consumer_name(self) -> str: ...

    @property
    def order(self) -> int:
        """When it joined, relative to others (ties between equal names)."""
        ...


def key_hash(key: bytes | None) -> int:
    """Pulsar's ``Murmur3_32Hash.makeHash`` of a sticky key (``None``: ``NONE_KEY``),
    in ``[0, 2**31)``."""
    return mmh3.hash(NONE_KEY if key is None else key, 0, signed=False) & _INT32_MAX


def sticky_key_hash(key: bytes) -> int:
    """Where ``key`` falls in the STICKY hash range space ``[0, 65536)``."""
    return key_hash(key) % KEY_HASH_RANGE_SIZE


def format_range(start: int, end: int) -> str:
    """A hash range as Pulsar's stats print it (``Range.toString``)."""
    return f"[{start}, {end}]"


class ConsistentHashSelector:
    """AUTO_SPLIT: Pulsar's ``ConsistentHashingStickyKeyConsumerSelector``.

    The ring is a sorted list of point hashes and, per point, the consumers on it
    sorted by (name, join order). A consumer joining or leaving changes only its own
    points.
    """

    def __init__(self, replica_points: int) -> None:
        self.replica_points = replica_points
        self._hashes: list[int] = []  # sorted point hashes
        self._points: dict[int, list[KeyedConsumer]] = {}

    def _point_hashes(self, c: KeyedConsumer) -> list[int]:
        return [key_hash(f"{c.consumer_name}{i}".encode()) for i in range(self.replica_points)]

    def add(self, c: KeyedConsumer) -> None:
        for h in self._point_hashes(c):
            on_point = self._points.get(h)
            if on_point is None:
                self._points[h] = [c]
                bisect.insort(self._hashes, h)
            elif c not in on_point:
                # Two of a consumer's own points may collide; it sits there once.
                on_point.append(c)
                on_point.sort(key=lambda x: (x.consumer_name, x.order))

    def remove(self, c: KeyedConsumer) -> None:
        for h in self._point_hashes(c):
            on_point = self._points.get(h)
            if on_point is None or c not in on_point:
                continue
            on_point.remove(c)
            if not on_point:
                del self._points[h]
                i = bisect.bisect_left(self._hashes, h)
                del self._hashes[i]

    def select(self, h: int) -> KeyedConsumer | None:
        """The consumer of a key whose ``key_hash`` is ``h``; None with no consumer."""
        hashes = self._hashes
        if not hashes:
            return None
        i = bisect.bisect_left(hashes, h)
        on_point = self._points[hashes[i % len(hashes)]]
        return on_point[h % len(on_point)]

    def ranges(self) -> dict[KeyedConsumer, list[tuple[int, int]]]:
        """Each consumer's inclusive hash ranges (``keyHashRanges`` in its stats): a
        point owns the hashes after the previous point up to itself, and the first
        point also those after the last. Consumers sharing a point share its range."""
        out: dict[KeyedConsumer, list[tuple[int, int]]] = {}
        start = 0
        for h in self._hashes:
            for c in self._points[h]:
                out.setdefault(c, []).append((start, h))
            start = h + 1
        if self._hashes and start <= _INT32_MAX:
            for c in self._points[self._hashes[0]]:
                out.setdefault(c, []).append((start, _INT32_MAX))
        return out


def checked_ranges(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """A STICKY consumer's declared ranges, sorted, as Pulsar checks them.

    Raises:
        ConsumerAssignError: no range, a range outside ``[0, 65535]`` or with its start
            after its end, or two of them overlapping (counted as hostile input: a
            client's own policy check refuses all of these before sending).
    """
    if not ranges:
        raise tag_refusal(
            ConsumerAssignError("Ranges for KeyShared policy must not be empty."),
            REFUSED_KEY_SHARED_RANGES,
        )
    out = sorted(ranges)
    prev_end = -1
    for start, end in out:
        if start > end:
            raise tag_refusal(
                ConsumerAssignError("Fixed hash range start > end"), REFUSED_KEY_SHARED_RANGES
            )
        if start < 0 or end >= KEY_HASH_RANGE_SIZE:
            raise tag_refusal(
                ConsumerAssignError(
                    f"Ranges must be [0, {KEY_HASH_RANGE_SIZE - 1}] but provided range is "
                    f"{format_range(start, end)}"
                ),
                REFUSED_KEY_SHARED_RANGES,
            )
        if start <= prev_end:
            raise tag_refusal(
                ConsumerAssignError("Ranges for KeyShared policy with overlap"),
                REFUSED_KEY_SHARED_RANGES,
            )
        prev_end = end
    return out


class DeclaredRange(Protocol):
    """An ``IntRange`` of ``KeySharedMeta.hashRanges``."""

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


def declared_ranges(mode: int | None, ranges: Sequence[DeclaredRange]) -> tuple[tuple[int, int], ...]:
    """The hash ranges of a SUBSCRIBE's KeySharedMeta, kept only for STICKY (AUTO_SPLIT
    ignores them, as Pulsar does).

    Raises:
        ConsumerAssignError: more ranges than the hash space has slots (they cannot
            all be disjoint), refused before a frame's worth of them is copied.
    """
    if mode != pb.STICKY:
        return ()
    if len(ranges) > KEY_HASH_RANGE_SIZE:
        raise tag_refusal(
            ConsumerAssignError("Ranges for KeyShared policy with overlap"),
            REFUSED_KEY_SHARED_RANGES,
        )
    return tuple((r.start, r.end) for r in ranges)


class StickyRangeSelector:
    """STICKY: Pulsar's ``HashRangeExclusiveStickyKeyConsumerSelector``.

    Ranges of all consumers are kept sorted by start; at most 65536 of them exist,
    since they may not overlap (the bound on this map is the hash space itself).
    """

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ranges: list[tuple[int, int, KeyedConsumer]] = []  # sorted by start

    def add(self, c: KeyedConsumer, ranges: Sequence[tuple[int, int]]) -> None:
        """Raises: ConsumerAssignError (see ``checked_ranges``, and a range that
        overlaps another consumer's, named in the message)."""
        wanted = checked_ranges(ranges)
        for start, end in wanted:
            i = bisect.bisect_right(self._starts, end)
            if i > 0:
                o_start, o_end, other = self._ranges[i - 1]
                if o_end >= start:
                    raise ConsumerAssignError(
                        f"Range conflict with consumer {other.consumer_name}: "
                        f"{format_range(start, end)} overlaps {format_range(o_start, o_end)}"
                    )
        for start, end in wanted:
            i = bisect.bisect_left(self._starts, start)
            self._starts.insert(i, start)
            self._ranges.insert(i, (start, end, c))

    def remove(self, c: KeyedConsumer) -> None:
        kept = [r for r in self._ranges if r[2] is not c]
        self._ranges = kept
        self._starts = [r[0] for r in kept]

    def select(self, h: int) -> KeyedConsumer | None:
        """The consumer whose range holds the slot of hash ``h``; None if none does."""
        slot = h % KEY_HASH_RANGE_SIZE
        i = bisect.bisect_right(self._starts, slot)
        if i == 0:
            return None
        _, end, c = self._ranges[i - 1]
        return c if slot <= end else None

    def ranges(self) -> dict[KeyedConsumer, list[tuple[int, int]]]:
        out: dict[KeyedConsumer, list[tuple[int, int]]] = {}
        for start, end, c in self._ranges:
            out.setdefault(c, []).append((start, end))
        return out
