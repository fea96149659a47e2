"""Topic compaction on the in-memory storage: what is retained, how it is stored,
how read_compacted consumers are served, and what survives a restart."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from quasar.admin import create_admin_app
from quasar.broker import compaction as compaction_mod
from quasar.broker import compactor as compactor_mod
from quasar.broker.admin_adapter import AdminAdapter
from quasar.broker.compacted_ledger import (
    INDEX_INTERVAL_RECORDS,
    CompactedRecord,
    decode_record,
    encode_record,
)
from quasar.broker.compacted_read import CompactedReadState
from quasar.broker.compaction import (
    COMPACTION_CURSOR,
    CompactionStatus,
    compacted_ledger_name,
)
from quasar.broker.consumer import Consumer
from quasar.broker.service import BrokerService
from quasar.broker.subscription import (
    SUB_EXCLUSIVE,
    SUB_FAILOVER,
    SUB_KEY_SHARED,
    SUB_SHARED,
)
from quasar.broker.system_table import SystemTopicTable
from quasar.broker.topic import PersistentTopic
from quasar.config import BrokerConfig, ManagedLedgerSettings, ServiceConfiguration
from quasar.errors import ConflictError, CorruptRecordError, NotAllowedError
from quasar.protocol import (
    FrameDecoder,
    TopicName,
    build_batch,
    compress,
    decompress,
    is_acked,
    make_entry,
    parse_batch,
    parse_entry,
    pb,
)
from quasar.protocol.compression import LZ4, NONE, SNAPPY, ZLIB, ZSTD
from quasar.storage import MemoryManagedLedgerFactory
from quasar.storage.api import EARLIEST, InitialPosition, Position
from quasar.storage.metadata.memory import MemoryMetadataStore

TOPIC = "persistent://public/default/table"
_seq = itertools.count()

# --------------------------------------------------------------------------------------
# Building entries the way a producer does.


def single(key: str | None, value: bytes | None) -> bytes:
    """A non-batched message; ``value=None`` is a null-value tombstone."""
    md = pb.MessageMetadata(producer_name="p", sequence_id=next(_seq), publish_time=1)
    if key is not None:
        md.partition_key = key
    if value is None:
        md.null_value = True
    return make_entry(md, value or b"")


def batch(items: Sequence[tuple[str | None, bytes | None]], codec: int = NONE) -> bytes:
    """A batch entry of ``(key, value)`` messages, compressed with ``codec``."""
    members = []
    for key, value in items:
        smd = pb.SingleMessageMetadata(payload_size=len(value or b""), sequence_id=next(_seq))
        if key is not None:
            smd.partition_key = key
        if value is None:
            smd.null_value = True
        members.append((smd, value or b""))
    raw = build_batch(members)
    md = pb.MessageMetadata(
        producer_name="p", sequence_id=next(_seq), publish_time=1,
        num_messages_in_batch=len(items),
    )
    payload = raw
    if codec != NONE:
        md.compression = codec  # type: ignore[assignment]
        md.uncompressed_size = len(raw)
        payload = compress(codec, raw)
    return make_entry(md, payload)


def marker() -> bytes:
    md = pb.MessageMetadata(producer_name="broker", sequence_id=0, publish_time=1,
                            partition_key="k1", marker_type=20)
    return make_entry(md, b"marker")


# --------------------------------------------------------------------------------------
# What a client makes of delivered entries.


@dataclass(frozen=True)
class Seen:
    position: Position
    batch_index: int  # -1 for a message that is not in a batch
    key: str | None
    value: bytes


def client_view(data: bytes, position: Position, ack_set: Sequence[int] | None) -> list[Seen]:
    """The messages an official client surfaces from one delivered entry: batch members
    whose ack_set bit is clear, or that are ``compacted_out``, are skipped."""
    parsed = parse_entry(data)
    md = parsed.metadata
    payload = data[parsed.payload_offset :]
    if not md.HasField("num_messages_in_batch"):
        key = md.partition_key if md.HasField("partition_key") else None
        return [Seen(position, -1, key, payload)]
    if md.compression != NONE:
        payload = decompress(md.compression, payload, md.uncompressed_size)
    out = []
    for i, (smd, body) in enumerate(parse_batch(payload, md.num_messages_in_batch)):
        if smd.compacted_out or (ack_set and is_acked(ack_set, i)):
            continue
        out.append(Seen(position, i, smd.partition_key if smd.HasField("partition_key")
                        else None, body))
    return out


def record_view(records: Sequence[CompactedRecord]) -> list[Seen]:
    return [m for r in records for m in client_view(r.data, r.position, r.retained)]


def kv(seen: Sequence[Seen]) -> list[tuple[str | None, bytes]]:
    return [(s.key, s.value) for s in seen]


class FakeConnection:
    """A consumer's connection: decodes MESSAGE frames into what a client would see."""

    remote_address = "127.0.0.1:1"
    client_version = "test"

    def __init__(self) -> None:
        self._decoder = FrameDecoder(64 * 1024 * 1024)
        self.seen: list[Seen] = []
        self.ack_sets: list[list[int]] = []
        self.closed: list[int] = []
        self._changed = asyncio.Event()

    def write(self, frame: bytes) -> None:
        for f in self._decoder.feed(frame):
            if f.type != pb.BaseCommand.MESSAGE:
                continue
            m = f.command.message
            pos = Position(m.message_id.ledgerId, m.message_id.entryId)
            assert f.payload is not None
            self.ack_sets.append(list(m.ack_set))
            self.seen.extend(client_view(f.payload, pos, list(m.ack_set)))
            self._changed.set()

    def close_consumer(self, consumer_id: int) -> None:
        self.closed.append(consumer_id)

    async def wait_for(self, n: int) -> list[Seen]:
        """Wait (bounded) until ``n`` messages arrived; return them."""
        while len(self.seen) < n:
            self._changed.clear()
            await asyncio.wait_for(self._changed.wait(), 5)
        return self.seen


# --------------------------------------------------------------------------------------
# A broker service over in-memory storage, restartable on the same storage.


class Broker:
    def __init__(self, config: ServiceConfiguration | None = None) -> None:
        self.store = MemoryMetadataStore()
        self.factory = MemoryManagedLedgerFactory(self.store)
        self.config = config or ServiceConfiguration()
        self.service = self._new_service()

    def _new_service(self) -> BrokerService:
        service = BrokerService(self.config, self.factory, self.store)
        service.resources.bootstrap_standalone("standalone")
        return service

    async def topic(self) -> PersistentTopic:
        return await self.service.get_topic(TopicName.parse(TOPIC), create=True)

    async def restart(self) -> PersistentTopic:
        await self.service.close()
        self.service = self._new_service()
        return await self.topic()

    async def close(self) -> None:
        await self.service.close()
        await self.factory.close()


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = Broker()
    yield b
    await b.close()


async def publish(topic: PersistentTopic, *entries: bytes) -> list[Position]:
    positions = [await topic.ledger.add_entry(e) for e in entries]
    topic.notify_new_entries()
    return positions


async def compact(topic: PersistentTopic) -> None:
    await topic.compaction.trigger()
    assert topic.compaction.status is CompactionStatus.SUCCESS, topic.compaction.last_error


async def compacted(topic: PersistentTopic) -> list[Seen]:
    return record_view(await topic.compaction.read(EARLIEST, 10_000))


_consumer_ids = itertools.count(1)


def reader(
    topic: PersistentTopic,
    start: Position = EARLIEST,
    read_compacted: bool = True,
    sub_type: int = SUB_EXCLUSIVE,
    durable: bool = False,
    permits: int = 1000,
) -> tuple[Consumer, FakeConnection]:
    conn = FakeConnection()
    cid = next(_consumer_ids)
    consumer = Consumer(
        consumer_id=cid, consumer_name=f"c{cid}", subscription_name=f"sub-{cid}",
        sub_type=sub_type, connection=conn, read_compacted=read_compacted,
    )
    sub = topic.subscribe(consumer, durable, InitialPosition.EARLIEST, None if durable else start)
    sub.flow(consumer, permits)
    return consumer, conn


async def idle(topic: PersistentTopic, consumer: Consumer) -> None:
    """Wait until the consumer's dispatcher has nothing left to do."""
    d = topic.subscriptions[consumer.subscription_name].dispatcher
    assert d is not None
    while d._task is not None and not d._task.done():
        await d._task


# --------------------------------------------------------------------------------------
# The record format.


def test_record_round_trip() -> None:
    data = single("k", b"v")
    for mask in (None, [0b101], [-1, 3]):
        raw = encode_record(Position(7, 42), data, mask)
        assert decode_record(raw) == CompactedRecord(Position(7, 42), data, mask)


def test_record_corruption_is_detected() -> None:
    raw = encode_record(Position(1, 2), b"x", [1])
    with pytest.raises(CorruptRecordError):
        decode_record(raw[:10])
    with pytest.raises(CorruptRecordError):
        decode_record(b"\x00\x00" + raw[2:])
    with pytest.raises(CorruptRecordError):
        decode_record(raw[:22])  # the mask word is missing


# --------------------------------------------------------------------------------------
# What compaction retains.


async def test_latest_value_per_key_in_original_order(broker: Broker) -> None:
    topic = await broker.topic()
    pos = await publish(
        topic,
        single("k1", b"a"), single("k2", b"b"), single("k1", b"c"),
        single(None, b"keyless"), single("k3", b"x"), single("k3", b""),  # empty: tombstone
        single("k4", b"y"), single("k4", None),  # null_value: tombstone
        marker(), single("k5", b"z"),
    )
    await compact(topic)
    assert await compacted(topic) == [
        Seen(pos[1], -1, "k2", b"b"), Seen(pos[2], -1, "k1", b"c"), Seen(pos[9], -1, "k5", b"z"),
    ]
    assert topic.compaction.horizon == pos[-1]
    # Messages not kept: three superseded or deleted values, two tombstones, and
    # the keyless message (Pulsar counts dropped keyless messages as removed too).
    assert topic.compaction.last_removed_messages == 6


async def test_keyless_messages_are_retained_when_configured() -> None:
    broker = Broker(ServiceConfiguration(broker=BrokerConfig(
        topic_compaction_retain_null_key=True)))
    try:
        topic = await broker.topic()
        pos = await publish(
            topic, single(None, b"a"), single("k1", b"v"), single(None, b""),
            batch([(None, b"b"), ("k1", b"w"), ("k2", b"x"), ("k2", None)]),
        )
        await compact(topic)
        assert await compacted(topic) == [
            Seen(pos[0], -1, None, b"a"), Seen(pos[2], -1, None, b""),
            Seen(pos[3], 0, None, b"b"), Seen(pos[3], 1, "k1", b"w"),
        ]
        assert topic.compaction.last_removed_messages == 3
        # A second compaction keeps them again (its input is the compacted ledger).
        await publish(topic, single("k1", b"y"))
        await compact(topic)
        assert kv(await compacted(topic)) == [
            (None, b"a"), (None, b""), (None, b"b"), ("k1", b"y"),
        ]
    finally:
        await broker.close()


async def test_a_key_written_after_its_tombstone_is_back(broker: Broker) -> None:
    topic = await broker.topic()
    pos = await publish(topic, single("k", b"1"), single("k", None), single("k", b"2"))
    await compact(topic)
    assert await compacted(topic) == [Seen(pos[2], -1, "k", b"2")]


@pytest.mark.parametrize("codec", [NONE, LZ4, ZLIB, ZSTD, SNAPPY])
async def test_batch_is_split_and_keeps_batch_indexes(broker: Broker, codec: int) -> None:
    topic = await broker.topic()
    pos = await publish(
        topic,
        batch([("k1", b"a"), ("k2", b"b"), ("k1", b"c"), (None, b"n"), ("k3", b"t")], codec),
        single("k3", None),
    )
    await compact(topic)
    records = await topic.compaction.read(EARLIEST, 100)
    assert len(records) == 1
    record = records[0]
    assert record.position == pos[0]
    assert record.retained == [0b00110]  # members 1 (k2) and 2 (k1) are the latest
    assert record_view(records) == [Seen(pos[0], 1, "k2", b"b"), Seen(pos[0], 2, "k1", b"c")]
    # The stored batch is rebuilt: same size, dropped members are empty placeholders,
    # compressed with the producer's codec again.
    md = parse_entry(record.data).metadata
    assert md.num_messages_in_batch == 5 and md.compression == codec
    payload = record.data[parse_entry(record.data).payload_offset :]
    if codec != NONE:
        payload = decompress(codec, payload, md.uncompressed_size)
    members = parse_batch(payload, 5)
    assert [m.compacted_out for m, _ in members] == [True, False, False, True, True]
    assert [body for _, body in members] == [b"", b"b", b"c", b"", b""]
    assert not members[0][0].properties


async def test_batch_kept_whole_is_stored_unchanged(broker: Broker) -> None:
    topic = await broker.topic()
    data = batch([("a", b"1"), ("b", b"2")], LZ4)
    pos = await publish(topic, data)
    await compact(topic)
    assert await topic.compaction.read(EARLIEST, 10) == [CompactedRecord(pos[0], data, None)]


async def test_unreadable_batch_is_kept_whole(broker: Broker) -> None:
    topic = await broker.topic()
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1,
                            num_messages_in_batch=3)
    broken = make_entry(md, b"\x00\x00\x00\x09garbage")
    pos = await publish(topic, broken, single("k", b"v"))
    await compact(topic)
    records = await topic.compaction.read(EARLIEST, 10)
    assert [(r.position, r.data) for r in records] == [(pos[0], broken), (pos[1], records[1].data)]


async def test_all_tombstoned_leaves_an_empty_compacted_ledger(broker: Broker) -> None:
    topic = await broker.topic()
    await publish(topic, single("k", b"v"), single("k", b""))
    await compact(topic)
    assert await compacted(topic) == []
    assert await topic.compaction.last_record() is None


# --------------------------------------------------------------------------------------
# Repeated compaction, status and failures.


async def test_repeated_compaction_builds_on_the_previous_one(broker: Broker) -> None:
    topic = await broker.topic()
    first = await publish(
        topic, batch([("k1", b"a"), ("k2", b"b"), ("k3", b"c")]), single("k1", b"a2"),
    )
    await compact(topic)
    gen1 = compacted_ledger_name(topic.topic_name.persistence_name, 1)
    assert broker.factory.exists(gen1)
    assert kv(await compacted(topic)) == [("k2", b"b"), ("k3", b"c"), ("k1", b"a2")]

    second = await publish(topic, single("k2", b"b2"), single("k1", None), single("k4", b"d"))
    await compact(topic)
    assert topic.compaction.state is not None and topic.compaction.state.generation == 2
    assert not broker.factory.exists(gen1)  # replaced, then deleted
    assert await compacted(topic) == [
        Seen(first[0], 2, "k3", b"c"), Seen(second[0], -1, "k2", b"b2"),
        Seen(second[2], -1, "k4", b"d"),
    ]
    records = await topic.compaction.read(EARLIEST, 10)
    assert records[0].retained == [0b100]


async def test_compaction_with_nothing_new_is_a_no_op(broker: Broker) -> None:
    topic = await broker.topic()
    await publish(topic, single("k", b"v"))
    await compact(topic)
    await compact(topic)
    assert topic.compaction.state is not None and topic.compaction.state.generation == 1
    assert topic.compaction.status_json() == {"status": "SUCCESS", "lastError": ""}


async def test_status_and_one_compaction_at_a_time(broker: Broker) -> None:
    topic = await broker.topic()
    assert topic.compaction.status_json() == {"status": "NOT_RUN", "lastError": ""}
    await publish(topic, single("k", b"v"))
    task = topic.compaction.trigger()
    assert topic.compaction.status is CompactionStatus.RUNNING
    with pytest.raises(ConflictError):
        topic.compaction.trigger()
    await task
    assert topic.compaction.status is CompactionStatus.SUCCESS


async def test_failure_mid_compaction_keeps_the_previous_generation(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = await broker.topic()
    await publish(topic, single("k1", b"a"), single("k2", b"b"))
    await compact(topic)
    await publish(topic, single("k1", b"a2"), single("k3", b"c"))
    calls = itertools.count()
    real = compactor_mod.encode_record

    def failing(position: Position, data: bytes, retained: list[int] | None) -> bytes:
        if next(calls) == 1:
            raise OSError("disk full")
        return real(position, data, retained)

    monkeypatch.setattr(compactor_mod, "encode_record", failing)
    await topic.compaction.trigger()
    assert topic.compaction.status_json() == {"status": "ERROR", "lastError": "OSError: disk full"}
    assert topic.compaction.state is not None and topic.compaction.state.generation == 1
    pn = topic.topic_name.persistence_name
    assert not broker.factory.exists(compacted_ledger_name(pn, 2))  # partial one deleted
    assert kv(await compacted(topic)) == [("k1", b"a"), ("k2", b"b")]
    monkeypatch.setattr(compactor_mod, "encode_record", real)
    await compact(topic)
    assert kv(await compacted(topic)) == [("k2", b"b"), ("k1", b"a2"), ("k3", b"c")]


# --------------------------------------------------------------------------------------
# Durability and recovery.


async def test_state_is_recovered_and_the_cursor_stays_hidden(broker: Broker) -> None:
    topic = await broker.topic()
    pos = await publish(topic, single("k1", b"a"), single("k1", b"b"), single("k2", b"c"))
    await compact(topic)
    state = topic.compaction.state
    topic = await broker.restart()
    assert topic.compaction.state == state
    assert topic.compaction.status is CompactionStatus.NOT_RUN  # status is not durable
    assert await compacted(topic) == [Seen(pos[1], -1, "k1", b"b"), Seen(pos[2], -1, "k2", b"c")]
    assert COMPACTION_CURSOR in topic.ledger.cursors()
    assert COMPACTION_CURSOR not in topic.subscriptions
    assert COMPACTION_CURSOR not in topic.stats()["subscriptions"]  # type: ignore[operator]
    assert topic.internal_stats()["compactedLedger"]["entries"] == 2  # type: ignore[index]
    # Internal stats list the compactor's cursor, as Pulsar's do: its mark-delete
    # position is the horizon, and its properties the durable state.
    cursor = topic.internal_stats()["cursors"][COMPACTION_CURSOR]  # type: ignore[index]
    assert state is not None and cursor["markDeletePosition"] == str(state.horizon)
    assert cursor["properties"] == state.properties()
    consumer = Consumer(consumer_id=1, consumer_name="c", subscription_name=COMPACTION_CURSOR,
                        sub_type=SUB_EXCLUSIVE, connection=FakeConnection())
    with pytest.raises(NotAllowedError):
        topic.subscribe(consumer, True, InitialPosition.EARLIEST, None)


async def test_leftovers_of_an_interrupted_compaction_are_deleted_on_load(
    broker: Broker,
) -> None:
    topic = await broker.topic()
    await publish(topic, single("k", b"v"))
    await compact(topic)
    pn = topic.topic_name.persistence_name
    for generation in (0, 2):  # before and after the current generation 1
        ml = await broker.factory.open(compacted_ledger_name(pn, generation))
        await ml.add_entry(b"partial")
        await ml.close()
    topic = await broker.restart()
    assert [broker.factory.exists(compacted_ledger_name(pn, g)) for g in (0, 1, 2)] == [
        False, True, False,
    ]
    assert kv(await compacted(topic)) == [("k", b"v")]


async def test_the_sparse_index_is_rebuilt_after_a_restart(broker: Broker) -> None:
    topic = await broker.topic()
    n = INDEX_INTERVAL_RECORDS * 2 + 10
    pos = await publish(topic, *(single(f"k{i}", b"v") for i in range(n)))
    await compact(topic)
    for restart in (False, True):
        if restart:
            topic = await broker.restart()
        for i in (0, 1, INDEX_INTERVAL_RECORDS, INDEX_INTERVAL_RECORDS + 1, n - 1):
            records = await topic.compaction.read(pos[i], 2)
            assert records[0].position == pos[i]


async def test_deleting_the_topic_deletes_its_compacted_ledgers(broker: Broker) -> None:
    topic = await broker.topic()
    await publish(topic, single("k", b"v"))
    await compact(topic)
    name = compacted_ledger_name(topic.topic_name.persistence_name, 1)
    await AdminAdapter(broker.service).delete_topic(TOPIC, force=True)
    assert not broker.factory.exists(name)


# --------------------------------------------------------------------------------------
# Serving read_compacted consumers.


async def test_compacted_reader_gets_the_table_then_new_messages(broker: Broker) -> None:
    topic = await broker.topic()
    pos = await publish(
        topic, single("k1", b"a"), batch([("k2", b"b"), ("k1", b"c"), ("k3", b"d")], ZSTD),
        single("k3", b""),
    )
    await compact(topic)
    after = await publish(topic, single("k2", b"e"), single(None, b"keyless"))
    consumer, conn = reader(topic)
    assert await conn.wait_for(4) == [
        Seen(pos[1], 0, "k2", b"b"), Seen(pos[1], 1, "k1", b"c"),
        Seen(after[0], -1, "k2", b"e"), Seen(after[1], -1, None, b"keyless"),
    ]
    assert conn.ack_sets[0] == [0b011]  # the dropped member travels as acknowledged
    # A plain reader of the same topic still sees everything.
    _, plain = reader(topic, read_compacted=False)
    assert len(await plain.wait_for(7)) == 7
    await idle(topic, consumer)
    assert len(conn.seen) == 4


async def test_compacted_reader_from_a_position_reads_the_rest_of_the_table(
    broker: Broker,
) -> None:
    topic = await broker.topic()
    pos = await publish(topic, *(single(f"k{i % 3}", bytes([i])) for i in range(6)))
    await compact(topic)
    _, conn = reader(topic, start=pos[4])
    assert kv(await conn.wait_for(2)) == [("k1", b"\x04"), ("k2", b"\x05")]


async def test_shared_and_key_shared_refuse_read_compacted(broker: Broker) -> None:
    topic = await broker.topic()
    for sub_type in (SUB_SHARED, SUB_KEY_SHARED):
        with pytest.raises(NotAllowedError):
            reader(topic, sub_type=sub_type, durable=True)
    assert not topic.subscriptions
    _, conn = reader(topic, sub_type=SUB_FAILOVER, durable=True)
    await publish(topic, single("k", b"v"))
    assert kv(await conn.wait_for(1)) == [("k", b"v")]


async def test_trimmed_ledgers_are_served_from_the_compacted_ledger() -> None:
    config = ServiceConfiguration(
        managed_ledger=ManagedLedgerSettings(
            managed_ledger_max_entries_per_ledger=3,
            managed_ledger_min_ledger_rollover_time_minutes=0,
        )
    )
    broker = Broker(config)
    try:
        topic = await broker.topic()
        pos = await publish(topic, *(single(f"k{i % 4}", bytes([i])) for i in range(10)))
        await compact(topic)
        after = await publish(topic, single("k0", b"new"))
        trimmed = await topic.ledger.trim_consumed_ledgers()
        assert trimmed and topic.ledger.first_position > pos[5]
        _, conn = reader(topic)
        assert kv(await conn.wait_for(5)) == [
            ("k2", b"\x06"), ("k3", b"\x07"), ("k0", b"\x08"), ("k1", b"\x09"), ("k0", b"new"),
        ]
        # A reader given a trimmed position (e.g. reconnecting) is served too.
        _, conn = reader(topic, start=pos[7])
        assert kv(await conn.wait_for(4)) == [
            ("k3", b"\x07"), ("k0", b"\x08"), ("k1", b"\x09"), ("k0", b"new"),
        ]
        # The last message id falls back to the compacted ledger when needed.
        assert (await topic.last_message(read_compacted=True))[0] == after[0]
        # After a restart and a compaction covering `after`, nothing is left in the
        # topic's ledgers: compacted readers are served from the compacted ledger only.
        topic = await broker.restart()
        await compact(topic)
        trimmed = await topic.ledger.trim_consumed_ledgers()
        assert trimmed and topic.ledger.first_position > after[0]
        position, info = await topic.last_message()
        assert position == after[0] and info is not None
        assert (await topic.last_message(read_compacted=False))[1] is None
        _, conn = reader(topic)
        assert kv(await conn.wait_for(4)) == [
            ("k2", b"\x06"), ("k3", b"\x07"), ("k1", b"\x09"), ("k0", b"new"),
        ]
    finally:
        await broker.close()


async def test_a_reader_past_the_horizon_is_not_switched_to_a_newer_table(
    broker: Broker,
) -> None:
    """It saw k1 before; it must see k1's tombstone even after it is compacted away."""
    topic = await broker.topic()
    await publish(topic, single("k1", b"a"))
    await compact(topic)
    consumer, conn = reader(topic, permits=1)
    assert kv(await conn.wait_for(1)) == [("k1", b"a")]
    await idle(topic, consumer)
    await publish(topic, single("k1", b""), single("k2", b"b"))
    await compact(topic)
    assert kv(await compacted(topic)) == [("k2", b"b")]
    topic.subscriptions[consumer.subscription_name].flow(consumer, 10)
    assert kv(await conn.wait_for(3)) == [("k1", b"a"), ("k1", b""), ("k2", b"b")]


async def test_a_new_generation_mid_read_loses_no_deletion(broker: Broker) -> None:
    """Half-way through generation 1, generation 2 arrives: the reader finishes the
    view it started (pinned horizon) and then sees the topic, tombstones included."""
    topic = await broker.topic()
    await publish(topic, single("k1", b"a"), single("k2", b"b"), single("k3", b"c"))
    await compact(topic)
    consumer, conn = reader(topic, permits=1)
    assert kv(await conn.wait_for(1)) == [("k1", b"a")]
    await idle(topic, consumer)
    await publish(topic, single("k1", b""), single("k2", b"b2"))
    await compact(topic)
    topic.subscriptions[consumer.subscription_name].flow(consumer, 10)
    assert kv(await conn.wait_for(4)) == [
        ("k1", b"a"), ("k3", b"c"), ("k1", b""), ("k2", b"b2"),
    ]
    await idle(topic, consumer)
    assert len(conn.seen) == 4


async def test_durable_compacted_subscription_acks_and_rewinds(broker: Broker) -> None:
    topic = await broker.topic()
    pos = await publish(topic, single("k1", b"a"), single("k2", b"b"), single("k1", b"c"),
                        single("k3", b"d"))
    await compact(topic)
    consumer, conn = reader(topic, durable=True)
    sub = topic.subscriptions[consumer.subscription_name]
    assert kv(await conn.wait_for(3)) == [("k2", b"b"), ("k1", b"c"), ("k3", b"d")]
    # Nothing acknowledged: a redelivery request starts the table over.
    sub.redeliver(consumer, None)
    assert kv(await conn.wait_for(6))[3:] == [("k2", b"b"), ("k1", b"c"), ("k3", b"d")]
    # After a cumulative ack, a new consumer gets only what follows it.
    sub.ack_cumulative(consumer, pos[2])
    topic.remove_consumer(consumer)
    consumer2 = Consumer(
        consumer_id=next(_consumer_ids), consumer_name="c-again",
        subscription_name=consumer.subscription_name, sub_type=SUB_EXCLUSIVE,
        connection=(conn3 := FakeConnection()), read_compacted=True,
    )
    topic.subscribe(consumer2, True, InitialPosition.EARLIEST, None)
    sub.flow(consumer2, 100)
    assert kv(await conn3.wait_for(1)) == [("k3", b"d")]
    await idle(topic, consumer2)
    assert len(conn3.seen) == 1


async def test_durable_subscription_from_before_compaction_reads_the_table(
    broker: Broker,
) -> None:
    """Pulsar reads the compacted ledger for any cursor before the horizon: a durable
    subscription created when the topic was empty gets the latest value per key."""
    topic = await broker.topic()
    conn = FakeConnection()
    first = Consumer(
        consumer_id=next(_consumer_ids), consumer_name="first", subscription_name="table",
        sub_type=SUB_EXCLUSIVE, connection=conn, read_compacted=True,
    )
    sub = topic.subscribe(first, True, InitialPosition.LATEST, None)
    topic.remove_consumer(first)
    pos = await publish(topic, single("k", b"hello-0"), single("k", b"hello-1"))
    await compact(topic)
    again = Consumer(
        consumer_id=next(_consumer_ids), consumer_name="again",
        subscription_name=first.subscription_name, sub_type=SUB_EXCLUSIVE,
        connection=conn, read_compacted=True,
    )
    topic.subscribe(again, True, InitialPosition.LATEST, None)
    sub.flow(again, 10)
    after = await publish(topic, single("k", b"hello-2"))
    assert await conn.wait_for(2) == [
        Seen(pos[1], -1, "k", b"hello-1"), Seen(after[0], -1, "k", b"hello-2"),
    ]
    # A redelivery request reads the current view again from the first unacked entry.
    sub.ack_cumulative(again, pos[1])
    sub.redeliver(again, None)
    assert kv((await conn.wait_for(3))[2:]) == [("k", b"hello-2")]


async def test_last_message_id_for_compacted_consumers(broker: Broker) -> None:
    topic = await broker.topic()
    pos = await publish(topic, batch([("k1", b"a"), ("k2", b"b"), ("k2", b"")]))
    position, info = await topic.last_message()
    assert position == pos[0] and info is not None and info.num_messages == 3
    await compact(topic)
    # The batch's last member is a tombstone: the last message a compacted reader can
    # receive is member 0, and the answer must say so (or its reader never finishes).
    position, info = await topic.last_message(read_compacted=True)
    assert position == pos[0] and info is not None and info.num_messages - 1 == 0
    assert (await topic.last_message(read_compacted=None))[1] == info
    position, info = await topic.last_message(read_compacted=False)
    assert info is not None and info.num_messages == 3
    # A newer message than the horizon is the answer for everybody.
    after = await publish(topic, single(None, b"x"))
    assert (await topic.last_message(read_compacted=True))[0] == after[0]


# --------------------------------------------------------------------------------------
# The read-position rules, state by state.

H = Position(5, 10)  # the current horizon
PIN = Position(5, 6)  # an older horizon a subscription started under
FIRST = Position(5, 0)  # the topic's first retained entry
ORIGIN_MD = Position(4, -1)


def _state(steps: Sequence[str]) -> CompactedReadState:
    state = CompactedReadState()
    for step in steps:
        if step == "start-earliest":
            state.start_at(EARLIEST, ORIGIN_MD)
        elif step == "start-at-5:3":
            state.start_at(Position(5, 3), ORIGIN_MD)
        elif step == "start-latest":
            state.start_at(Position(2**63 - 1, 2**63 - 1), ORIGIN_MD)
        elif step == "pinned":  # started while PIN was the horizon
            state.start_at(EARLIEST, ORIGIN_MD)
            assert state.plan(FIRST, PIN, FIRST) == (EARLIEST, PIN)
            state.read_compacted_ledger()
        elif step == "read-compacted":
            state.read_compacted_ledger()
        elif step == "read-topic":
            state.read_topic()
        elif step == "rewind-unchanged":
            state.on_rewind(ORIGIN_MD)
        elif step == "rewind-moved":
            state.on_rewind(Position(5, 2))
        elif step == "seek-5:3":
            state.on_seek(Position(5, 3), Position(5, 2))
        else:
            raise AssertionError(step)
    return state


@pytest.mark.parametrize(
    ("steps", "read_position", "expected"),
    [
        # Never started from a position and never rewound: the topic.
        ([], Position(5, 3), None),
        ([], Position(4, 7), (Position(4, 7), H)),  # ...unless trimmed: compacted only
        ([], Position(5, 11), None),
        # Started at a position: the current compacted view from there.
        (["start-earliest"], Position(6, 0), (EARLIEST, H)),
        (["start-at-5:3"], Position(6, 0), (Position(5, 3), H)),
        (["start-latest"], Position(6, 0), None),
        # Then the cursor's position, within the horizon it started under.
        (["pinned"], Position(5, 3), (Position(5, 3), PIN)),
        (["pinned"], PIN, (PIN, PIN)),
        (["pinned"], Position(5, 7), None),  # past its view: the topic, not H's view
        (["pinned", "read-topic"], Position(5, 7), None),
        (["pinned", "read-topic"], Position(4, 7), (Position(4, 7), H)),  # trimmed
        # A rewind with nothing acknowledged since the start starts over from there;
        # otherwise it reads the current view from the first unacknowledged entry.
        (["pinned", "read-topic", "rewind-unchanged"], Position(5, 7), (EARLIEST, H)),
        (["pinned", "read-topic", "rewind-moved"], Position(5, 7), (Position(5, 7), H)),
        (["pinned", "read-topic", "rewind-moved"], Position(5, 11), None),
        (["rewind-moved"], Position(5, 3), (Position(5, 3), H)),  # existing durable
        (["rewind-moved"], Position(4, 7), (Position(4, 7), H)),  # trimmed
        (["rewind-moved", "read-compacted"], Position(5, 11), None),
        (["pinned", "read-topic", "seek-5:3"], Position(5, 9), (Position(5, 3), H)),
        (["start-earliest", "read-topic"], Position(5, 3), None),
    ],
)
def test_compacted_read_plan(
    steps: list[str], read_position: Position, expected: tuple[Position, Position] | None
) -> None:
    assert _state(steps).plan(read_position, H, FIRST) == expected


# --------------------------------------------------------------------------------------
# The admin REST API, wired to the real broker.


@pytest.fixture
async def admin(broker: Broker) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(create_admin_app(AdminAdapter(broker.service)))) as c:
        yield c


PATH = "/admin/v2/persistent/public/default/table/compaction"


async def test_admin_trigger_and_status(
    broker: Broker, admin: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await admin.get(PATH)).status == 404  # no such topic yet
    topic = await broker.topic()
    assert await (await admin.get(PATH)).json() == {"status": "NOT_RUN", "lastError": ""}
    await publish(topic, single("k", b"v"))
    gate = asyncio.Event()
    real = compaction_mod.TwoPhaseCompactor

    class Gated(real):  # type: ignore[valid-type,misc]
        async def compact(self, *args: Any) -> Any:
            await gate.wait()
            return await super().compact(*args)

    monkeypatch.setattr(compaction_mod, "TwoPhaseCompactor", Gated)
    assert (await admin.put(PATH)).status == 204
    assert await (await admin.get(PATH)).json() == {"status": "RUNNING", "lastError": ""}
    resp = await admin.put(PATH)
    assert resp.status == 409 and "already" in (await resp.json())["reason"]
    gate.set()
    await topic.compaction.wait()
    assert await (await admin.get(PATH)).json() == {"status": "SUCCESS", "lastError": ""}


async def test_admin_trigger_on_a_partitioned_topic(
    broker: Broker, admin: TestClient[Any, Any]
) -> None:
    base = "/admin/v2/persistent/public/default/parts"
    assert (await admin.put(base + "/partitions", json=2)).status == 204
    name = TopicName.parse("persistent://public/default/parts")
    partition = await broker.service.get_topic(name.partition(1), create=True)
    await publish(partition, single("k", b"v"))
    assert (await admin.put(base + "/compaction")).status == 204
    await partition.compaction.wait()
    resp = await admin.get(base + "-partition-1/compaction")
    assert await resp.json() == {"status": "SUCCESS", "lastError": ""}
    assert (await admin.put("/admin/v2/persistent/public/default/nope/compaction")).status == 404


# --------------------------------------------------------------------------------------
# The broker's own tables read past what they cannot parse.


async def test_a_system_table_skips_an_unreadable_compacted_record(broker: Broker) -> None:
    table_topic = "persistent://pulsar/system/__terminated_txn_state_0"
    table = SystemTopicTable(broker.service, table_topic, compact_every_writes=10_000)
    for i in range(5):
        await table.write(f"k{i}", f"v{i}".encode())
    topic = await broker.service.get_topic(TopicName.parse(table_topic), create=True)
    await compact(topic)
    view = topic.compaction.view
    assert view is not None
    # A damaged record in the compacted view (the compacted ledger's own entry).
    damaged = await view.ledger.add_entry(b"\x00\x01 not a compacted record")
    await table.write("k5", b"v5")

    await broker.restart()
    unreadable: list[CorruptRecordError] = []
    table = SystemTopicTable(broker.service, table_topic, on_unreadable=unreadable.append)
    assert await table.items() == {f"k{i}": f"v{i}".encode() for i in range(6)}
    assert [e.position for e in unreadable] == [str(damaged)]
    assert "cannot be read" in str(unreadable[0])
    # Readers of the topic that must see every record still fail on it.
    reloaded = await broker.service.get_topic(TopicName.parse(table_topic), create=False)
    with pytest.raises(CorruptRecordError):
        await reloaded.compaction.read(EARLIEST, 100)
