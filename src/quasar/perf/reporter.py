"""The reporter thread: live progress every interval, warm-up end and time limit.

A thread rather than an event-loop task so that it works the same for quasar's
asyncio client and for the official client's worker threads. It writes one line per
interval to stderr::

    [produce] 12.0s  95,130 msg/s  779.3 Mbit/s  lat ms p50 3.1 p99 7.9 max 12.0  pending 812  total 1,141,470

and owns the phase changes: at ``begin() + warmup_s`` it starts the measured window,
at ``begin() + time_s`` it stops the run.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from quasar.perf.recorder import IntervalSnapshot, Recorder, RunControl

__all__ = ["Reporter", "progress_line"]


def progress_line(
    label: str,
    elapsed_s: float,
    interval_s: float,
    snap: IntervalSnapshot,
    total: int,
    pending: int | None,
) -> str:
    rate = snap.messages / interval_s if interval_s > 0 else 0.0
    mbit = snap.bytes * 8 / 1e6 / interval_s if interval_s > 0 else 0.0
    ps = snap.latency_us.percentiles((50.0, 99.0))
    parts = [
        f"[{label}] {elapsed_s:6.1f}s",
        f"{rate:10,.0f} msg/s",
        f"{mbit:8.1f} Mbit/s",
        f"lat ms p50 {ps[50.0] / 1000:.1f} p99 {ps[99.0] / 1000:.1f}"
        f" max {snap.latency_us.max / 1000:.1f}",
    ]
    if pending is not None:
        parts.append(f"pending {pending:,}")
    if snap.errors:
        parts.append(f"errors {snap.errors:,}")
    parts.append(f"total {total:,}")
    return "  ".join(parts)


class Reporter(threading.Thread):
    """Prints progress and drives the warm-up and the time limit of one run."""

    def __init__(
        self,
        label: str,
        recorder: Recorder,
        control: RunControl,
        *,
        warmup_s: float = 0.0,
        time_s: float = 0.0,
        interval_s: float = 2.0,
        pending: Callable[[], int] | None = None,
        stream: TextIO | None = None,
    ) -> None:
        super().__init__(name=f"perf-reporter-{label}", daemon=True)
        self.label = label
        self.recorder = recorder
        self.control = control
        self.warmup_s = warmup_s
        self.time_s = time_s
        self.interval_s = interval_s
        self.pending = pending
        self.stream = stream if stream is not None else sys.stderr
        self._begun = threading.Event()
        self._start = 0.0
        self._done = threading.Event()
        self._quiet = False

    def begin(self, at: float | None = None) -> None:
        """Start the clock of the run (warm-up and time limit count from here)."""
        if not self._begun.is_set():
            self._start = time.monotonic() if at is None else at
            if self.warmup_s <= 0:
                # No warm-up: the window opens with the first message, not whenever
                # this thread next wakes up.
                self.recorder.start_measuring(self._start)
            self._begun.set()

    @property
    def started_at(self) -> float:
        return self._start

    def finish(self) -> None:
        """Stop the thread; the caller then folds the last interval itself."""
        self._done.set()
        self.join()

    def progress(self, elapsed: float, interval: float, snap: Any) -> str:
        """One progress line (subclasses report other figures)."""
        pending = self.pending() if self.pending is not None else None
        return progress_line(
            self.label, elapsed, interval, snap, self.recorder.messages, pending
        )

    def run(self) -> None:
        created = time.monotonic()
        last_tick = created
        next_tick = created + self.interval_s
        while True:
            now = time.monotonic()
            events = [next_tick]
            begun = self._begun.is_set()
            if begun and not self.recorder.measuring:
                events.append(self._start + self.warmup_s)
            if begun and self.time_s > 0 and not self.control.stopped:
                events.append(self._start + self.time_s)
            if not begun:
                events.append(now + 0.05)  # notice begin() promptly
            if self._done.wait(max(0.0, min(events) - now)):
                return
            now = time.monotonic()
            if self._begun.is_set():
                if not self.recorder.measuring and now >= self._start + self.warmup_s:
                    self.recorder.start_measuring(now)
                    # That folded the interval so far away: the next line's rate is
                    # over what is left of it, not the whole (a false dip otherwise).
                    last_tick = now
                if self.time_s > 0 and now >= self._start + self.time_s:
                    self.control.stop("time limit reached")
            if now >= next_tick and not self._begun.is_set():
                next_tick = now + self.interval_s  # still connecting: nothing to say
            elif now >= next_tick:
                snap = self.recorder.fold()
                elapsed = now - (self._start if self._begun.is_set() else created)
                line = self.progress(elapsed, now - last_tick, snap)
                print(line, file=self.stream, flush=True)
                last_tick = now
                next_tick = max(next_tick + self.interval_s, now + 0.1)
