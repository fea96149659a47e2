"""The topic collector and the stats updater over an in-process broker service
(memory storage, a manual clock): exact rates, namespace sums, many topics."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from quasar.broker.metrics_topics import TopicMetricsCollector
from quasar.broker.producer import Producer
from quasar.broker.service import BrokerService
from quasar.broker.stats_updater import StatsUpdater
from quasar.broker.topic import PersistentTopic
from quasar.clock import ManualClock
from quasar.config import MetricsConfig, ServiceConfiguration
from quasar.protocol import TopicName, make_entry, pb
from quasar.storage import MemoryManagedLedgerFactory
from quasar.storage.api import InitialPosition, Position, resolve_append
from quasar.storage.metadata.memory import MemoryMetadataStore

Samples = dict[str, list[tuple[dict[str, str], float]]]


class _Connection:
    remote_address = "127.0.0.1:1"
    client_version = "test"

    def write(self, frame: bytes) -> None:
        pass

    def close_producer(self, producer_id: int) -> None:
        pass


@pytest.fixture
async def service() -> AsyncIterator[BrokerService]:
    store = MemoryMetadataStore()
    clock = ManualClock()
    factory = MemoryManagedLedgerFactory(store, clock=clock)
    svc = BrokerService(ServiceConfiguration(), factory, store)
    svc.clock = clock
    svc.resources.bootstrap_standalone("standalone")
    svc.resources.namespaces.create("public/other")
    yield svc
    await svc.close()
    await factory.close()


async def _topic(service: BrokerService, name: str) -> PersistentTopic:
    return await service.get_topic(TopicName.parse(name), create=True)


async def _publish(topic: PersistentTopic, count: int, size: int) -> int:
    """Publish ``count`` entries of ``size`` payload bytes; returns the entry size."""
    producer = Producer(producer_id=7, producer_name="p", connection=_Connection())
    await topic.add_producer(producer)
    loop = asyncio.get_running_loop()
    done: list[asyncio.Future[Position]] = [loop.create_future() for _ in range(count)]
    entry = b""
    for seq in range(count):
        md = pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1)
        entry = make_entry(md, b"x" * size)
        topic.publish(producer, seq, seq, 1, entry, functools.partial(resolve_append, done[seq]))
    await asyncio.gather(*done)
    return len(entry)


def _scrape(service: BrokerService, **settings: bool) -> Samples:
    registry = CollectorRegistry()
    registry.register(TopicMetricsCollector(
        lambda: service.topics.values(), "standalone", MetricsConfig(**settings)
    ))
    out: Samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _one(samples: Samples, name: str, **labels: str) -> float:
    found = [v for lab, v in samples[name] if lab == labels]
    assert len(found) == 1, (name, labels, samples[name])
    return found[0]


async def test_exact_rates_over_a_period(service: BrokerService) -> None:
    clock = service.clock
    assert isinstance(clock, ManualClock)
    updater = StatsUpdater(lambda: service.topics.values(), 60, clock)
    name = "persistent://public/default/rates"
    topic = await _topic(service, name)
    topic.add_durable_subscription(
        "sub", topic.ledger.open_cursor("sub", InitialPosition.EARLIEST)
    )
    entry_size = await _publish(topic, 10, 100)
    clock.advance(2000)
    updater.update()
    s = _scrape(service)
    t = {"cluster": "standalone", "namespace": "public/default", "topic": name}
    assert _one(s, "pulsar_rate_in", **t) == 5.0
    assert _one(s, "pulsar_throughput_in", **t) == 5.0 * entry_size
    assert _one(s, "pulsar_average_msg_size", **t) == entry_size
    assert _one(s, "pulsar_storage_write_rate", **t) == 5.0
    assert _one(s, "pulsar_in_messages_total", **t) == 10
    assert _one(s, "pulsar_msg_backlog", **t) == 10
    assert _one(s, "pulsar_storage_backlog_size", **t) == 10 * entry_size
    # The manual clock does not move during an append: every latency is 0 ms.
    assert _one(s, "pulsar_storage_write_latency_le_0_5", **t) == 10
    assert _one(s, "pulsar_storage_write_latency_count", **t) == 10
    assert 100 < entry_size <= 128  # 100 bytes and their metadata
    assert _one(s, "pulsar_entry_size_le_128", **t) == 10
    assert _one(s, "pulsar_entry_size_le_512", **t) == 0  # buckets do not accumulate
    assert _one(s, "pulsar_subscription_back_log", **t, subscription="sub") == 10
    stats = topic.stats()
    assert stats["msgRateIn"] == 5.0
    assert stats["publishers"][0]["msgRateIn"] == 5.0  # type: ignore[index]
    # The next period is idle: rates fall to 0, the buckets empty, counters stay.
    clock.advance(2000)
    updater.update()
    s = _scrape(service)
    assert _one(s, "pulsar_rate_in", **t) == 0.0
    assert _one(s, "pulsar_storage_write_latency_count", **t) == 0
    assert _one(s, "pulsar_in_messages_total", **t) == 10
    assert updater.updates == 2


async def test_namespace_sums_without_topic_labels(service: BrokerService) -> None:
    for name, count in (("public/default/a", 3), ("public/default/b", 4),
                        ("public/other/c", 5)):
        await _publish(await _topic(service, f"persistent://{name}"), count, 10)
    s = _scrape(service, expose_topic_level_metrics_in_prometheus=False)
    default = {"cluster": "standalone", "namespace": "public/default"}
    other = {"cluster": "standalone", "namespace": "public/other"}
    assert _one(s, "pulsar_in_messages_total", **default) == 7
    assert _one(s, "pulsar_in_messages_total", **other) == 5
    assert _one(s, "pulsar_topics_count", **default) == 2
    assert _one(s, "pulsar_producers_count", **default) == 2
    assert _one(s, "pulsar_broker_topics_count", cluster="standalone") == 3
    assert _one(s, "pulsar_broker_producers_count", cluster="standalone") == 3
    assert all("topic" not in lab for series in s.values() for lab, _ in series)


async def test_many_topics_in_one_pass(service: BrokerService) -> None:
    count = 1000
    for i in range(count):
        await _topic(service, f"persistent://public/default/many-{i}")
    updater = StatsUpdater(lambda: service.topics.values(), 60, service.clock)
    updater.update()
    s = _scrape(service)
    assert len(s["pulsar_in_messages_total"]) == count
    assert _one(s, "pulsar_topics_count", cluster="standalone",
                namespace="public/default") == count
