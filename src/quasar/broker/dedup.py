"""Broker-side message deduplication by (producer name, sequence id).

When deduplication is enabled for a topic's namespace (or broker-wide), the topic keeps,
per producer name, the highest sequence id it has *pushed* (accepted for persistence)
and the highest it has *persisted*. A SEND whose sequence id is not above the pushed
high-water mark is a duplicate: if it is at or below the persisted mark the broker
answers with a receipt and stores nothing; if it is still in flight the outcome is
unknown, and the send fails so the client resends later (Pulsar's behaviour).

Durability: the persisted marks are snapshotted into the properties of a system cursor
named ``pulsar.dedup`` every ``snapshot_interval_entries`` entries, and the cursor's
mark-delete is moved to the snapshot's position. On load, the snapshot is read back and
every entry after it is replayed (producer name and sequence id from each entry's
metadata), so the state after a crash is exact.

Chunked messages: every chunk of one message is its own SEND with the message's
sequence id. As in Pulsar, a chunk other than the last is never a duplicate and marks
nothing, so the later chunks of the same sequence id are stored; the last chunk is
checked and recorded like any message. A chunked message resent whole after a
reconnect thus stores its earlier chunks again while its last chunk is answered as a
duplicate; consumers drop the incomplete copy (it expires in their reassembly).
"""

from __future__ import annotations

import enum
import logging

from quasar.errors import RemoteProtocolError
from quasar.protocol.topic_name import DEDUP_CURSOR
from quasar.storage.api import InitialPosition, ManagedCursor, ManagedLedger, Position

from .entry_info import entry_info

log = logging.getLogger(__name__)


class DupStatus(enum.Enum):
    NEW = 0
    DUPLICATE = 1
    UNKNOWN = 2  # an earlier send with this id is still being persisted


class MessageDeduplication:
    def __init__(
        self,
        ledger: ManagedLedger,
        snapshot_interval_entries: int = 1000,  # brokerDeduplicationEntriesInterval
        max_producers: int = 10_000,  # brokerDeduplicationMaxNumberOfProducers
    ) -> None:
        self._ledger = ledger
        self._interval = snapshot_interval_entries
        self._max_producers = max_producers
        self.pushed: dict[str, int] = {}
        self.persisted: dict[str, int] = {}
        self._cursor: ManagedCursor | None = None
        self._since_snapshot = 0

    async def recover(self) -> None:
        """Load the snapshot and replay the entries written after it."""
        cursor = self._ledger.open_cursor(DEDUP_CURSOR, InitialPosition.EARLIEST)
        self._cursor = cursor
        self.persisted = dict(cursor.properties)
        position = self._ledger.next_position(cursor.mark_delete_position)
        while True:
            entries = await self._ledger.read_entries(position, 1000)
            if not entries:
                break
            for e in entries:
                try:
                    info = entry_info(e.data)
                except RemoteProtocolError:
                    continue
                if info.marker_type is None and not info.partial_chunk:
                    self._record(self.persisted, info.producer_name, info.sequence_id)
            position = self._ledger.next_position(entries[-1].position)
        self.pushed = dict(self.persisted)

    @staticmethod
    def _record(marks: dict[str, int], name: str, seq: int) -> None:
        if seq > marks.get(name, -1):
            marks[name] = seq

    def last_sequence_id(self, producer_name: str) -> int:
        return self.pushed.get(producer_name, -1)

    def check(self, producer_name: str, sequence_id: int, highest: int) -> DupStatus:
        """Classify a send and, if new, mark it pushed."""
        top = max(sequence_id, highest)
        if sequence_id <= self.persisted.get(producer_name, -1):
            return DupStatus.DUPLICATE
        if sequence_id <= self.pushed.get(producer_name, -1):
            return DupStatus.UNKNOWN
        if producer_name not in self.pushed and len(self.pushed) >= self._max_producers:
            # Bounded map: forget the producer with the lowest sequence (least active).
            victim = min(self.pushed, key=lambda k: self.pushed[k])
            self.pushed.pop(victim)
            self.persisted.pop(victim, None)
        self.pushed[producer_name] = top
        return DupStatus.NEW

    def persisted_at(self, producer_name: str, sequence_id: int, position: Position) -> None:
        self._record(self.persisted, producer_name, sequence_id)
        self._since_snapshot += 1
        if self._since_snapshot >= self._interval:
            self.snapshot(position)

    def producer_failed(self, producer_name: str) -> None:
        """A persist failed: forget the in-flight marks so a resend is accepted."""
        self.pushed[producer_name] = self.persisted.get(producer_name, -1)

    def snapshot(self, position: Position) -> None:
        if self._cursor is None:
            return
        self._since_snapshot = 0
        if position > self._cursor.mark_delete_position:
            self._cursor.mark_delete(position, dict(self.persisted))

    async def close(self) -> None:
        if self._cursor is not None:
            self.snapshot(self._ledger.last_confirmed_entry)
            await self._cursor.flush()
