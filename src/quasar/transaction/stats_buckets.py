"""``StatsBuckets``: Pulsar's per-interval latency buckets (``..._le_<bound>`` series).

Pulsar prints a latency distribution as one gauge per bucket, ``<name>_le_<bound>`` and
``<name>_le_overflow``, each holding the count of observations that fell into that
bucket alone (not cumulative, unlike a Prometheus histogram) during the last
statistics interval (``statsUpdateFrequencyInSecs``, 60 s by default). Observations go
into the current interval; ``refresh`` closes it, and the closed interval is what a
scrape reads until the next refresh. Time is the caller's: the collector refreshes on
its injected clock, so tests need not wait for an interval to pass.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

__all__ = ["StatsBuckets", "bucket_suffixes"]


class StatsBuckets:
    """Counts of observations per bucket, for the current and the last interval.

    ``bounds`` are the buckets' inclusive upper bounds, ascending; a value above the
    last bound goes into the overflow bucket.
    """

    def __init__(self, bounds: Sequence[float]) -> None:
        if list(bounds) != sorted(bounds) or len(set(bounds)) != len(bounds):
            raise ValueError(f"bucket bounds must be strictly ascending: {bounds!r}")
        self.bounds: tuple[float, ...] = tuple(bounds)
        self._current = [0] * (len(self.bounds) + 1)
        self._current_sum = 0.0
        self._last = [0] * (len(self.bounds) + 1)
        self._last_sum = 0.0

    def observe(self, value: float) -> None:
        self._current[bisect.bisect_left(self.bounds, value)] += 1
        self._current_sum += value

    def refresh(self) -> None:
        """Close the current interval: its counts become the ones reported."""
        self._last, self._current = self._current, [0] * (len(self.bounds) + 1)
        self._last_sum, self._current_sum = self._current_sum, 0.0

    @property
    def buckets(self) -> list[int]:
        """The last interval's count per bucket, the overflow bucket last."""
        return list(self._last)

    @property
    def count(self) -> int:
        return sum(self._last)

    @property
    def sum(self) -> float:
        return self._last_sum


def bucket_suffixes(bounds: Sequence[float]) -> list[str]:
    """``le_10``, ``le_20``, ... ``le_overflow``: Pulsar's bucket name suffixes."""
    return [f"le_{_bound_name(b)}" for b in bounds] + ["le_overflow"]


def _bound_name(bound: float) -> str:
    # Whole bounds print without a fraction or an exponent (``le_1500000``); Pulsar
    # writes a fractional one with an underscore (``le_0_5``).
    if float(bound).is_integer():
        return str(int(bound))
    return str(bound).replace(".", "_")
