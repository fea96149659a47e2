"""Per-topic operations on the broker core (in-memory storage): what skip, clear-backlog,
reset-cursor, peek and examine count, and termination's record across unloads."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from quasar.admin import create_admin_app
from quasar.broker.admin_adapter import AdminAdapter
from quasar.broker.service import BrokerService
from quasar.config import ServiceConfiguration
from quasar.errors import (
    PreconditionFailedError,
    ResourceNotFoundError,
    SubscriptionNotFound,
    TopicTerminatedError,
)
from quasar.protocol import TopicName, make_entry, pb
from quasar.storage import MemoryManagedLedgerFactory
from quasar.storage.api import Position
from quasar.storage.metadata.memory import MemoryMetadataStore

TOPIC = "persistent://public/default/ops"


@pytest.fixture
async def service() -> AsyncIterator[BrokerService]:
    config = ServiceConfiguration.load(env={}, overrides={})
    store = MemoryMetadataStore()
    svc = BrokerService(config, MemoryManagedLedgerFactory(store), store)
    svc.resources.bootstrap_standalone("standalone")
    yield svc
    await svc.close()


@pytest.fixture
def adapter(service: BrokerService) -> AdminAdapter:
    return AdminAdapter(service)


async def publish(service: BrokerService, n: int, **properties: str) -> list[Position]:
    topic = await service.get_topic(TopicName.parse(TOPIC), create=True)
    positions = []
    for i in range(n):
        meta = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1000 + i)
        for key, value in properties.items():
            meta.properties.add(key=key, value=value)
        positions.append(await topic.ledger.add_entry(make_entry(meta, f"m-{i}".encode())))
    return positions


async def test_skip_counts_unacknowledged_entries_only(
    service: BrokerService, adapter: AdminAdapter
) -> None:
    await service.create_topic(TopicName.parse(TOPIC))
    await adapter.create_subscription(TOPIC, "s", "earliest")
    positions = await publish(service, 6)
    topic = service.topics[TOPIC]
    sub = topic.subscriptions["s"]
    sub.cursor.delete([positions[1]])  # acknowledged out of order: not counted
    assert await adapter.skip_messages(TOPIC, "s", 2) == 2
    assert sub.cursor.mark_delete_position == positions[2]
    assert (await adapter.peek_message(TOPIC, "s", 1)).payload == b"m-3"
    assert await adapter.skip_messages(TOPIC, "s", 100) == 3
    assert sub.backlog() == 0
    with pytest.raises(ResourceNotFoundError):
        await adapter.peek_message(TOPIC, "s", 1)
    with pytest.raises(SubscriptionNotFound):
        await adapter.skip_messages(TOPIC, "nope", 1)


async def test_reset_positions_and_their_refusals(
    service: BrokerService, adapter: AdminAdapter
) -> None:
    await service.create_topic(TopicName.parse(TOPIC))
    await adapter.create_subscription(TOPIC, "s", "latest")
    positions = await publish(service, 4)
    sub = service.topics[TOPIC].subscriptions["s"]
    await adapter.reset_cursor_to_position(TOPIC, "s", str(positions[2]), excluded=False)
    assert sub.backlog() == 2
    await adapter.reset_cursor_to_position(TOPIC, "s", str(positions[2]), excluded=True)
    assert sub.backlog() == 1
    await adapter.reset_cursor_to_position(TOPIC, "s", "earliest", excluded=False)
    assert sub.backlog() == 4
    await adapter.reset_cursor_to_position(TOPIC, "s", "latest", excluded=False)
    assert sub.backlog() == 0
    last = positions[-1]
    for bad in (Position(last.ledger_id, last.entry_id + 2), Position(last.ledger_id + 9, 0)):
        with pytest.raises(PreconditionFailedError, match="Unable to find position"):
            await adapter.reset_cursor_to_position(TOPIC, "s", str(bad), excluded=False)
    await adapter.reset_cursor_to_time(TOPIC, "s", 1002)
    assert sub.backlog() == 2


async def test_examine_and_get_by_id(service: BrokerService, adapter: AdminAdapter) -> None:
    await service.create_topic(TopicName.parse(TOPIC))
    with pytest.raises(PreconditionFailedError):
        await adapter.examine_message(TOPIC, "latest", 1)
    positions = await publish(service, 3, k="v")
    assert (await adapter.examine_message(TOPIC, "earliest", 1)).payload == b"m-0"
    assert (await adapter.examine_message(TOPIC, "latest", 2)).payload == b"m-1"
    assert (await adapter.examine_message(TOPIC, "latest", 99)).payload == b"m-0"
    message = await adapter.get_message_by_id(TOPIC, *positions[2])
    assert message.payload == b"m-2"
    assert message.headers["X-Pulsar-Message-ID"] == str(positions[2])
    assert message.headers["X-Pulsar-PROPERTY-k"] == "v"
    assert message.headers["X-Pulsar-publish-time"] == "1970-01-01T00:00:01.002Z"
    with pytest.raises(ResourceNotFoundError):
        await adapter.get_message_by_id(TOPIC, positions[2].ledger_id, 99)


async def test_termination_survives_an_unload_and_goes_with_the_topic(
    service: BrokerService, adapter: AdminAdapter
) -> None:
    name = TopicName.parse(TOPIC)
    await service.create_topic(name)
    positions = await publish(service, 2)
    answer = await adapter.terminate_topic(TOPIC)
    assert (answer["ledgerId"], answer["entryId"]) == positions[-1]
    assert await adapter.terminate_topic(TOPIC) == answer
    await adapter.unload_topic(TOPIC)
    assert TOPIC not in service.topics
    topic = await service.get_topic(name, create=False)
    assert topic.terminated
    failures: list[BaseException | None] = []
    topic.publish(
        None,  # type: ignore[arg-type]  # refused before the producer is looked at
        0, 0, 1, b"", lambda pos, exc: failures.append(exc),
    )
    assert isinstance(failures[0], TopicTerminatedError)
    await adapter.delete_topic(TOPIC, force=True)
    await service.create_topic(name)
    assert not service.topics[TOPIC].terminated


async def test_hostile_properties_become_valid_headers(
    service: BrokerService, adapter: AdminAdapter
) -> None:
    """Property keys and values are the client's text: the answer's headers stay valid
    HTTP whatever they hold, and ``X-Pulsar-Property`` keeps them exactly."""
    await service.create_topic(TopicName.parse(TOPIC))
    topic = service.topics[TOPIC]
    meta = pb.MessageMetadata(producer_name="p\r\nX-Evil: 1", sequence_id=0, publish_time=1)
    hostile = {"a b:c": "v", "ключ": "é\x00", "": "empty", "k\r\nX-Evil": "1\r\n2"}
    for key, value in hostile.items():
        meta.properties.add(key=key, value=value)
    position = await topic.ledger.add_entry(make_entry(meta, b"hello"))
    path = (
        "/admin/v2/persistent/public/default/ops"
        f"/ledger/{position.ledger_id}/entry/{position.entry_id}"
    )
    async with TestClient(TestServer(create_admin_app(adapter))) as client:
        resp = await client.get(path)
        assert resp.status == 200
        assert await resp.read() == b"hello"
        assert json.loads(resp.headers["X-Pulsar-Property"]) == hostile
        assert resp.headers["X-Pulsar-PROPERTY-a%20b%3Ac"] == "v"
        assert "X-Evil" not in resp.headers
