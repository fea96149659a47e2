"""``TimeoutTracker``: aborts OPEN transactions when their deadline passes.

One min-heap of ``(deadline, sequence)`` and one armed timer for its head, as Pulsar's
``TransactionTimeoutTrackerImpl``. Deadlines arrive as absolute wall-clock times (the
log stores ``start_time + timeout_ms``, which survives a restart) and are converted to
the monotonic clock once, when added: a wall-clock jump afterwards neither fires a
timeout early nor holds it back (failure scenario 42). After a restart, the
conversion happens again from the stored absolute deadline, so a transaction whose
deadline passed while the coordinator was down is aborted as soon as it is started.

Ended transactions are removed from the index at once and from the heap lazily; the
heap is rebuilt when stale entries outnumber live ones, so its size stays bounded by
twice the live transactions (plus a small constant).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from quasar.clock import Clock

from ..scheduler import Scheduler, TimerHandle

_COMPACT_SLACK = 64


class TimeoutTracker:
    """Calls ``on_timeout(sequence)`` once per transaction whose deadline passed."""

    def __init__(
        self, clock: Clock, scheduler: Scheduler, on_timeout: Callable[[int], None]
    ) -> None:
        self._clock = clock
        self._scheduler = scheduler
        self._on_timeout = on_timeout
        self._deadlines: dict[int, float] = {}  # sequence -> monotonic deadline (ms)
        self._heap: list[tuple[float, int]] = []
        self._timer: TimerHandle | None = None
        self._timer_due: float | None = None
        self._running = False

    def __len__(self) -> int:
        return len(self._deadlines)

    def deadline_of(self, sequence: int) -> float | None:
        """The monotonic deadline tracked for ``sequence`` (tests, stats)."""
        return self._deadlines.get(sequence)

    def add(self, sequence: int, deadline_wall_ms: int) -> None:
        """Track ``sequence`` until its absolute wall-clock deadline."""
        mono = self._clock.monotonic_ms() + (deadline_wall_ms - self._clock.wall_ms())
        self._deadlines[sequence] = mono
        heapq.heappush(self._heap, (mono, sequence))
        if self._running:
            self._arm()

    def remove(self, sequence: int) -> None:
        """Stop tracking ``sequence`` (it ended)."""
        if self._deadlines.pop(sequence, None) is None:
            return
        if len(self._heap) > 2 * len(self._deadlines) + _COMPACT_SLACK:
            self._heap = [(d, s) for s, d in self._deadlines.items()]
            heapq.heapify(self._heap)

    def start(self) -> None:
        """Arm the timer (after recovery has added every OPEN transaction)."""
        self._running = True
        self._arm()

    def stop(self) -> None:
        self._running = False
        self._cancel()

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_due = None

    def _drop_stale_head(self) -> None:
        heap = self._heap
        while heap and self._deadlines.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)

    def _arm(self) -> None:
        self._drop_stale_head()
        if not self._heap:
            self._cancel()
            return
        due = self._heap[0][0]
        if self._timer is not None and self._timer_due is not None and self._timer_due <= due:
            return  # the armed timer fires first anyway
        self._cancel()
        delay = max(due - self._clock.monotonic_ms(), 0.0)
        self._timer = self._scheduler.call_later(delay, self._fire)
        self._timer_due = due

    def _fire(self) -> None:
        self._timer = None
        self._timer_due = None
        if not self._running:
            return
        now = self._clock.monotonic_ms()
        expired: list[int] = []
        self._drop_stale_head()
        while self._heap and self._heap[0][0] <= now:
            _, sequence = heapq.heappop(self._heap)
            del self._deadlines[sequence]
            expired.append(sequence)
            self._drop_stale_head()
        self._arm()
        for sequence in expired:
            self._on_timeout(sequence)
