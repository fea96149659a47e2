"""Injected timers: the coordinator never calls ``loop.call_later`` or ``asyncio.sleep``.

``AsyncioScheduler`` runs timers on the event loop in real time. ``VirtualScheduler``
runs them on a ``ManualClock`` and only when a test calls ``advance``, so timeout and
retry behaviour is tested deterministically and without sleeping.

Delays are in milliseconds of *monotonic* time; callers convert absolute wall-clock
deadlines to a delay once, when they arm a timer.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol

from quasar.clock import ManualClock


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """Runs callbacks after a delay; ``sleep`` suspends a coroutine for a delay."""

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` (on the event loop) ``delay_ms`` from now."""
        ...

    async def sleep(self, delay_ms: float) -> None: ...


class AsyncioScheduler:
    """Real time on the running event loop."""

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        return loop.call_later(max(delay_ms, 0.0) / 1000.0, callback)

    async def sleep(self, delay_ms: float) -> None:
        await asyncio.sleep(max(delay_ms, 0.0) / 1000.0)


class _VirtualTimer:
    __slots__ = ("due_ms", "callback", "cancelled")

    def __init__(self, due_ms: float, callback: Callable[[], None]) -> None:
        self.due_ms = due_ms
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualScheduler:
    """Timers on a ``ManualClock``; time moves only in ``advance`` (tests, simulation).

    Timers due at the same time run in the order they were armed. After each timer
    the event loop is allowed to run until it is idle, so the work a timer starts
    (appends to an in-memory ledger, retries, ...) happens "at" that virtual instant.
    """

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._heap: list[tuple[float, int, _VirtualTimer]] = []
        self._order = itertools.count()

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _VirtualTimer(self.clock.monotonic_ms() + max(delay_ms, 0.0), callback)
        heapq.heappush(self._heap, (timer.due_ms, next(self._order), timer))
        return timer

    async def sleep(self, delay_ms: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        timer = self.call_later(delay_ms, wake)
        try:
            await fut
        finally:
            timer.cancel()

    def pending(self) -> int:
        """Timers armed and not cancelled."""
        return sum(1 for _, _, t in self._heap if not t.cancelled)

    async def advance(self, ms: float) -> None:
        """Move virtual time forward by ``ms``, running every timer that falls due."""
        assert ms >= 0, "time does not go backwards"
        target = self.clock.monotonic_ms() + ms
        await settle()
        while self._heap and self._heap[0][0] <= target:
            due, _, timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            now = self.clock.monotonic_ms()
            if due > now:
                self.clock.advance(due - now)
            timer.callback()
            await settle()
        now = self.clock.monotonic_ms()
        if target > now:
            self.clock.advance(target - now)
        await settle()


async def settle(max_rounds: int = 10_000) -> None:
    """Let the event loop run until nothing is ready to run (test helper).

    Uses CPython's ``BaseEventLoop._ready`` queue to see idleness; on a loop without
    it, yields a fixed number of times. Work waiting on threads (file storage) is not
    "ready" and is not waited for: use it with in-memory storage.
    """
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)
    for _ in range(max_rounds if ready is not None else 100):
        await asyncio.sleep(0)
        if ready is not None and not ready:
            return
