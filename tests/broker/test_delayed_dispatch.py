"""Shared dispatch of delayed entries on the broker core (memory storage, a virtual
wall clock): held back until due, the bound on the index, acks and seeks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from quasar.broker.consumer import Consumer
from quasar.broker.delayed_delivery import DelayedDelivery
from quasar.broker.service import BrokerService
from quasar.broker.subscription import Subscription
from quasar.clock import ManualClock
from quasar.config import ServiceConfiguration
from quasar.protocol import TopicName, make_entry, pb
from quasar.storage import MemoryManagedLedgerFactory
from quasar.storage.api import InitialPosition, Position
from quasar.storage.metadata.memory import MemoryMetadataStore

TOPIC = "persistent://public/default/delayed"
T0 = 1_700_000_000_000


class Connection:
    remote_address = "test"
    client_version = "test"

    def __init__(self) -> None:
        self.frames = 0

    def write(self, frame: bytes) -> None:
        self.frames += 1

    def close_consumer(self, consumer_id: int) -> None:
        pass


@pytest.fixture
async def service() -> AsyncIterator[BrokerService]:
    config = ServiceConfiguration.load(env={}, overrides={
        "isDelayedDeliveryDeliverAtTimeStrict": "true",
        "delayedDeliveryMaxIndexedMessagesPerSubscription": "2",
        "delayedDeliveryFixedDelayDetectionLookahead": "0",
    })
    store = MemoryMetadataStore()
    svc = BrokerService(config, MemoryManagedLedgerFactory(store), store)
    svc.delayed_delivery = DelayedDelivery(config.delayed_delivery, ManualClock(T0))
    svc.resources.bootstrap_standalone("standalone")
    yield svc
    await svc.close()


async def publish(service: BrokerService, deliver_at: list[int]) -> list[Position]:
    topic = service.topics[TOPIC]
    positions = []
    for i, at in enumerate(deliver_at):
        meta = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=T0)
        if at:
            meta.deliver_at_time = at
        positions.append(await topic.ledger.add_entry(make_entry(meta, b"m")))
    return positions


async def shared_consumer(service: BrokerService) -> tuple[Subscription, Consumer]:
    """A durable subscription from the earliest entry and one Shared consumer on it
    with permits to spare."""
    topic = await service.get_topic(TopicName.parse(TOPIC), create=True)
    sub = topic.subscriptions.get("s") or topic.add_durable_subscription(
        "s", topic.ledger.open_cursor("s", InitialPosition.EARLIEST)
    )
    consumer = Consumer(1, "c", "s", pb.CommandSubscribe.Shared, Connection())
    sub.add_consumer(consumer)
    sub.flow(consumer, 100)
    return sub, consumer


async def settle(sub: Subscription) -> None:
    """Wait for the dispatch loop to run out of work."""
    for _ in range(100):
        task = sub.dispatcher._task if sub.dispatcher else None
        if task is None or task.done():
            await asyncio.sleep(0)  # one more turn: a timer may have scheduled it
            task = sub.dispatcher._task if sub.dispatcher else None
            if task is None or task.done():
                return
        else:
            await task
    raise AssertionError("the dispatch loop never settled")


def clock(service: BrokerService) -> ManualClock:
    c = service.delayed_delivery.clock
    assert isinstance(c, ManualClock)
    return c


async def test_entries_are_held_until_due_and_others_pass(service: BrokerService) -> None:
    await service.get_topic(TopicName.parse(TOPIC), create=True)
    p = await publish(service, [0, T0 + 100, 0, T0 + 200])
    sub, consumer = await shared_consumer(service)
    await settle(sub)
    assert list(consumer.pending) == [p[0], p[2]]
    assert sub.delayed_messages() == 2
    stats = sub.stats()
    assert stats["msgDelayed"] == 2 and stats["msgBacklogNoDelayed"] == 2
    clock(service).advance(99)
    assert sub.dispatcher is not None
    sub.dispatcher.schedule()
    await settle(sub)
    assert p[1] not in consumer.pending
    clock(service).advance(1)
    sub.dispatcher.schedule()
    await settle(sub)
    assert p[1] in consumer.pending and p[3] not in consumer.pending
    clock(service).advance(100)
    sub.dispatcher.schedule()
    await settle(sub)
    assert set(consumer.pending) == set(p) and sub.delayed_messages() == 0


async def test_a_full_index_stops_reading_until_entries_fall_due(
    service: BrokerService,
) -> None:
    await service.get_topic(TopicName.parse(TOPIC), create=True)
    p = await publish(service, [T0 + 100, T0 + 100, T0 + 100, 0])
    sub, consumer = await shared_consumer(service)
    await settle(sub)
    # Two fit; the third and the immediate one behind it wait to be read again.
    assert sub.delayed_messages() == 2 and consumer.pending == {}
    assert sub.cursor.read_position == p[2]
    clock(service).advance(100)
    assert sub.dispatcher is not None
    sub.dispatcher.schedule()
    await settle(sub)
    assert set(consumer.pending) == set(p) and sub.delayed_messages() == 0


async def test_an_entry_acknowledged_before_its_time_leaves_the_index(
    service: BrokerService,
) -> None:
    await service.get_topic(TopicName.parse(TOPIC), create=True)
    p = await publish(service, [T0 + 100, T0 + 100])
    sub, consumer = await shared_consumer(service)
    await settle(sub)
    assert sub.delayed_messages() == 2
    sub.expire_up_to(p[0], expired=False)  # the operator cleared part of the backlog
    assert sub.delayed_messages() == 1
    assert sub.delayed_index_size_bytes() == 24
    clock(service).advance(100)
    assert sub.dispatcher is not None
    sub.dispatcher.schedule()
    await settle(sub)
    assert list(consumer.pending) == [p[1]]


async def test_a_seek_forgets_the_index_and_the_reread_rebuilds_it(
    service: BrokerService,
) -> None:
    await service.get_topic(TopicName.parse(TOPIC), create=True)
    p = await publish(service, [T0 + 100, 0])
    sub, _ = await shared_consumer(service)
    await settle(sub)
    assert sub.delayed_messages() == 1
    sub.reset_cursor(p[0])  # disconnects the consumer
    assert sub.delayed_messages() == 0
    sub, consumer = await shared_consumer(service)
    await settle(sub)
    assert sub.delayed_messages() == 1 and list(consumer.pending) == [p[1]]


async def test_exclusive_delivers_delayed_entries_at_once(service: BrokerService) -> None:
    topic = await service.get_topic(TopicName.parse(TOPIC), create=True)
    p = await publish(service, [T0 + 100_000])
    sub = topic.add_durable_subscription(
        "x", topic.ledger.open_cursor("x", InitialPosition.EARLIEST)
    )
    consumer = Consumer(2, "c", "x", pb.CommandSubscribe.Exclusive, Connection())
    sub.add_consumer(consumer)
    sub.flow(consumer, 10)
    await settle(sub)
    assert list(consumer.pending) == p and sub.delayed_messages() == 0
