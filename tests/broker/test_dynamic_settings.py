"""Each dynamic setting reaches the running broker: the apply callbacks of
``quasar.server.dynamic_settings`` over a real ``BrokerService`` on memory storage.
(The routes, storage and restarts are tested in ``tests/admin``.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest

from quasar.auth import AuthorizationService
from quasar.broker.dispatcher import Dispatcher
from quasar.broker.dynamic_config import DynamicConfiguration
from quasar.broker.service import BrokerService
from quasar.broker.topic import PersistentTopic
from quasar.config import ServiceConfiguration
from quasar.errors import NotAcceptableError, PreconditionFailedError, TopicNotFound
from quasar.protocol import TopicName, make_entry, pb
from quasar.server.dynamic_settings import register_dynamic_settings
from quasar.storage import MemoryManagedLedgerFactory
from quasar.storage.metadata.memory import MemoryMetadataStore

CONFIG = ServiceConfiguration.load(
    env={},
    overrides={
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "superUserRoles": "root",
    },
)


class Broker:
    def __init__(self, service: BrokerService, store: MemoryMetadataStore) -> None:
        self.service = service
        self.authorization = AuthorizationService(CONFIG.authorization, service.resources)
        self.dynamic = DynamicConfiguration(CONFIG, store)
        register_dynamic_settings(self.dynamic, service, self.authorization)

    async def topic(self, name: str) -> PersistentTopic:
        return await self.service.get_topic(
            TopicName.parse(f"persistent://public/default/{name}"), create=True
        )


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    store = MemoryMetadataStore()
    factory = MemoryManagedLedgerFactory(store)
    service = BrokerService(CONFIG, factory, store)
    service.resources.bootstrap_standalone("standalone")
    yield Broker(service, store)
    await service.close()
    await factory.close()


def read_batch(topic: PersistentTopic, permits: int) -> int:
    """What a dispatcher of ``topic`` reads for ``permits``."""
    return Dispatcher.read_batch_entries(SimpleNamespace(topic=topic), permits)  # type: ignore[arg-type]


async def test_without_transactions_only_the_broker_keys_are_dynamic(broker: Broker) -> None:
    assert broker.dynamic.names() == [
        "allowAutoTopicCreation",
        "allowAutoTopicCreationType",
        "defaultNumPartitions",
        "dispatcherMaxReadBatchSize",
        "dispatcherMaxReadSizeBytes",
        "maxNumPartitionsPerPartitionedTopic",
        "superUserRoles",
    ]
    with pytest.raises(PreconditionFailedError, match="non-dynamic"):
        broker.dynamic.update("transactionLogBatchedWriteEnabled", "true")


async def test_dispatcher_read_limits_change_for_every_topic(broker: Broker) -> None:
    topic = await broker.topic("reads")
    assert read_batch(topic, 1000) == 100
    broker.dynamic.update("dispatcherMaxReadBatchSize", "7")
    assert read_batch(topic, 1000) == 7
    assert read_batch(await broker.topic("reads-2"), 1000) == 7
    # Bytes bound the read at the topic's average entry size.
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    entry = make_entry(metadata, b"x" * 990)
    for _ in range(3):
        await topic.ledger.add_entry(entry)
    broker.dynamic.update("dispatcherMaxReadSizeBytes", str(3 * len(entry)))
    assert read_batch(topic, 1000) == 3
    broker.dynamic.delete("dispatcherMaxReadBatchSize")
    broker.dynamic.delete("dispatcherMaxReadSizeBytes")
    assert read_batch(topic, 1000) == 100


async def test_auto_topic_creation_follows_the_change(broker: Broker) -> None:
    await broker.topic("before")
    broker.dynamic.update("allowAutoTopicCreation", "false")
    with pytest.raises(TopicNotFound):
        await broker.topic("after")
    broker.dynamic.update("allowAutoTopicCreation", "true")
    broker.dynamic.update("allowAutoTopicCreationType", "partitioned")
    broker.dynamic.update("defaultNumPartitions", "3")
    name = TopicName.parse("persistent://public/default/auto-partitioned")
    assert broker.service.partitioned_metadata(name) == 3


async def test_partition_bound_follows_the_change(broker: Broker) -> None:
    partitioned = broker.service.resources.partitioned_topics
    partitioned.check_partitions(5)
    broker.dynamic.update("maxNumPartitionsPerPartitionedTopic", "4")
    with pytest.raises(NotAcceptableError):
        partitioned.check_partitions(5)
    # defaultNumPartitions may not exceed the bound, whichever changes.
    with pytest.raises(PreconditionFailedError, match="exceeds"):
        broker.dynamic.update("defaultNumPartitions", "5")


async def test_super_users_follow_the_change(broker: Broker) -> None:
    authorization = broker.authorization
    assert authorization.is_superuser("root") and not authorization.is_superuser("ops")
    broker.dynamic.update("superUserRoles", "root,ops")
    assert authorization.is_superuser("ops")
    broker.dynamic.delete("superUserRoles")
    assert not authorization.is_superuser("ops")

