"""A durable key → bytes table kept in a compacted system topic.

Pulsar keeps several tables in topics: transaction-buffer snapshots in each
namespace's ``__transaction_buffer_snapshot``, keyed by topic name, and each
coordinator's terminated transactions in ``pulsar/system/__terminated_txn_state_<n>``,
keyed by client name (PIP-255). A table is a topic whose
entries carry the key as ``partition_key`` and the value as payload; a tombstone is an
entry with ``null_value``. Compaction keeps only the latest entry per key.

The broker reads a table once, when first used: the compacted view up to the horizon,
then the topic's entries after it. A record it cannot parse (in the compacted view or
after it) is skipped and reported to ``on_unreadable``: a table holds derived state
(snapshots, outcomes of ended transactions), so losing one key's value costs a replay
or a forgotten outcome, while refusing to load would stop every coordinator or topic
that reads the table. From then on the in-memory map is authoritative and
every write goes to the topic (durable before ``write`` returns) and to the map.
Compaction runs after ``compact_every_writes`` writes; a durable cursor ``__table``
holds every entry after the last compaction horizon so nothing is trimmed before it is
compacted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from quasar.errors import CorruptRecordError, RemoteProtocolError
from quasar.protocol import make_entry, parse_entry, pb
from quasar.protocol.topic_name import SYSTEM_TABLE_CURSOR, TopicName
from quasar.storage.api import InitialPosition, Position

from .api import LoadedTopic, TopicRegistry

log = logging.getLogger(__name__)

TABLE_CURSOR = SYSTEM_TABLE_CURSOR
TABLE_PRODUCER = "quasar.system-table"
COMPACT_EVERY_WRITES = 200


class SystemTopicTable:
    def __init__(
        self,
        topics: TopicRegistry,
        topic: str,
        compact_every_writes: int = COMPACT_EVERY_WRITES,
        on_unreadable: Callable[[CorruptRecordError], None] | None = None,
    ) -> None:
        """``on_unreadable``: told of each record the table skips as unreadable."""
        self._topics = topics
        self._on_unreadable = on_unreadable
        # Where unreadable records were met, so a record the load reads twice (the
        # compacted view is read in rounds) is reported once.
        self._unreadable_at: set[str] = set()
        self._name = TopicName.parse(topic)
        self._compact_every = compact_every_writes
        self._map: dict[str, bytes] = {}
        self._topic: LoadedTopic | None = None
        self._loading: asyncio.Task[LoadedTopic] | None = None
        self._writes = 0
        self._seq = 0

    @property
    def name(self) -> str:
        return self._name.full

    async def _ready(self) -> LoadedTopic:
        if self._topic is not None and not self._topic.closed:
            return self._topic
        if self._loading is None or self._loading.done():
            self._loading = asyncio.get_running_loop().create_task(self._load())
        return await asyncio.shield(self._loading)

    async def _load(self) -> LoadedTopic:
        topic = await self._topics.get_topic(self._name, create=True)
        cursor = topic.ledger.open_cursor(TABLE_CURSOR, InitialPosition.EARLIEST)
        table: dict[str, bytes] = {}
        start = topic.ledger.first_position
        horizon = topic.compaction.horizon
        if horizon is not None:
            position = Position(-1, -1)
            while True:
                records = await topic.compaction.read_readable(
                    position, 500, self._unreadable
                )
                if not records:
                    break
                for r in records:
                    self._apply(table, r.data, r.position)
                position = topic.ledger.next_position(records[-1].position)
            start = max(start, topic.ledger.next_position(horizon))
        start = max(start, topic.ledger.next_position(cursor.mark_delete_position))
        while True:
            entries = await topic.ledger.read_entries(start, 500)
            if not entries:
                break
            for e in entries:
                self._apply(table, e.data, e.position)
            start = topic.ledger.next_position(entries[-1].position)
        self._map = table
        self._topic = topic
        return topic

    def _unreadable(self, exc: CorruptRecordError) -> None:
        key = f"{exc.log_name}@{exc.position}"
        if key in self._unreadable_at:
            return
        self._unreadable_at.add(key)
        log.error("%s: skipping an unreadable record: %s", self.name, exc)
        if self._on_unreadable is not None:
            self._on_unreadable(exc)

    def _apply(self, table: dict[str, bytes], data: bytes, position: Position) -> None:
        try:
            parsed = parse_entry(data)
        except RemoteProtocolError as exc:
            self._unreadable(CorruptRecordError(
                f"{self.name}: the entry at {position} cannot be read: {exc}",
                log_name=self.name, position=str(position),
            ))
            return
        md = parsed.metadata
        if not md.HasField("partition_key"):
            return
        if md.null_value:
            table.pop(md.partition_key, None)
        else:
            table[md.partition_key] = bytes(data[parsed.payload_offset :])

    async def read(self, key: str) -> bytes | None:
        await self._ready()
        return self._map.get(key)

    async def items(self) -> dict[str, bytes]:
        """Every key with its latest value (a copy)."""
        await self._ready()
        return dict(self._map)

    async def write(self, key: str, value: bytes) -> None:
        await self._append(key, value)
        self._map[key] = value

    async def delete(self, key: str) -> None:
        if await self.read(key) is None:
            return
        await self._append(key, None)
        self._map.pop(key, None)

    async def _append(self, key: str, value: bytes | None) -> None:
        topic = await self._ready()
        self._seq += 1
        md = pb.MessageMetadata(
            producer_name=TABLE_PRODUCER,
            sequence_id=self._seq,
            publish_time=self._topics.clock.wall_ms(),
            partition_key=key,
        )
        if value is None:
            md.null_value = True
        await topic.ledger.add_entry(make_entry(md, value or b""))
        self._writes += 1
        if self._writes >= self._compact_every and not topic.compaction.running:
            self._writes = 0
            task = topic.compaction.trigger()
            task.add_done_callback(lambda _: self._after_compaction(topic))

    def _after_compaction(self, topic: LoadedTopic) -> None:
        horizon = topic.compaction.horizon
        cursor = topic.ledger.cursors().get(TABLE_CURSOR)
        if horizon is not None and cursor is not None and horizon > cursor.mark_delete_position:
            # Everything up to the horizon now lives in the compacted ledger.
            cursor.mark_delete(horizon)
