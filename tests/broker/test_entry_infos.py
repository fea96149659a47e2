"""The broker's cache of parsed entry metadata (``EntryInfoCache``): its size follows
the entry cache, every topic shares it, and a consumer that falls far behind but still
reads cached entries gets them without the broker parsing their metadata again."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

import pytest

from quasar.broker import dispatcher as dispatcher_mod
from quasar.broker.consumer import Consumer
from quasar.broker.entry_info import (
    RECENT_INFOS_MIN,
    EntryInfo,
    EntryInfoCache,
    entry_info,
    info_capacity,
)
from quasar.broker.producer import Producer
from quasar.broker.service import BrokerService
from quasar.broker.subscription import SUB_EXCLUSIVE
from quasar.broker.topic import PersistentTopic
from quasar.config import ServiceConfiguration
from quasar.protocol import FrameDecoder, TopicName, make_entry, pb
from quasar.storage import MemoryManagedLedgerFactory
from quasar.storage.api import InitialPosition, Position, resolve_append
from quasar.storage.metadata.memory import MemoryMetadataStore


def _info(seq: int) -> EntryInfo:
    return EntryInfo(1, False, None, 0, 0, None, None, "p", seq)


def test_capacity_follows_the_entry_cache_with_a_floor() -> None:
    assert info_capacity(64 * 1024 * 1024) == 65_536
    assert info_capacity(256 * 1024 * 1024) == 262_144
    assert info_capacity(0) == RECENT_INFOS_MIN


def test_standalone_sizes_the_cache_from_managed_ledger_cache_size_mb() -> None:
    config = ServiceConfiguration.load(
        env={}, overrides={"managedLedgerCacheSizeMB": 128}
    )
    service = BrokerService(config, MemoryManagedLedgerFactory(), MemoryMetadataStore())
    # 131,072 infos fit (one per KiB of entry cache); one more evicts the oldest.
    for entry in range(131_073):
        service.entry_infos.put(Position(7, entry), _info(entry))
    assert service.entry_infos.get(Position(7, 0)) is None
    assert service.entry_infos.get(Position(7, 1)) == _info(1)


def test_oldest_infos_are_evicted_first() -> None:
    cache = EntryInfoCache(3)
    for entry in range(5):
        cache.put(Position(7, entry), _info(entry))
    assert [cache.get(Position(7, e)) for e in range(5)] == [
        None, None, _info(2), _info(3), _info(4)
    ]
    assert cache.get(Position(-1, -1)) is None


# --------------------------------------------------------------------------------------
# Through a broker service on in-memory storage.


class _Connection:
    """A connection that counts the MESSAGE frames it is sent."""

    remote_address = "127.0.0.1:1"
    client_version = "test"

    def __init__(self) -> None:
        self._decoder = FrameDecoder(64 * 1024 * 1024)
        self.received = 0
        self.changed = asyncio.Event()

    def write(self, frame: bytes) -> None:
        for f in self._decoder.feed(frame):
            if f.type == pb.BaseCommand.MESSAGE:
                self.received += 1
        self.changed.set()

    def close_consumer(self, consumer_id: int) -> None:
        pass

    def close_producer(self, producer_id: int) -> None:
        pass

    async def wait_for(self, n: int) -> None:
        while self.received < n:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)


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


def _message(seq: int) -> bytes:
    md = pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1)
    return make_entry(md, b"x" * 100)


async def _publish(topic: PersistentTopic, count: int) -> None:
    producer = Producer(producer_id=1, producer_name="p", connection=_Connection())
    await topic.add_producer(producer)
    loop = asyncio.get_running_loop()
    done: list[asyncio.Future[Position]] = [loop.create_future() for _ in range(count)]
    for seq in range(count):
        topic.publish(
            producer, seq, seq, 1, _message(seq), functools.partial(resolve_append, done[seq])
        )
    await asyncio.gather(*done)


async def test_topics_share_the_service_cache(service: BrokerService) -> None:
    a = await _topic(service, "infos-a")
    b = await _topic(service, "infos-b")
    assert a.recent_infos is service.entry_infos is b.recent_infos
    await _publish(a, 2)
    await _publish(b, 2)
    # Both topics' entries are there, apart: ledger ids are unique across topics.
    for topic in (a, b):
        ledger = topic.ledger.last_confirmed_entry.ledger_id
        assert [service.entry_infos.get(Position(ledger, e)) for e in (0, 1)] == [
            entry_info(_message(s)) for s in (0, 1)
        ]


async def test_a_backlog_beyond_the_old_per_topic_bound_is_dispatched_without_parsing(
    service: BrokerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer 10,000 entries behind (the old bound was 4,096 per topic) gets every
    entry from the cache without the dispatcher parsing any metadata."""
    backlog = 10_000
    assert service.entry_infos._max >= backlog
    topic = await _topic(service, "infos-backlog")
    conn = _Connection()
    consumer = Consumer(
        consumer_id=1, consumer_name="c", subscription_name="s",
        sub_type=SUB_EXCLUSIVE, connection=conn,
    )
    sub = topic.subscribe(consumer, True, InitialPosition.EARLIEST, None)
    await _publish(topic, backlog)

    parsed: list[bytes] = []

    def counting_entry_info(data: bytes) -> EntryInfo:
        parsed.append(data)
        return entry_info(data)

    monkeypatch.setattr(dispatcher_mod, "entry_info", counting_entry_info)
    sub.flow(consumer, backlog)
    await conn.wait_for(backlog)
    assert parsed == []
