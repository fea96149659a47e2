"""``StatsBuckets``: Pulsar's per-interval distribution of a managed ledger's values.

Pulsar exports a managed ledger's add-entry latencies and entry sizes as separate
gauges, one per bucket (``pulsar_storage_write_latency_le_1``,
``pulsar_entry_size_le_4_kb``, ..., ``_overflow``, ``_count``, ``_sum``), holding what
the last stats interval saw, not a cumulative histogram. This is that structure:
``add_value`` counts into the current interval; ``refresh`` (run by the broker's stats
updater every ``statsUpdateFrequencyInSecs``) makes the current interval the one that
is read and starts a new one.

A value lands in the first bucket whose upper bound is at or above it (bounds are
inclusive); a value above the last bound lands in the overflow bucket.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence

__all__ = [
    "ENTRY_LATENCY_BOUNDS_MS",
    "ENTRY_SIZE_BOUNDS_BYTES",
    "StatsBuckets",
    "bucket_suffixes",
    "size_bound_suffix",
]

# Pulsar's add-entry latency bounds in milliseconds (the suffixes of
# pulsar_storage_write_latency_le_*).
ENTRY_LATENCY_BOUNDS_MS: tuple[float, ...] = (0.5, 1, 5, 10, 20, 50, 100, 200, 1000)
# Pulsar's entry size bounds in bytes (pulsar_entry_size_le_128 ... _le_1_mb; Pulsar's
# "1 MB" bound is 1 MB plus room for the message metadata).
ENTRY_SIZE_BOUNDS_BYTES: tuple[int, ...] = (
    128, 512, 1024, 2048, 4096, 16_384, 102_400, 1_232_896,
)


class StatsBuckets:
    """Counts per bucket (the last one is the overflow), their count and their sum,
    for the current interval and for the last completed one."""

    __slots__ = ("bounds", "current", "current_sum", "values", "count", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        """Raises:
        ValueError: ``bounds`` is empty or not strictly increasing.
        """
        if not bounds or any(b >= a for a, b in zip(bounds[1:], bounds, strict=False)):
            raise ValueError(f"bucket bounds must be non-empty and increasing: {bounds}")
        self.bounds: tuple[float, ...] = tuple(bounds)
        # The current interval, written by ``add_value`` (or by a caller on a hot path
        # doing the same inline, as ``ManagedLedgerStats.entry_added`` does).
        self.current = [0] * (len(bounds) + 1)
        self.current_sum = 0.0
        # The last completed interval, read by the metrics.
        self.values: tuple[int, ...] = (0,) * (len(bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def add_value(self, value: float) -> None:
        self.current[bisect_left(self.bounds, value)] += 1
        self.current_sum += value

    def refresh(self) -> None:
        """End the current interval: its counts become ``values``, ``count``, ``sum``."""
        self.values = tuple(self.current)
        self.count = sum(self.values)
        self.sum = self.current_sum
        self.current = [0] * len(self.current)
        self.current_sum = 0.0

    @property
    def overflow(self) -> int:
        """The last interval's values above the last bound."""
        return self.values[-1]


def bucket_suffixes(
    bounds: Sequence[float], spell: Callable[[float], str] | None = None
) -> list[str]:
    """``le_<bound>`` per bound, then ``le_overflow``: Pulsar's bucket name suffixes.

    ``spell`` writes a bound; by default a whole bound prints as an integer
    (``le_1500000``) and a fractional one with an underscore (``le_0_5``).
    """
    spell = spell if spell is not None else _number_suffix
    return [f"le_{spell(b)}" for b in bounds] + ["le_overflow"]


def size_bound_suffix(bound: float) -> str:
    """Pulsar's spelling of a size bound: ``128``, ``1_kb``, ``100_kb``, ``1_mb``."""
    if bound >= 1_000_000:
        return "1_mb"
    if bound >= 1024 and bound % 1024 == 0:
        return f"{int(bound) // 1024}_kb"
    return _number_suffix(bound)


def _number_suffix(bound: float) -> str:
    if float(bound).is_integer():
        return str(int(bound))
    return str(bound).replace(".", "_")
