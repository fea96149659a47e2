"""How much one dispatcher read asks storage for: ``dispatcherMaxReadBatchSize`` and
``dispatcherMaxReadSizeBytes``.

Both are dynamic in Pulsar, so the dispatchers read them from this one object at each
read (every topic holds the broker's instance) and a change reaches every
subscription at its next read.
"""

from __future__ import annotations

from dataclasses import dataclass

from quasar.config import DispatchConfig

__all__ = ["ReadLimits"]


@dataclass
class ReadLimits:
    """The current bounds of one dispatcher read."""

    max_entries: int
    max_bytes: int

    @classmethod
    def of(cls, dispatch: DispatchConfig) -> ReadLimits:
        return cls(
            dispatch.dispatcher_max_read_batch_size,
            dispatch.dispatcher_max_read_size_bytes,
        )

    def update(self, dispatch: DispatchConfig) -> None:
        """Take the bounds of ``dispatch`` (a run-time configuration change)."""
        self.max_entries = dispatch.dispatcher_max_read_batch_size
        self.max_bytes = dispatch.dispatcher_max_read_size_bytes
