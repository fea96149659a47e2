"""Fixed-rate send schedule, for latency measurements free of coordinated omission.

Message ``k`` of a producer is *due* at ``start + k / rate``. A worker waits until
the due time (or sends at once when it is late) and the publish latency is taken
from the due time, not from when the send actually happened. A stalled broker or a
full send queue therefore shows up as latency for every message that should have
been sent meanwhile, as in the OpenMessaging Benchmark, instead of silently lowering
the send rate. How late the sends left is reported separately as *send lag*.
"""

from __future__ import annotations

__all__ = ["RateSchedule"]


class RateSchedule:
    """Due times of one producer's messages at ``rate`` messages per second."""

    __slots__ = ("start", "interval", "count")

    def __init__(self, rate: float, start: float, phase: float = 0.0) -> None:
        """``phase`` (0..1) offsets the first due time by a fraction of the interval,
        so that several producers sharing a rate interleave instead of bursting.

        Raises:
            ValueError: ``rate`` is not positive.
        """
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.interval = 1.0 / rate
        self.start = start + phase * self.interval
        self.count = 0

    def next_due(self) -> float:
        """The due time of the next message (and move past it)."""
        due = self.start + self.count * self.interval
        self.count += 1
        return due


def split_rate(rate: float, workers: int) -> list[float]:
    """Each worker's share of a total rate (0 = unbounded stays 0)."""
    if rate <= 0:
        return [0.0] * workers
    return [rate / workers] * workers
