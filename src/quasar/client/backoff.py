"""Reconnect backoff: ``initial_ms`` doubled on each failure, capped at ``max_ms``.

This follows the C++ client's schedule (100 ms, 200 ms, 400 ms, ... up to 60 s). The
jitter is optional and its random source injectable so the schedule is testable.
"""

from __future__ import annotations

import random
from collections.abc import Callable


class Backoff:
    """Produces successive reconnect delays.

    ``next_delay_ms()`` returns ``initial_ms * 2**k`` (capped at ``max_ms``) for the
    k-th consecutive call since the last ``reset()``. With ``jitter`` > 0 each delay is
    reduced by a random fraction up to ``jitter`` so that many clients that lost the
    same broker do not reconnect in lock step.
    """

    def __init__(
        self,
        initial_ms: float = 100.0,
        max_ms: float = 60_000.0,
        jitter: float = 0.0,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if initial_ms <= 0 or max_ms < initial_ms:
            raise ValueError("need 0 < initial_ms <= max_ms")
        if not 0.0 <= jitter < 1.0:
            raise ValueError("jitter must be in [0, 1)")
        self.initial_ms = initial_ms
        self.max_ms = max_ms
        self._jitter = jitter
        self._rng = rng
        self._next_ms = initial_ms

    def next_delay_ms(self) -> float:
        """The delay before the next attempt; doubles the one after it."""
        delay = self._next_ms
        self._next_ms = min(self._next_ms * 2.0, self.max_ms)
        if self._jitter:
            delay -= delay * self._jitter * self._rng()
        return delay

    def reset(self) -> None:
        """Start again from ``initial_ms`` (after a successful connect)."""
        self._next_ms = self.initial_ms
