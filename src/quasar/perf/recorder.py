"""Where the load generator's workers put their samples, and how a run is stopped.

``Recorder`` is shared by the worker threads (or the event loop) that complete
messages and by the reporter thread that prints progress. Workers add samples to an
*interval*; the reporter folds each interval into the totals of the whole run and,
once the warm-up is over, of the *measured window*. ``RunControl`` is the stop flag
and the message budget (``-m``) that every worker consults.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from quasar.perf.histogram import Histogram

__all__ = ["LIMIT_REACHED", "IntervalSnapshot", "Recorder", "RunControl"]

LIMIT_REACHED = "message limit reached"
"""``RunControl.reason`` when the message budget is used up."""

CLAIM_CHUNK = 64
"""Messages a sending worker takes from the budget at a time (``RunControl.grants``)."""


@dataclass
class IntervalSnapshot:
    """What completed between two folds."""

    messages: int
    bytes: int
    errors: int
    latency_us: Histogram
    lag_us: Histogram


class Recorder:
    """Thread-safe sample sink with interval, whole-run and measured-window totals.

    Times are ``time.monotonic()`` seconds; latencies are microseconds.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Serialises folds (the reporter's and a begin() without warm-up).
        self._fold_lock = threading.RLock()
        self._latency = Histogram()
        self._lag = Histogram()
        self._messages = 0
        self._bytes = 0
        self._errors = 0
        # Whole run (warm-up included).
        self.run_latency_us = Histogram()
        self.messages = 0
        self.bytes = 0
        self.errors = 0
        # Measured window (after the warm-up).
        self.measuring = False
        self.measure_start: float | None = None
        self.measure_cpu_start = 0.0
        self.measured_latency_us = Histogram()
        self.measured_lag_us = Histogram()
        self.measured_messages = 0
        self.measured_bytes = 0
        self.measured_errors = 0
        self.last_time: float | None = None

    def record(self, latency_us: float, nbytes: int, now: float) -> None:
        """One completed message (published or received) at monotonic time ``now``."""
        # Called once per message: the lock is taken by hand rather than with
        # ``with``, which costs a third of this method on CPython 3.11.
        lock = self._lock
        lock.acquire()
        try:
            self._latency.record(latency_us)
            self._messages += 1
            self._bytes += nbytes
            self.last_time = now
            if self.measure_start is None and self.measuring:
                self.measure_start = now
        finally:
            lock.release()

    def record_many(
        self, latencies_us: Sequence[float], nbytes: int, first: float, last: float
    ) -> None:
        """Messages that completed together (``nbytes`` in all), the first of them at
        monotonic time ``first`` and the last at ``last``: one lock round for the
        group instead of one per message. Each latency is still its own sample."""
        if not latencies_us:
            return
        lock = self._lock
        lock.acquire()
        try:
            self._latency.record_many(latencies_us)
            self._messages += len(latencies_us)
            self._bytes += nbytes
            self.last_time = last
            if self.measure_start is None and self.measuring:
                self.measure_start = first
        finally:
            lock.release()

    def record_lag(self, lag_us: float) -> None:
        """How late a fixed-rate send left compared with its schedule."""
        with self._lock:
            self._lag.record(lag_us)

    def error(self, count: int = 1) -> None:
        """Messages that failed (send error or timeout)."""
        with self._lock:
            self._errors += count

    def completed(self) -> int:
        """Messages completed or failed so far (an unlocked, approximate read)."""
        return self.messages + self._messages + self.errors + self._errors

    def fold(self) -> IntervalSnapshot:
        """Close the current interval and add it to the run (and window) totals.

        Safe from any thread; folds are serialised.
        """
        with self._fold_lock:
            return self._fold()

    def _fold(self) -> IntervalSnapshot:
        with self._lock:
            snap = IntervalSnapshot(
                self._messages, self._bytes, self._errors, self._latency, self._lag
            )
            self._latency, self._lag = Histogram(), Histogram()
            self._messages = self._bytes = self._errors = 0
            measuring = self.measuring
        self.run_latency_us.merge(snap.latency_us)
        self.messages += snap.messages
        self.bytes += snap.bytes
        self.errors += snap.errors
        if measuring:
            self.measured_latency_us.merge(snap.latency_us)
            self.measured_lag_us.merge(snap.lag_us)
            self.measured_messages += snap.messages
            self.measured_bytes += snap.bytes
            self.measured_errors += snap.errors
        return snap

    def start_measuring(self, now: float) -> IntervalSnapshot:
        """End the warm-up: what completed so far counts for the run only.

        The window starts now, or at the first sample if nothing has completed yet
        (a consumer waiting for a producer should not dilute its rate).
        """
        with self._fold_lock:
            snap = self._fold()
            with self._lock:
                self.measuring = True
                self.measure_start = now if self.messages else None
                self.measure_cpu_start = time.process_time()
        return snap

    def window_seconds(self) -> float:
        """Length of the measured window: from its start to the last sample."""
        if self.measure_start is None or self.last_time is None:
            return 0.0
        return max(0.0, self.last_time - self.measure_start)


class RunControl:
    """The stop flag and message budget shared by a run's workers.

    ``limit`` is the number of messages to send or receive (None: unlimited). It may
    be set while the run goes on (``pubsub`` tells the consumer how many messages
    the producer published once it knows). ``stopped`` is a plain attribute, read
    once per message by the workers; ``stop`` sets it.
    """

    def __init__(self, limit: int | None = None) -> None:
        self._stop = threading.Event()
        self._stop_lock = threading.Lock()
        # Budget indexes: next() on an itertools.count is atomic under the GIL.
        self._counter = itertools.count()
        self._claimed = 0
        self.limit = limit
        self.reason = ""
        self.stopped = False
        self._on_stop: list[Callable[[], None]] = []

    def claim(self) -> bool:
        """Take one message from the budget; False when it is used up."""
        index = next(self._counter)
        self._claimed = index + 1
        limit = self.limit
        if limit is None:
            return True
        if index >= limit - 1:
            # The last message (or one past it): workers stop after handling it.
            self.stop(LIMIT_REACHED)
        return index < limit

    def claim_many(self, count: int) -> int:
        """Take up to ``count`` messages from the budget at once; returns how many
        were granted (0: the budget is used up). Taking the last one stops the run:
        workers stop after handling what they were granted."""
        indexes = list(itertools.islice(self._counter, count))
        if not indexes:
            return 0
        self._claimed = max(indexes) + 1
        limit = self.limit
        if limit is None:
            return len(indexes)
        if self._claimed >= limit:
            self.stop(LIMIT_REACHED)
        return sum(1 for index in indexes if index < limit)

    def grants(self, chunk: int = CLAIM_CHUNK) -> Iterator[None]:
        """One item per message a sending worker may send, taken from the budget
        ``chunk`` at a time (one lock round per chunk, not per message). Ends when
        the budget is used up or the run stopped; messages already granted are still
        handed out, so a stop lands at most ``chunk - 1`` messages late."""
        while not self.stopped:
            granted = self.claim_many(chunk)
            if not granted:
                return
            yield from itertools.repeat(None, granted)

    def set_limit(self, limit: int) -> None:
        self.limit = limit
        if self._claimed >= limit:
            self.stop(LIMIT_REACHED)

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` (from the stopping thread) when the run is stopped."""
        self._on_stop.append(callback)
        if self._stop.is_set():
            callback()

    def stop(self, reason: str) -> None:
        with self._stop_lock:
            if self.stopped:
                return
            self.reason = reason
            self.stopped = True
        self._stop.set()
        for callback in list(self._on_stop):
            try:
                callback()
            except Exception:  # a waker whose loop is gone must not stop the others
                pass

    def wait(self, timeout: float | None) -> bool:
        return self._stop.wait(timeout)
