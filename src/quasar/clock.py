"""Injected time.

Components take a ``Clock`` instead of calling ``time`` directly, so tests can drive
them on a virtual clock. Monotonic time is for timeouts and intervals; wall time is for
timestamps that leave the process (publish times, ledger creation times).
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic_ms(self) -> float: ...

    def wall_ms(self) -> int: ...


class SystemClock:
    """The real clock."""

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, wall_ms: int = 1_700_000_000_000) -> None:
        self._mono = 0.0
        self._wall = wall_ms

    def monotonic_ms(self) -> float:
        return self._mono

    def wall_ms(self) -> int:
        return self._wall

    def advance(self, ms: float) -> None:
        assert ms >= 0, "time does not go backwards"
        self._mono += ms
        self._wall += int(ms)
