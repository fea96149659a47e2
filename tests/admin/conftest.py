"""Fixtures for the admin API and resources tests: metadata stores and a fake broker.

The resources tests run against every metadata-store implementation (a tiny dict
fake, plus the in-memory and SQLite stores when importable), so they double as a
check that the resources use only what the ``MetadataStore`` protocol promises.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from quasar.admin import create_admin_app
from quasar.admin.topic_ops_api import Message
from quasar.broker.dynamic_config import DynamicConfiguration
from quasar.broker.health_check import HealthChecker
from quasar.broker.lookup_data import LookupData
from quasar.broker.operations import BrokerOperations
from quasar.broker.schema import SchemaRegistry
from quasar.broker.schema_admin import SchemaAdmin
from quasar.config import ServiceConfiguration
from quasar.errors import (
    AlreadyExistsError,
    BadVersion,
    ConflictError,
    NotFound,
    PreconditionFailedError,
    ResourceNotFoundError,
    ServiceNotReady,
    SubscriptionNotFound,
    TopicNotFound,
)
from quasar.protocol.namespace_name import parse_topic
from quasar.resources.store import PulsarResources
from quasar.storage.api import MetadataStore, Versioned
from quasar.storage.memory import MemoryManagedLedgerFactory, MemoryMetadataStore


class FakeMetadataStore:
    """The smallest store with the protocol's semantics (children derived from keys)."""

    def __init__(self) -> None:
        self.data: dict[str, Versioned] = {}

    def get(self, path: str) -> Versioned | None:
        return self.data.get(path)

    def put(self, path: str, value: bytes, expected_version: int | None = None) -> int:
        current = self.data.get(path)
        if expected_version == -1 and current is not None:
            raise BadVersion(path)
        if expected_version is not None and expected_version >= 0:
            if current is None or current.version != expected_version:
                raise BadVersion(path)
        version = 0 if current is None else current.version + 1
        self.data[path] = Versioned(value, version)
        return version

    def delete(self, path: str, expected_version: int | None = None) -> None:
        current = self.data.get(path)
        if current is None:
            raise NotFound(path)
        if expected_version is not None and current.version != expected_version:
            raise BadVersion(path)
        del self.data[path]

    def delete_recursive(self, path: str) -> None:
        for key in [k for k in self.data if k == path or k.startswith(path + "/")]:
            del self.data[key]

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(
            {k[len(prefix) :].split("/")[0] for k in self.data if k.startswith(prefix)}
        )

    def close(self) -> None:
        pass


def _memory_store() -> MetadataStore:
    memory = pytest.importorskip("quasar.storage.metadata.memory")
    return memory.MemoryMetadataStore()  # type: ignore[no-any-return]


@pytest.fixture(params=["fake", "memory", "sqlite", "zookeeper"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetadataStore]:
    """Every metadata-store implementation available (ZooKeeper: a real server)."""
    made: MetadataStore
    if request.param == "fake":
        made = FakeMetadataStore()
    elif request.param == "memory":
        made = _memory_store()
    elif request.param == "zookeeper":
        zookeeper = pytest.importorskip("quasar.storage.metadata.zookeeper")
        made = zookeeper.ZooKeeperMetadataStore(
            request.getfixturevalue("zk_url"), operation_timeout_s=10
        )
    else:
        sqlite = pytest.importorskip("quasar.storage.metadata.sqlite")
        made = sqlite.SqliteMetadataStore(tmp_path / "metadata.db")
    yield made
    made.close()


@pytest.fixture
def resources(store: MetadataStore) -> PulsarResources:
    return PulsarResources(store)


class FakePolicyOperations:
    """Records the namespace operations and expiries the admin layer asks for."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def expire_messages(self, topic: str, subscription: str | None, age_s: int) -> None:
        self.calls.append(("expire", topic, subscription, age_s))

    async def expire_messages_to(
        self, topic: str, subscription: str, ledger_id: int, entry_id: int, excluded: bool
    ) -> None:
        self.calls.append(("expire_to", topic, subscription, ledger_id, entry_id, excluded))

    async def unload_namespace(self, namespace: str) -> None:
        self.calls.append(("unload", namespace))

    async def clear_namespace_backlog(self, namespace: str, subscription: str | None) -> None:
        self.calls.append(("clear_backlog", namespace, subscription))

    async def unsubscribe_namespace(self, namespace: str, subscription: str) -> None:
        self.calls.append(("unsubscribe", namespace, subscription))


class DisabledTransactionAdmin:
    """``/admin/v3/transactions`` of a broker with transactions disabled: 503, as the
    broker answers with ``transactionCoordinatorEnabled=false``."""

    def check_enabled(self) -> None:
        raise ServiceNotReady("Transactions are not enabled on this broker")


class FakeNonPersistentAdmin:
    """``/admin/v2/non-persistent`` of a broker with no non-persistent topic loaded:
    only partitioned topics' counts exist."""

    def __init__(self, resources: PulsarResources) -> None:
        self._resources = resources

    def check_enabled(self) -> None:
        pass

    def list_topics(self, namespace: str) -> list[str]:
        return []

    def list_partitioned_topics(self, namespace: str) -> list[str]:
        return self._resources.partitioned_topics.list(namespace, "non-persistent")

    def topic_stats(self, topic: str) -> dict[str, Any]:
        raise TopicNotFound(f"Topic {topic} not found")

    def partitioned_stats(self, topic: str) -> dict[str, Any]:
        return {"msgInCounter": 0, "partitions": {}}

    async def delete_topic(self, topic: str, force: bool) -> None:
        raise TopicNotFound(f"Topic {topic} not found")

    async def delete_partitioned_topic(self, topic: str, force: bool) -> None:
        self._resources.partitioned_topics.delete(topic)


class FakeAdminBroker:
    """An ``AdminBroker`` and ``TopicOpsBroker`` over dicts: topics, their
    subscriptions and messages, connected topics; transactions disabled.

    Partitions of partitioned topics are created lazily (on first subscription), as
    the real broker may do, so the admin layer's handling of that is exercised.
    A topic's messages (``publish``) sit in ledger 0 at entry ids 0, 1, ...; a
    subscription's position is the entry id of its next unacknowledged message.
    """

    def __init__(self, resources: PulsarResources, cluster_name: str = "standalone"):
        self.resources = resources
        self.cluster_name = cluster_name
        self.topics: dict[str, dict[str, str]] = {}  # topic -> {subscription: position}
        self.connected: set[str] = set()  # topics with producers/consumers attached
        self.fail_with: BaseException | None = None  # raised by every stats call
        # topic -> compaction status; a topic listed in `compacting` stays RUNNING.
        self.compaction: dict[str, str] = {}
        self.compacting: set[str] = set()
        self.policy_operations = FakePolicyOperations()
        self.messages: dict[str, list[Message]] = {}  # topic -> messages, by entry id
        self.terminated: set[str] = set()
        self.unloaded: list[str] = []
        self.transaction_admin = DisabledTransactionAdmin()
        # The real registry over a store of its own: schemas need no live topic.
        self.schemas = SchemaAdmin(
            SchemaRegistry(MemoryMetadataStore()), lambda topic: topic.split("://", 1)[1]
        )
        self.non_persistent_admin = FakeNonPersistentAdmin(resources)

    def lookup_topic(self, topic: str, listener_name: str) -> dict[str, str | None]:
        if listener_name:
            raise ResourceNotFoundError(f"the broker do not have {listener_name} listener")
        return LookupData(
            "pulsar://127.0.0.1:6650", None, "http://127.0.0.1:8080", None
        ).to_json()

    def auto_create_partitioned(self, topic: str) -> None:
        pass  # the fake namespaces auto-create non-partitioned topics only

    def _topic(self, topic: str) -> dict[str, str]:
        if topic not in self.topics:
            raise TopicNotFound("Topic not found")
        return self.topics[topic]

    async def create_non_partitioned_topic(self, topic: str) -> None:
        if topic in self.topics:
            raise AlreadyExistsError("This topic already exists")
        self.topics[topic] = {}

    async def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        self.resources.partitioned_topics.create(topic, partitions)

    async def update_partitioned_topic(self, topic: str, partitions: int) -> None:
        self.resources.partitioned_topics.update(topic, partitions)

    async def delete_topic(self, topic: str, force: bool) -> None:
        self._topic(topic)
        if topic in self.connected and not force:
            raise PreconditionFailedError("Topic has active producers/subscriptions")
        self.connected.discard(topic)
        del self.topics[topic]

    async def delete_partitioned_topic(self, topic: str, force: bool) -> None:
        metadata = self.resources.partitioned_topics.get(topic)
        if metadata is None:
            raise ResourceNotFoundError("Partitioned topic does not exist")
        for i in range(metadata.partitions):
            self.topics.pop(f"{topic}-partition-{i}", None)
        self.resources.partitioned_topics.delete(topic)

    def list_topics(self, namespace: str) -> list[str]:
        return [t for t in self.topics if parse_topic(t).namespace_name == namespace]

    def topic_exists(self, topic: str) -> bool:
        return topic in self.topics

    async def topic_stats(self, topic: str) -> dict[str, Any]:
        if self.fail_with is not None:
            raise self.fail_with
        subs = self._topic(topic)
        return {
            "msgRateIn": 0.0,
            "msgInCounter": 0,
            "storageSize": 0,
            "publishers": [],
            "subscriptions": {name: {"msgBacklog": 0} for name in subs},
        }

    async def topic_internal_stats(self, topic: str) -> dict[str, Any]:
        subs = self._topic(topic)
        return {
            "entriesAddedCounter": 0,
            "numberOfEntries": 0,
            "ledgers": [],
            "cursors": {
                name: {"markDeletePosition": pos} for name, pos in subs.items()
            },
        }

    async def partitioned_stats(self, topic: str) -> dict[str, Any]:
        metadata = self.resources.partitioned_topics.get(topic)
        assert metadata is not None
        partitions = [f"{topic}-partition-{i}" for i in range(metadata.partitions)]
        return {
            "msgRateIn": 0.0,
            "metadata": {"partitions": metadata.partitions},
            "partitions": {p: {"msgRateIn": 0.0} for p in partitions},
        }

    async def list_subscriptions(self, topic: str) -> list[str]:
        return list(self._topic(topic))

    async def create_subscription(
        self, topic: str, subscription: str, message_id: str
    ) -> None:
        parts = parse_topic(topic)
        if topic not in self.topics and self.resources.partitioned_topics.exists(
            parts.base.full
        ):
            self.topics[topic] = {}
        subs = self._topic(topic)
        if subscription in subs:
            raise AlreadyExistsError("Subscription already exists for topic")
        subs[subscription] = message_id

    async def delete_subscription(
        self, topic: str, subscription: str, force: bool
    ) -> None:
        subs = self._topic(topic)
        if subscription not in subs:
            raise SubscriptionNotFound("Subscription not found")
        del subs[subscription]

    async def trigger_compaction(self, topic: str) -> None:
        self._topic(topic)
        if self.compaction.get(topic) == "RUNNING":
            raise ConflictError("Compaction already in progress")
        self.compaction[topic] = "RUNNING" if topic in self.compacting else "SUCCESS"

    async def compaction_status(self, topic: str) -> dict[str, str]:
        self._topic(topic)
        return {"status": self.compaction.get(topic, "NOT_RUN"), "lastError": ""}

    # -- TopicOpsBroker ---------------------------------------------------------------

    def publish(self, topic: str, payload: bytes, publish_time_ms: int = 0) -> None:
        """Store a message on ``topic`` (created if needed), as a producer would."""
        self.topics.setdefault(topic, {})
        entries = self.messages.setdefault(topic, [])
        headers = {
            "X-Pulsar-Message-ID": f"0:{len(entries)}",
            "X-Pulsar-publish-time": str(publish_time_ms),
        }
        entries.append(Message(headers, payload))

    def _entries(self, topic: str) -> list[Message]:
        self._topic(topic)
        return self.messages.get(topic, [])

    def _next_unacked(self, topic: str, subscription: str) -> int:
        subs = self._topic(topic)
        if subscription not in subs:
            raise SubscriptionNotFound("Subscription not found")
        position = subs[subscription]
        count = len(self.messages.get(topic, []))
        if position == "earliest":
            return 0
        if position == "latest":
            return count
        return min(int(position.split(":")[1]), count)

    def _move(self, topic: str, subscription: str, entry_id: int) -> None:
        self._topic(topic)[subscription] = f"0:{entry_id}"

    async def skip_messages(self, topic: str, subscription: str, count: int) -> int:
        start = self._next_unacked(topic, subscription)
        end = min(start + count, len(self.messages.get(topic, [])))
        self._move(topic, subscription, end)
        return end - start

    async def clear_backlog(self, topic: str, subscription: str) -> None:
        self._next_unacked(topic, subscription)
        self._move(topic, subscription, len(self.messages.get(topic, [])))

    async def reset_cursor_to_time(
        self, topic: str, subscription: str, timestamp_ms: int
    ) -> None:
        self._next_unacked(topic, subscription)
        entries = self.messages.get(topic, [])
        times = [int(m.headers["X-Pulsar-publish-time"]) for m in entries]
        first = next((i for i, t in enumerate(times) if t >= timestamp_ms), len(times))
        self._move(topic, subscription, first)

    async def reset_cursor_to_position(
        self, topic: str, subscription: str, message_id: str, excluded: bool
    ) -> None:
        self._next_unacked(topic, subscription)
        count = len(self.messages.get(topic, []))
        if message_id in ("earliest", "latest"):
            self._move(topic, subscription, 0 if message_id == "earliest" else count)
            return
        ledger_id, entry_id = (int(part) for part in message_id.split(":"))
        if ledger_id != 0 or entry_id >= count:
            raise PreconditionFailedError(
                f"Unable to find position for position specified: {message_id}"
            )
        self._move(topic, subscription, entry_id + 1 if excluded else entry_id)

    async def peek_message(self, topic: str, subscription: str, n: int) -> Message:
        index = self._next_unacked(topic, subscription) + n - 1
        entries = self.messages.get(topic, [])
        if index >= len(entries):
            raise ResourceNotFoundError("Message not found")
        return entries[index]

    async def examine_message(self, topic: str, initial: str, n: int) -> Message:
        entries = self._entries(topic)
        if not entries:
            raise PreconditionFailedError(
                "Could not examine messages due to the total message is zero"
            )
        # Past either end, the broker answers the entry at that end.
        index = n - 1 if initial == "earliest" else len(entries) - n
        return entries[min(max(index, 0), len(entries) - 1)]

    async def get_message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> Message:
        entries = self._entries(topic)
        if ledger_id != 0 or not 0 <= entry_id < len(entries):
            raise ResourceNotFoundError("Message not found")
        return entries[entry_id]

    async def last_message_id(self, topic: str) -> dict[str, Any]:
        entries = self._entries(topic)
        return {"ledgerId": 0, "entryId": len(entries) - 1, "partitionIndex": -1}

    async def message_id_by_time(self, topic: str, timestamp_ms: int) -> dict[str, Any]:
        for entry_id, message in enumerate(self._entries(topic)):
            if int(message.headers["X-Pulsar-publish-time"]) >= timestamp_ms:
                return {"ledgerId": 0, "entryId": entry_id, "partitionIndex": -1}
        raise ResourceNotFoundError("Message ID not found")

    async def unload_topic(self, topic: str) -> None:
        self._topic(topic)
        self.unloaded.append(topic)

    async def terminate_topic(self, topic: str) -> dict[str, Any]:
        answer = await self.last_message_id(topic)
        self.terminated.add(topic)
        return answer

    # -- transactions: disabled on this broker -----------------------------------------

    async def client_transactions(
        self, client_name: str, *, role: str | None, superuser: bool,
        coordinator_id: int | None = None,
    ) -> dict[str, Any]:
        raise ServiceNotReady("Transactions are not enabled on this broker")

    async def coordinator_stats(self, tc_id: int | None) -> dict[str, Any]:
        raise ServiceNotReady("Transactions are not enabled on this broker")

    async def skip_coordinator_record(self, tc_id: int, position: str) -> dict[str, Any]:
        raise ServiceNotReady("Transactions are not enabled on this broker")

    async def skip_pending_ack_record(
        self, topic: str, subscription: str, position: str
    ) -> dict[str, Any]:
        raise ServiceNotReady("Transactions are not enabled on this broker")


@pytest.fixture
def admin_resources() -> PulsarResources:
    """Resources over the dict fake, bootstrapped like a standalone."""
    resources = PulsarResources(FakeMetadataStore())
    resources.bootstrap_standalone("standalone")
    return resources


@pytest.fixture
def fake_broker_class() -> type[FakeAdminBroker]:
    """The fake broker class, for tests that build several brokers."""
    return FakeAdminBroker


@pytest.fixture
def broker(admin_resources: PulsarResources) -> FakeAdminBroker:
    return FakeAdminBroker(admin_resources)


def memory_operations(store: MetadataStore | None = None) -> BrokerOperations:
    """The brokers routes' broker side over memory storage: a real health check and
    dynamic configuration (no key registered), started."""
    metadata = store if store is not None else FakeMetadataStore()
    health = HealthChecker(
        MemoryManagedLedgerFactory(metadata), "standalone", "127.0.0.1:8080"
    )
    operations = BrokerOperations(
        health, DynamicConfiguration(ServiceConfiguration(), metadata)
    )
    operations.mark_ready()
    return operations


@pytest.fixture
async def client(broker: FakeAdminBroker) -> AsyncIterator[TestClient[Any, Any]]:
    app = create_admin_app(broker, operations=memory_operations())
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


ExpectError = Callable[..., Awaitable[str]]


async def _expect_error(resp: Any, status: int, reason_part: str = "") -> str:
    """Assert a Pulsar-style error answer ``{"reason": ...}``; return the reason."""
    assert resp.status == status, await resp.text()
    assert resp.content_type == "application/json"
    body = await resp.json()
    assert set(body) == {"reason"}
    assert reason_part in body["reason"], body["reason"]
    return body["reason"]  # type: ignore[no-any-return]


@pytest.fixture
def expect_error() -> ExpectError:
    return _expect_error
