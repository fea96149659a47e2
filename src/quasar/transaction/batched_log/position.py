"""Where one log record is: an entry, and its place in that entry when it is a batch."""

from __future__ import annotations

from typing import NamedTuple

from quasar.storage.api import Position


class LogPosition(NamedTuple):
    """A record's entry ``position``; ``batch_index``/``batch_size`` when the entry is
    a batch (``-1``/``0`` for an entry holding one record alone).

    Ordered like the log: by entry, then by index inside the entry.
    """

    position: Position
    batch_index: int = -1
    batch_size: int = 0

    @property
    def is_batched(self) -> bool:
        return self.batch_index >= 0

    def __str__(self) -> str:
        if self.batch_index < 0:
            return str(self.position)
        return f"{self.position}[{self.batch_index}/{self.batch_size}]"
