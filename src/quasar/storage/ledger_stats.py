"""What a managed ledger counts for the broker's stats and metrics.

Plain integers and ``StatsBuckets``, updated on the event loop by the managed ledger
(appends and reads); the broker's stats updater turns the counters into rates and
refreshes the buckets once per interval, so the publish path pays an addition, not a
metric update.
"""

from __future__ import annotations

from bisect import bisect_left

from quasar.storage.stats_buckets import (
    ENTRY_LATENCY_BOUNDS_MS,
    ENTRY_SIZE_BOUNDS_BYTES,
    StatsBuckets,
)

__all__ = ["ManagedLedgerStats"]


class ManagedLedgerStats:
    """Counters of one managed ledger since it was opened."""

    __slots__ = (
        "entries_added",
        "bytes_added",
        "add_entry_errors",
        "entries_read",
        "bytes_read",
        "add_entry_latency_ms",
        "entry_size_bytes",
    )

    def __init__(self) -> None:
        self.entries_added = 0
        self.bytes_added = 0
        self.add_entry_errors = 0
        self.entries_read = 0
        self.bytes_read = 0
        # From add_entry to durable, in milliseconds (pulsar_storage_write_latency_*).
        self.add_entry_latency_ms = StatsBuckets(ENTRY_LATENCY_BOUNDS_MS)
        # Sizes of the entries added (pulsar_entry_size_*).
        self.entry_size_bytes = StatsBuckets(ENTRY_SIZE_BOUNDS_BYTES)

    def entry_added(self, size: int, latency_ms: float) -> None:
        self.entries_added += 1
        self.bytes_added += size
        # StatsBuckets.add_value, inlined: this runs for every entry appended.
        latency = self.add_entry_latency_ms
        latency.current[bisect_left(latency.bounds, latency_ms)] += 1
        latency.current_sum += latency_ms
        sizes = self.entry_size_bytes
        sizes.current[bisect_left(sizes.bounds, size)] += 1
        sizes.current_sum += size

    def entries_were_read(self, entries: int, size: int) -> None:
        self.entries_read += entries
        self.bytes_read += size

    def refresh(self) -> None:
        """End the buckets' interval (the stats updater calls this once per period)."""
        self.add_entry_latency_ms.refresh()
        self.entry_size_bytes.refresh()
