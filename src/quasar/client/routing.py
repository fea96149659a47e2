"""Choosing a partition for a message on a partitioned topic.

Messages with a partition key (or ordering key) always go to
``murmur3_32(key) & 0x7FFFFFFF) % num_partitions``: Murmur3 x86 32-bit with seed 0 over
the key's UTF-8 bytes, made non-negative. The hash is stable across processes, Python
versions and platforms (unlike ``hash()``), so every producer sends a key to the same
partition, and it is the same function Pulsar's Java client uses for its Murmur3
hashing scheme.

Messages without a key follow the routing mode: round robin (switching partition per
message, or per batch window when batching is on, as the C++ client does so batches
stay full), a single partition chosen at random once, or a user ``message_router``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from quasar.clock import Clock, SystemClock

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_MASK32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Murmur3 x86 32-bit hash of ``data`` (unsigned result)."""
    h = seed & _MASK32
    n_blocks = len(data) // 4
    for i in range(n_blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _C1) & _MASK32
        k = _rotl32(k, 15)
        k = (k * _C2) & _MASK32
        h ^= k
        h = _rotl32(h, 13)
        h = (h * 5 + 0xE6546B64) & _MASK32
    tail = data[4 * n_blocks :]
    k = 0
    if len(tail) >= 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if len(tail) >= 1:
        k ^= tail[0]
        k = (k * _C1) & _MASK32
        k = _rotl32(k, 15)
        k = (k * _C2) & _MASK32
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h


def key_hash(key: str | bytes) -> int:
    """Non-negative 31-bit hash of a routing key (see the module docstring)."""
    data = key.encode("utf-8") if isinstance(key, str) else key
    return murmur3_32(data) & 0x7FFFFFFF


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


class SinglePartitionRouter:
    """All keyless messages to one partition picked at random when created."""

    def __init__(self, num_partitions: int, start: int | None = None) -> None:
        self._partition = random.randrange(num_partitions) if start is None else start

    def choose(self, key: str | bytes | None, num_partitions: int) -> int:
        if key:
            return partition_for_key(key, num_partitions)
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
