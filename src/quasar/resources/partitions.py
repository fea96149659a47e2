"""How many partitions a partitioned topic may have.

Pulsar keeps a partition count in a Java ``int``, and ``maxNumPartitionsPerPartitionedTopic``
bounds it further (0: only the ``int`` bounds it). The broker checks every count that can
create partitions against that bound: an admin create or update, the broker-wide
``defaultNumPartitions`` and a namespace's ``autoTopicCreationOverride`` (both used when
a client's lookup auto-creates a partitioned topic). A count is cheap to record, since
partitions are created on first use, but every listing of the namespace names every
partition, so an unbounded count is an unbounded answer.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from quasar.errors import REFUSED_PARTITIONS, NotAcceptableError, tag_refusal
from quasar.protocol.topic_name import PARTITION_SUFFIX

__all__ = [
    "JAVA_INT_MAX",
    "check_partition_count",
    "lexicographic_indices",
    "partition_names",
    "sorted_unique",
    "too_many_partitions",
]

# Pulsar's partition counts are Java ints; a larger JSON number is not a count at all.
JAVA_INT_MAX = (1 << 31) - 1


def too_many_partitions(max_partitions: int) -> str:
    """Pulsar's message for a count above ``maxNumPartitionsPerPartitionedTopic``."""
    return f"Number of partitions should be less than or equal to {max_partitions}"


def check_partition_count(partitions: int, max_partitions: int) -> None:
    """Accept ``partitions`` (>= 1) under the bound ``max_partitions`` (0: none).

    Raises:
        NotAcceptableError: fewer than one partition, or more than the bound (406,
            Pulsar's status for both), tagged as a refusal of hostile input.
    """
    if isinstance(partitions, bool) or partitions < 1:
        raise tag_refusal(
            NotAcceptableError("Number of partitions must be more than 0"), REFUSED_PARTITIONS
        )
    if partitions > JAVA_INT_MAX or 0 < max_partitions < partitions:
        raise tag_refusal(
            NotAcceptableError(
                too_many_partitions(max_partitions if max_partitions > 0 else JAVA_INT_MAX)
            ),
            REFUSED_PARTITIONS,
        )


def lexicographic_indices(count: int) -> Iterator[int]:
    """``0 .. count-1`` in the order of their decimal strings ("0", "1", "10", "11",
    ..., "2", ...), which is how partition names sort, in constant memory."""
    if count <= 0:
        return
    yield 0
    last = count - 1
    current = 1
    for _ in range(last):
        yield current
        if current * 10 <= last:
            current *= 10
        else:
            # Climb while this decimal place is used up, then step to the sibling.
            while current % 10 == 9 or current + 1 > last:
                current //= 10
            current += 1


def partition_names(parent: str, count: int) -> Iterator[str]:
    """The full names of ``parent``'s ``count`` partitions, sorted as strings, generated
    one at a time."""
    prefix = parent + PARTITION_SUFFIX
    return (f"{prefix}{i}" for i in lexicographic_indices(count))


def sorted_unique(streams: Iterable[Iterable[str]]) -> Iterator[str]:
    """Merge sorted streams of names into one sorted stream without repeats (a used
    partition is both registered as a topic and named by its topic's count)."""
    previous = None
    for name in heapq.merge(*streams):
        if name != previous:
            yield name
            previous = name
