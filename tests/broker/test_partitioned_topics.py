"""Partitioned topics on the broker service: partitions are created on first use,
listed from the topic's count, and deleted whether or not they were used; counts
recorded before the bound existed can still be deleted and do not auto-create."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from quasar.admin import create_admin_app
from quasar.broker.admin_adapter import AdminAdapter
from quasar.broker.service import BrokerService
from quasar.config import ServiceConfiguration
from quasar.errors import NotAllowedError
from quasar.protocol import TopicName
from quasar.resources.models import AutoTopicCreationOverride, Policies
from quasar.resources.partitions import JAVA_INT_MAX
from quasar.resources.store import PartitionedTopicResources
from quasar.storage import MemoryManagedLedgerFactory
from quasar.storage.metadata.memory import MemoryMetadataStore

NS = "/admin/v2/persistent/public/default"
FULL = "persistent://public/default/orders"
BOUND = 50


def service(**overrides: Any) -> BrokerService:
    config = ServiceConfiguration.load(
        env={}, overrides={"maxNumPartitionsPerPartitionedTopic": BOUND, **overrides}
    )
    store = MemoryMetadataStore()
    svc = BrokerService(config, MemoryManagedLedgerFactory(store), store)
    svc.resources.bootstrap_standalone("standalone")
    return svc


@pytest.fixture
async def broker() -> AsyncIterator[BrokerService]:
    svc = service(allowAutoTopicCreation=False)
    yield svc
    await svc.close()


@pytest.fixture
async def admin(broker: BrokerService) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(create_admin_app(AdminAdapter(broker)))) as c:
        yield c


def partition(i: int) -> TopicName:
    return TopicName.parse(FULL).partition(i)


async def test_creating_records_metadata_only_and_partitions_appear_on_use(
    broker: BrokerService, admin: TestClient[Any, Any]
) -> None:
    assert (await admin.put(NS + "/orders/partitions", json=BOUND)).status == 204
    assert broker.registered_topics("public/default") == []
    assert broker.ledgers.list_names() == []
    every = sorted(f"{FULL}-partition-{i}" for i in range(BOUND))
    # Listed before any of them is used, by the admin API and GET_TOPICS.
    assert await (await admin.get(NS)).json() == every
    assert broker.list_topics("public/default") == every
    # A client's producer creates its partition, auto-creation off or not.
    await broker.get_topic(partition(3), create=True)
    assert broker.registered_topics("public/default") == [partition(3).full]
    # Beyond the count it is an unknown topic like any other.
    with pytest.raises(Exception, match="does not exist"):
        await broker.get_topic(partition(BOUND), create=True)
    # An admin request on an unused partition creates it, as Pulsar's would find it.
    resp = await admin.get(NS + "/orders-partition-9/stats")
    assert resp.status == 200
    assert broker.topic_exists(partition(9))
    # Reading requests on the partitioned topic create nothing.
    assert await (await admin.get(NS + "/orders/subscriptions")).json() == []
    assert (await admin.get(NS + "/orders/partitioned-stats")).status == 200
    assert broker.registered_topics("public/default") == [partition(3).full, partition(9).full]


async def test_growing_records_the_count_only(
    broker: BrokerService, admin: TestClient[Any, Any]
) -> None:
    await admin.put(NS + "/orders/partitions", json=2)
    assert (await admin.post(NS + "/orders/partitions", json=BOUND)).status == 204
    assert broker.partitions_of(TopicName.parse(FULL)) == BOUND
    assert broker.registered_topics("public/default") == []
    resp = await admin.post(NS + "/orders/partitions", json=BOUND + 1)
    assert resp.status == 406


@pytest.mark.parametrize("used", [[], [0], [0, 7, BOUND - 1]])
async def test_deleting_deletes_the_used_partitions_and_never_404s_on_unused_ones(
    broker: BrokerService, admin: TestClient[Any, Any], used: list[int]
) -> None:
    await admin.put(NS + "/orders/partitions", json=BOUND)
    for i in used:
        topic = await broker.get_topic(partition(i), create=True)
        if i > 0:  # as after a restart: used, but not loaded
            await topic.close()
            broker.topics.pop(partition(i).full)
    assert (await admin.delete(NS + "/orders/partitions")).status == 204
    assert broker.partitions_of(TopicName.parse(FULL)) == 0
    assert broker.registered_topics("public/default") == []
    assert broker.ledgers.list_names() == []
    assert await (await admin.get(NS)).json() == []


async def test_a_registered_partition_without_a_ledger_is_deleted(
    broker: BrokerService, admin: TestClient[Any, Any]
) -> None:
    # What eager registration left behind: partitions in the registry, no ledgers.
    await admin.put(NS + "/orders/partitions", json=3)
    for i in range(3):
        broker.register_topic(partition(i))
    assert (await admin.delete(NS + "/orders/partitions")).status == 204
    assert broker.registered_topics("public/default") == []


async def test_a_count_recorded_before_the_bound_can_be_deleted(
    broker: BrokerService, admin: TestClient[Any, Any]
) -> None:
    # Written straight into the store, as an older broker without the bound did.
    broker.store.put(
        PartitionedTopicResources.path(FULL), json.dumps({"partitions": JAVA_INT_MAX}).encode()
    )
    broker.register_topic(partition(5))
    broker.register_topic(partition(2_000_000_000))
    broker.register_topic(TopicName.parse("persistent://public/default/orders-x-partition-1"))
    # Listings name only its partitions in use: two billion names are not an answer.
    in_use = sorted(
        [partition(5).full, partition(2_000_000_000).full, f"{FULL}-x-partition-1"]
    )
    assert broker.list_topics("public/default") == in_use
    assert await (await admin.get(NS)).json() == in_use
    assert (await admin.delete(NS + "/orders/partitions")).status == 204
    assert broker.registered_topics("public/default") == [
        "persistent://public/default/orders-x-partition-1"
    ]


async def test_auto_creation_beyond_the_bound_is_refused() -> None:
    svc = service(allowAutoTopicCreationType="partitioned", defaultNumPartitions=4)
    try:
        assert svc.partitioned_metadata(TopicName.parse(FULL)) == 4
        assert svc.registered_topics("public/default") == []
        # An override stored before the bound was lowered.
        override = AutoTopicCreationOverride(True, "partitioned", BOUND + 1)
        svc.resources.namespaces.update(
            "public/default", lambda p: Policies(auto_topic_creation_override=override)
        )
        with pytest.raises(NotAllowedError, match=f"less than or equal to {BOUND}"):
            svc.partitioned_metadata(TopicName.parse(FULL + "-2"))
        assert svc.partitions_of(TopicName.parse(FULL + "-2")) == 0
    finally:
        await svc.close()
