"""What a connection's producers and consumers cost the broker, on in-memory storage:
registering a producer looks up the topic's producers instead of scanning them, and
dispatch stops while the consumer's connection cannot take more (its write buffer
is full) and resumes where it stopped, losing and repeating nothing; a read asks for
about as many bytes as Pulsar's dispatcherMaxReadSizeBytes, however many permits."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from quasar.broker.consumer import Consumer, WriteState
from quasar.broker.producer import ACCESS_EXCLUSIVE, Producer
from quasar.broker.service import BrokerService
from quasar.broker.subscription import SUB_EXCLUSIVE, SUB_FAILOVER, SUB_SHARED
from quasar.broker.topic import PersistentTopic
from quasar.config import ServiceConfiguration
from quasar.errors import ProducerBusy, ProducerFenced
from quasar.protocol import FrameDecoder, TopicName, make_entry, pb
from quasar.storage import MemoryManagedLedgerFactory
from quasar.storage.api import InitialPosition, Position, resolve_append
from quasar.storage.metadata.memory import MemoryMetadataStore


class _Connection:
    """A connection whose write buffer 'fills' after ``capacity`` MESSAGE frames:
    it then marks its write state not writable, as the server's connection does
    when the transport calls ``pause_writing``."""

    remote_address = "127.0.0.1:1"
    client_version = "test"

    def __init__(self, capacity: int = 1 << 30) -> None:
        self._decoder = FrameDecoder(64 * 1024 * 1024)
        self.write_state = WriteState()
        self.capacity = capacity
        self.buffered = 0
        self.received: list[int] = []  # entry ids, in order
        self.changed = asyncio.Event()

    def write(self, frame: bytes) -> None:
        for f in self._decoder.feed(frame):
            if f.type == pb.BaseCommand.MESSAGE:
                self.received.append(f.command.message.message_id.entryId)
                self.buffered += 1
        if self.buffered >= self.capacity:
            self.write_state.writable = False
        self.changed.set()

    def drain(self) -> None:
        """The client read everything: the buffer is empty and writable again."""
        self.buffered = 0
        self.write_state.writable = True

    def close_consumer(self, consumer_id: int) -> None:
        pass

    def close_producer(self, producer_id: int) -> None:
        pass

    async def settled(self) -> None:
        """Wait until the dispatcher has nothing more to do for now."""
        while True:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), 0.2)
            except TimeoutError:
                return


@pytest.fixture
async def service() -> AsyncIterator[BrokerService]:
    store = MemoryMetadataStore()
    factory = MemoryManagedLedgerFactory(store)
    svc = BrokerService(ServiceConfiguration(), factory, store)
    svc.resources.bootstrap_standalone("standalone")
    yield svc
    await svc.close()
    await factory.close()


async def _topic(service: BrokerService, name: str) -> PersistentTopic:
    return await service.get_topic(
        TopicName.parse(f"persistent://public/default/{name}"), create=True
    )


async def _publish(topic: PersistentTopic, count: int, size: int = 100) -> None:
    producer = Producer(producer_id=1, producer_name="p", connection=_Connection())
    await topic.add_producer(producer)
    loop = asyncio.get_running_loop()
    done: list[asyncio.Future[Position]] = [loop.create_future() for _ in range(count)]
    for seq in range(count):
        md = pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1)
        topic.publish(
            producer, seq, seq, 1, make_entry(md, b"x" * size),
            functools.partial(resolve_append, done[seq]),
        )
    await asyncio.gather(*done)
    topic.remove_producer(producer)


class _NoScan(dict[int, Producer]):
    """A producer table that fails the test when anything walks through it."""

    def _scan(self, *args: Any) -> Any:
        raise AssertionError("the topic's producers were scanned")

    values = items = keys = __iter__ = _scan


async def test_adding_and_removing_a_producer_does_not_scan_the_topics_producers(
    service: BrokerService,
) -> None:
    topic = await _topic(service, "many-producers")
    conn = _Connection()
    topic.producers = _NoScan()
    producers = [
        Producer(producer_id=i, producer_name=f"p-{i}", connection=conn,
                 user_provided_name=True)
        for i in range(1000)
    ]
    for p in producers:
        await topic.add_producer(p)
    assert len(topic.producers) == 1000
    # Name uniqueness and exclusive access are still enforced, from the index and
    # the count.
    with pytest.raises(ProducerBusy, match="already connected"):
        await topic.add_producer(Producer(producer_id=9999, producer_name="p-7",
                                          connection=conn))
    with pytest.raises(ProducerFenced, match="existing shared producers"):
        await topic.add_producer(Producer(producer_id=9998, producer_name="x",
                                          connection=conn, access_mode=ACCESS_EXCLUSIVE))
    for p in producers:
        topic.remove_producer(p)
    assert len(topic.producers) == 0
    # A name is free again once its producer left.
    await topic.add_producer(Producer(producer_id=1, producer_name="p-7", connection=conn,
                                      user_provided_name=True))


@pytest.mark.parametrize("sub_type", [SUB_EXCLUSIVE, SUB_FAILOVER, SUB_SHARED])
async def test_dispatch_stops_while_the_connection_cannot_take_more_and_resumes(
    service: BrokerService, sub_type: int
) -> None:
    topic = await _topic(service, f"slow-reader-{sub_type}")
    await _publish(topic, 500)
    conn = _Connection(capacity=100)
    consumer = Consumer(
        consumer_id=1, consumer_name="c", subscription_name="s", sub_type=sub_type,
        connection=conn, write_state=conn.write_state, max_unacked_messages=0,
    )
    sub = topic.subscribe(consumer, True, InitialPosition.EARLIEST, None)
    sub.flow(consumer, 2**31)  # what a hostile client may grant
    await conn.settled()
    # Exactly the buffer's worth went out, however many permits there are.
    assert len(conn.received) == 100
    while len(conn.received) < 500:
        conn.drain()
        topic.resume_dispatch(consumer)
        await conn.settled()
    # Everything arrived once, in order: what did not fit was read again, not lost.
    assert conn.received == list(range(500))
    assert consumer.unacked_messages == 500


async def test_a_consumer_without_permits_is_not_woken_by_its_connection(
    service: BrokerService,
) -> None:
    topic = await _topic(service, "no-permits")
    await _publish(topic, 10)
    conn = _Connection(capacity=5)
    consumer = Consumer(
        consumer_id=1, consumer_name="c", subscription_name="s", sub_type=SUB_EXCLUSIVE,
        connection=conn, write_state=conn.write_state,
    )
    sub = topic.subscribe(consumer, True, InitialPosition.EARLIEST, None)
    sub.flow(consumer, 3)
    await conn.settled()
    assert len(conn.received) == 3
    conn.drain()
    topic.resume_dispatch(consumer)
    await conn.settled()
    assert len(conn.received) == 3


async def test_a_read_asks_for_about_5_mib_whatever_the_permits(
    service: BrokerService,
) -> None:
    small, large = await _topic(service, "small"), await _topic(service, "large")
    await _publish(small, 10)
    await _publish(large, 10, size=1024 * 1024)
    for topic, entries in ((small, 100), (large, 4)):
        conn = _Connection()
        consumer = Consumer(consumer_id=1, consumer_name="c", subscription_name="s",
                            sub_type=SUB_SHARED, connection=conn)
        sub = topic.subscribe(consumer, True, InitialPosition.EARLIEST, None)
        assert sub.dispatcher is not None
        # 100 entries at most; of 1 MiB entries (and their metadata), what fits 5 MiB.
        assert sub.dispatcher.read_batch_entries(2**31) == entries
        assert sub.dispatcher.read_batch_entries(1) == 1
