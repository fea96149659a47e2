"""brokerDeduplicationEnabled and brokerDeduplicationMaxNumberOfProducers reach a
topic's deduplication through the broker service."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from quasar.broker.service import BrokerService
from quasar.config import ServiceConfiguration
from quasar.protocol.topic_name import TopicName
from quasar.storage import MemoryManagedLedgerFactory, MemoryMetadataStore

Make = Callable[[dict[str, object]], BrokerService]


@pytest.fixture
async def make_service() -> AsyncIterator[Make]:
    made: list[tuple[BrokerService, MemoryManagedLedgerFactory]] = []

    def make(overrides: dict[str, object]) -> BrokerService:
        store = MemoryMetadataStore()
        factory = MemoryManagedLedgerFactory(store)
        config = ServiceConfiguration.load(env={}, overrides=overrides)
        service = BrokerService(config, factory, store)
        service.resources.bootstrap_standalone("standalone")
        made.append((service, factory))
        return service

    yield make
    for service, factory in made:
        await service.close()
        await factory.close()


TOPIC = TopicName.parse("persistent://public/default/dedup")


async def test_deduplication_off_by_default(make_service: Make) -> None:
    topic = await make_service({}).get_topic(TOPIC, create=True)
    assert topic.dedup is None


async def test_max_producers_bounds_the_tracked_names(make_service: Make) -> None:
    service = make_service(
        {"brokerDeduplicationEnabled": True, "brokerDeduplicationMaxNumberOfProducers": 2}
    )
    topic = await service.get_topic(TOPIC, create=True)
    assert topic.dedup is not None
    for name in ("a", "b", "c"):
        topic.dedup.check(name, 5, 5)
    # The third name evicted the least active one: two names are tracked.
    assert len(topic.dedup.pushed) == 2
