"""Choosing a partition for a message on a partitioned topic.

Messages with a partition key (or ordering key) always go to
``(murmur3_32(key) & 0x7FFFFFFF) % num_partitions``: Murmur3 x86 32-bit with seed 0
over the key's UTF-8 bytes (computed by the ``mmh3`` package), made non-negative. The
hash is stable across processes, Python versions and platforms (unlike ``hash()``), so
every producer sends a key to the same partition, and it is the same function Pulsar's
Java client uses for its Murmur3 hashing scheme (``Murmur3_32Hash``).

Messages without a key follow the routing mode: round robin (switching partition per
message, or per batch window when batching is on, as the C++ client does so batches
stay full), a single partition chosen at random once, or a user ``message_router``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import mmh3

from quasar.clock import Clock, SystemClock

# Java's Integer.MAX_VALUE: Pulsar's Murmur3_32Hash.makeHash masks the signed 32-bit
# hash with it, so a key's partition is never negative.
_INT32_MAX = 0x7FFFFFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Murmur3 x86 32-bit hash of ``data`` (unsigned result)."""
    return mmh3.hash(data, seed, signed=False)


def key_hash(key: str | bytes) -> int:
    """Non-negative 31-bit hash of a routing key (see the module docstring)."""
    data = key.encode("utf-8") if isinstance(key, str) else key
    return mmh3.hash(data, 0, signed=False) & _INT32_MAX


def partition_for_key(key: str | bytes, num_partitions: int) -> int:
    """The partition every message with this key goes to."""
    return key_hash(key) % num_partitions


class RoundRobinRouter:
    """Round robin over partitions for keyless messages; key hash otherwise.

    Without batching each message moves to the next partition. With batching the router
    stays on one partition until ``batching_max_messages`` messages were routed there or
    ``batching_max_publish_delay_ms`` passed since it switched, so that a batch is not
    split one message per partition.
    """

    def __init__(
        self,
        num_partitions: int,
        batching_enabled: bool = False,
        batching_max_messages: int = 1000,
        batching_max_publish_delay_ms: float = 10.0,
        clock: Clock | None = None,
        start: int | None = None,
    ) -> None:
        self._n = num_partitions
        self._batching = batching_enabled
        self._max_messages = max(1, batching_max_messages)
        self._delay_ms = batching_max_publish_delay_ms
        self._clock = clock or SystemClock()
        self._current = random.randrange(num_partitions) if start is None else start
        self._routed_here = 0
        self._switched_at_ms = self._clock.monotonic_ms()

    def choose(self, key: str | bytes | None, num_partitions: int) -> int:
        if key:
            return partition_for_key(key, num_partitions)
        self._n = num_partitions
        if not self._batching:
            self._current = (self._current + 1) % self._n
            return self._current
        now = self._clock.monotonic_ms()
        if (
            self._routed_here >= self._max_messages
            or now - self._switched_at_ms >= self._delay_ms
        ):
            self._current = (self._current + 1) % self._n
            self._routed_here = 0
            self._switched_at_ms = now
        self._routed_here += 1
        return self._current % self._n

    def choose_keyless(self, count: int, num_partitions: int) -> int:
        """The partition of ``count`` keyless messages sent together: as
        :meth:`choose` for the first, which the rest follow."""
        partition = self.choose(None, num_partitions)
        self._routed_here += count - 1
        return partition


class SinglePartitionRouter:
    """All keyless messages to one partition picked at random when created."""

    def __init__(self, num_partitions: int, start: int | None = None) -> None:
        self._partition = random.randrange(num_partitions) if start is None else start

    def choose(self, key: str | bytes | None, num_partitions: int) -> int:
        if key:
            return partition_for_key(key, num_partitions)
        return self._partition % num_partitions

    def choose_keyless(self, count: int, num_partitions: int) -> int:
        """The partition of ``count`` keyless messages sent together."""
        return self._partition % num_partitions


class CustomRouter:
    """Delegates to a user function ``router(message, num_partitions) -> int``."""

    def __init__(self, router: Callable[[object, int], int]) -> None:
        self._router = router

    def choose_for(self, message: object, num_partitions: int) -> int:
        """Ask the user function; raises ValueError for an out-of-range answer."""
        partition = int(self._router(message, num_partitions))
        if not 0 <= partition < num_partitions:
            raise ValueError(
                f"message_router returned {partition}, not in [0, {num_partitions})"
            )
        return partition
