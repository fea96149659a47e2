"""A non-persistent topic: receipts, refusals and unloading (pure logic, no broker)."""

from __future__ import annotations

import asyncio

import pytest

from quasar.broker.consumer import Consumer
from quasar.broker.entry_info import EntryInfo
from quasar.broker.non_persistent_topic import NonPersistentTopic
from quasar.broker.producer import ACCESS_EXCLUSIVE, ACCESS_WAIT_FOR_EXCLUSIVE, Producer
from quasar.broker.subscription import SUB_SHARED
from quasar.errors import NotAllowedError, ProducerBusy, ProducerFenced, QuasarError
from quasar.protocol.topic_name import TopicName
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import EARLIEST, LATEST, Position


class Connection:
    remote_address = "127.0.0.1:1"
    client_version = "test"

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.closed: list[int] = []

    def write(self, frame: bytes) -> None:
        self.frames.append(frame)

    def close_consumer(self, consumer_id: int) -> None:
        self.closed.append(consumer_id)

    def close_producer(self, producer_id: int) -> None:
        self.closed.append(producer_id)


def published(data: bytes, num_messages: int) -> EntryInfo:
    return EntryInfo(num_messages, False, None, 1, 0, None, None, "p", 0)


class Topic:
    def __init__(self) -> None:
        self.unloaded: list[NonPersistentTopic] = []
        self.topic = NonPersistentTopic(
            TopicName.parse("non-persistent://public/default/t"), published, self.unloaded.append
        )


def consumer(cid: int = 1, **kw: object) -> Consumer:
    c = Consumer(cid, f"c{cid}", "s", SUB_SHARED, Connection(), **kw)  # type: ignore[arg-type]
    c.add_permits(10)
    return c


def producer(pid: int = 1, mode: int = 0) -> Producer:
    return Producer(pid, f"p{pid}", Connection(), access_mode=mode)


def publish(topic: NonPersistentTopic, p: Producer, txn: TxnID | None = None) -> tuple:
    answers: list[tuple[Position | None, BaseException | None]] = []
    topic.publish(p, 0, 0, 1, b"data", lambda pos, err: answers.append((pos, err)), txn)
    return answers[0]


def test_publish_answers_0_0_at_once_and_counts() -> None:
    t = Topic().topic
    p = producer()
    asyncio.run(t.add_producer(p))
    c = consumer()
    t.subscribe(c, False, 0, LATEST)
    assert publish(t, p) == (Position(0, 0), None)
    assert (t.msg_in, p.msg_in, c.msg_out) == (1, 1, 1)
    stats = t.stats()
    assert stats["msgInCounter"] == 1 and stats["storageSize"] == 0


def test_transactional_publish_is_refused() -> None:
    t = Topic().topic
    p = producer()
    asyncio.run(t.add_producer(p))
    pos, err = publish(t, p, TxnID(1, 2))
    assert pos is None and isinstance(err, NotAllowedError) and "non-persistent" in str(err)
    assert t.msg_in == 0


def test_refused_subscriptions() -> None:
    holder = Topic()
    t = holder.topic
    with pytest.raises(NotAllowedError, match="readCompacted"):
        t.subscribe(consumer(read_compacted=True), True, 0, None)
    # A refused request leaves nothing loaded.
    assert holder.unloaded == [t]
    with pytest.raises(NotAllowedError, match="non-persistent"):
        Topic().topic.subscribe(consumer(), False, 0, Position(3, 4))
    fresh = Topic().topic
    fresh.subscribe(consumer(1), False, 1, EARLIEST)  # from the earliest: from now on
    assert fresh.consumer_count() == 1


def test_producer_access_modes_are_a_persistent_topics() -> None:
    t = Topic().topic
    asyncio.run(t.add_producer(producer(1, ACCESS_EXCLUSIVE)))
    assert t.topic_epoch == 0
    with pytest.raises(ProducerBusy):
        asyncio.run(t.add_producer(producer(2)))
    with pytest.raises(ProducerFenced):
        asyncio.run(t.add_producer(producer(3, ACCESS_EXCLUSIVE)))

    async def wait_for_exclusive() -> int | None:
        fresh = Topic().topic
        holder = producer(4, ACCESS_EXCLUSIVE)
        await fresh.add_producer(holder)
        queued: list[bool] = []
        waiter = asyncio.ensure_future(
            fresh.add_producer(producer(5, ACCESS_WAIT_FOR_EXCLUSIVE), lambda: queued.append(True))
        )
        await asyncio.sleep(0)
        assert queued and not waiter.done() and not fresh.closed
        fresh.remove_producer(holder)  # the holder leaves: the waiter gets the topic
        await waiter
        return fresh.topic_epoch

    assert asyncio.run(wait_for_exclusive()) == 1


def test_unloads_with_its_last_producer_and_subscription() -> None:
    holder = Topic()
    t = holder.topic
    p = producer()
    asyncio.run(t.add_producer(p))
    c = consumer()
    t.subscribe(c, True, 0, None)
    t.remove_producer(p)
    assert holder.unloaded == []
    t.remove_consumer(c)
    assert holder.unloaded == [t] and t.closed
    with pytest.raises(QuasarError):
        t.subscribe(consumer(2), True, 0, None)
