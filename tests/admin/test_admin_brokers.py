"""``/admin/v2/brokers`` over the fake broker and memory storage: the health check's
round trip and failures, readiness, the version, and the dynamic configuration's
registry, validation and storage. The same routes against a real broker process are
in ``test_brokers_process.py``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from quasar.admin import create_admin_app
from quasar.broker.dynamic_config import (
    DYNAMIC_CONFIGURATION_PATH,
    DynamicConfiguration,
)
from quasar.broker.health_check import HealthChecker, heartbeat_topic
from quasar.broker.operations import BrokerOperations
from quasar.config import ServiceConfiguration
from quasar.errors import PersistenceError, PreconditionFailedError
from quasar.resources.store import PulsarResources
from quasar.storage.memory import MemoryManagedLedgerFactory

from .conftest import ExpectError, FakeAdminBroker, FakeMetadataStore

Client = TestClient[Any, Any]
BASE = "/admin/v2/brokers"


class Applied:
    """An apply callback recording the effective configurations it was given."""

    def __init__(self) -> None:
        self.configs: list[ServiceConfiguration] = []

    def __call__(self, config: ServiceConfiguration) -> None:
        self.configs.append(config)


@pytest.fixture
def store() -> FakeMetadataStore:
    return FakeMetadataStore()


@pytest.fixture
def ledgers(store: FakeMetadataStore) -> MemoryManagedLedgerFactory:
    return MemoryManagedLedgerFactory(store)


@pytest.fixture
def applied() -> Applied:
    return Applied()


@pytest.fixture
def operations(
    store: FakeMetadataStore, ledgers: MemoryManagedLedgerFactory, applied: Applied
) -> BrokerOperations:
    dynamic = DynamicConfiguration(ServiceConfiguration(), store)
    dynamic.register("superUserRoles", applied)
    dynamic.register("defaultNumPartitions", applied)
    dynamic.register("maxNumPartitionsPerPartitionedTopic", applied)
    health = HealthChecker(ledgers, "standalone", "127.0.0.1:8080")
    return BrokerOperations(health, dynamic)


@pytest.fixture
async def client(
    admin_resources: PulsarResources, operations: BrokerOperations
) -> AsyncIterator[Client]:
    app = create_admin_app(FakeAdminBroker(admin_resources), operations=operations)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def text(client: Client, path: str) -> tuple[int, str]:
    resp = await client.get(path)
    return resp.status, await resp.text()


# -- health ------------------------------------------------------------------------


def test_heartbeat_topics_are_named_as_pulsar_names_them() -> None:
    v1 = heartbeat_topic("standalone", "127.0.0.1:8080", "V1")
    v2 = heartbeat_topic("standalone", "127.0.0.1:8080", "V2")
    assert v1.full == "persistent://pulsar/standalone/127.0.0.1:8080/healthcheck"
    assert v2.full == "persistent://pulsar/127.0.0.1:8080/healthcheck"


async def test_health_writes_and_reads_back_and_leaves_nothing(
    client: Client, ledgers: MemoryManagedLedgerFactory
) -> None:
    assert await text(client, f"{BASE}/health") == (200, "ok")
    assert await text(client, f"{BASE}/health?topicVersion=V2") == (200, "ok")
    assert await text(client, f"{BASE}/health?topicVersion=V1") == (200, "ok")
    # The heartbeat ledger exists only during a check.
    assert ledgers.list_names() == []


async def test_concurrent_health_checks_all_pass(client: Client) -> None:
    answers = await asyncio.gather(*(text(client, f"{BASE}/health") for _ in range(5)))
    assert answers == [(200, "ok")] * 5


async def test_health_refuses_bad_parameters(
    client: Client, expect_error: ExpectError
) -> None:
    await expect_error(await client.get(f"{BASE}/health?topicVersion=V3"), 400, "V3")
    resp = await client.get(f"{BASE}/health?brokerId=other:8080")
    await expect_error(resp, 404, "other:8080")
    assert await text(client, f"{BASE}/health?brokerId=127.0.0.1:8080") == (200, "ok")


async def test_health_answers_503_while_closing(
    client: Client, operations: BrokerOperations, expect_error: ExpectError
) -> None:
    operations.mark_closing()
    await expect_error(await client.get(f"{BASE}/health"), 503, "closing")


async def test_health_reports_a_storage_failure_with_its_reason(
    client: Client,
    ledgers: MemoryManagedLedgerFactory,
    monkeypatch: pytest.MonkeyPatch,
    expect_error: ExpectError,
) -> None:
    async def refuse(name: str, config: Any = None) -> Any:
        raise PersistenceError("cannot create ledger file 7.log: No space left on device")

    monkeypatch.setattr(ledgers, "open", refuse)
    resp = await client.get(f"{BASE}/health")
    await expect_error(resp, 500, "No space left on device")
    monkeypatch.undo()
    assert await text(client, f"{BASE}/health") == (200, "ok")


async def test_health_times_out_when_storage_does_not_answer(
    ledgers: MemoryManagedLedgerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    stuck = asyncio.Event()

    async def hang(name: str, config: Any = None) -> Any:
        await stuck.wait()

    monkeypatch.setattr(ledgers, "open", hang)
    checker = HealthChecker(ledgers, "standalone", "127.0.0.1:8080", timeout_s=0.05)
    with pytest.raises(Exception, match="timed out after 0.05 s") as info:
        await checker.check()
    assert getattr(info.value, "http_status", None) == 500


async def test_a_check_timed_out_mid_write_answers_at_once_and_the_next_passes(
    ledgers: MemoryManagedLedgerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = ledgers.open
    disk_answers = asyncio.Event()

    async def open_with_a_stuck_disk(name: str, config: Any = None) -> Any:
        ledger = await real_open(name, config)
        real_add = ledger.add_entry

        async def add_entry(data: bytes) -> Any:
            await disk_answers.wait()
            return await real_add(data)

        monkeypatch.setattr(ledger, "add_entry", add_entry)
        return ledger

    monkeypatch.setattr(ledgers, "open", open_with_a_stuck_disk)
    checker = HealthChecker(ledgers, "standalone", "127.0.0.1:8080", timeout_s=0.05)
    with pytest.raises(Exception, match="timed out"):
        await checker.check()
    monkeypatch.setattr(ledgers, "open", real_open)
    disk_answers.set()
    checker.timeout_s = 5.0
    await checker.check()
    assert ledgers.list_names() == []


# -- ready and version ----------------------------------------------------------


async def test_ready_only_once_started(
    client: Client, operations: BrokerOperations, expect_error: ExpectError
) -> None:
    await expect_error(await client.get(f"{BASE}/ready"), 500, "not ready")
    operations.mark_ready()
    assert await text(client, f"{BASE}/ready") == (200, "ok")
    operations.mark_closing()
    await expect_error(await client.get(f"{BASE}/ready"), 500, "not ready")


async def test_version(client: Client, operations: BrokerOperations) -> None:
    status, version = await text(client, f"{BASE}/version")
    assert status == 200 and version == operations.version and version


async def test_without_a_broker_behind_the_app(
    admin_resources: PulsarResources, expect_error: ExpectError
) -> None:
    app = create_admin_app(FakeAdminBroker(admin_resources))
    async with TestClient(TestServer(app)) as client:
        await expect_error(await client.get(f"{BASE}/health"), 503)
        await expect_error(await client.get(f"{BASE}/ready"), 500)
        await expect_error(await client.get(f"{BASE}/configuration"), 503)


# -- dynamic configuration --------------------------------------------------------


async def test_dynamic_configuration_round_trip(
    client: Client, store: FakeMetadataStore, applied: Applied
) -> None:
    names = await (await client.get(f"{BASE}/configuration")).json()
    assert names == [
        "defaultNumPartitions",
        "maxNumPartitionsPerPartitionedTopic",
        "superUserRoles",
    ]
    assert await (await client.get(f"{BASE}/configuration/values")).json() == {}
    resp = await client.post(f"{BASE}/configuration/superUserRoles/root,ops")
    assert resp.status == 204, await resp.text()
    assert applied.configs[-1].authorization.super_user_roles == ("root", "ops")
    assert await (await client.get(f"{BASE}/configuration/values")).json() == {
        "superUserRoles": "root,ops"
    }
    runtime = await (await client.get(f"{BASE}/configuration/runtime")).json()
    assert runtime["superUserRoles"] == "root,ops"
    assert runtime["clusterName"] == "standalone"
    stored = store.get(DYNAMIC_CONFIGURATION_PATH)
    assert stored is not None
    assert json.loads(stored.value) == {"superUserRoles": "root,ops"}
    resp = await client.delete(f"{BASE}/configuration/superUserRoles")
    assert resp.status == 204
    assert applied.configs[-1].authorization.super_user_roles == ()
    assert await (await client.get(f"{BASE}/configuration/values")).json() == {}
    assert store.get(DYNAMIC_CONFIGURATION_PATH) is None
    # Deleting a key never changed is no error (as in Pulsar).
    assert (await client.delete(f"{BASE}/configuration/superUserRoles")).status == 204


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("maxUnackedMessagesPerConsumer/5", "non-dynamic"),
        ("noSuchKey/1", "non-dynamic"),
        ("defaultNumPartitions/many", "Invalid dynamic-config value"),
        ("defaultNumPartitions/0", "Invalid dynamic-config value"),
        # Checked against the other settings too: above the partition bound.
        ("defaultNumPartitions/20000", "maxNumPartitionsPerPartitionedTopic"),
    ],
)
async def test_invalid_changes_are_refused_with_412(
    client: Client, applied: Applied, expect_error: ExpectError, path: str, reason: str
) -> None:
    await expect_error(await client.post(f"{BASE}/configuration/{path}"), 412, reason)
    assert applied.configs == []
    assert await (await client.get(f"{BASE}/configuration/values")).json() == {}


async def test_deleting_a_non_dynamic_key_is_refused(
    client: Client, expect_error: ExpectError
) -> None:
    resp = await client.delete(f"{BASE}/configuration/clusterName")
    await expect_error(resp, 412, "non-dynamic")


def test_stored_changes_are_applied_at_start(store: FakeMetadataStore) -> None:
    first = DynamicConfiguration(ServiceConfiguration(), store)
    first.register("superUserRoles", Applied())
    first.update("superUserRoles", "root")
    applied = Applied()
    restarted = DynamicConfiguration(ServiceConfiguration(), store)
    restarted.register("superUserRoles", applied)
    restarted.load()
    assert [c.authorization.super_user_roles for c in applied.configs] == [("root",)]
    assert restarted.overrides() == {"superUserRoles": "root"}


def test_stored_changes_that_no_longer_apply_are_logged_not_fatal(
    store: FakeMetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.put(
        DYNAMIC_CONFIGURATION_PATH,
        json.dumps({"clusterName": "x", "defaultNumPartitions": "-3"}).encode(),
    )
    dynamic = DynamicConfiguration(ServiceConfiguration(), store)
    dynamic.register("defaultNumPartitions", Applied())
    dynamic.load()
    assert dynamic.overrides() == {}
    assert "clusterName is not a dynamic configuration key" in caplog.text
    assert "defaultNumPartitions=-3 ignored" in caplog.text


def test_runtime_values_mask_secrets(store: FakeMetadataStore) -> None:
    config = ServiceConfiguration.load(
        env={},
        overrides={
            "tokenSecretKey": "data:;base64,c2VjcmV0",
            "basicAuthConf": "dXNlcjpoYXNo",
        },
    )
    runtime = DynamicConfiguration(config, store).runtime()
    assert runtime["tokenSecretKey"] == "********"
    assert runtime["basicAuthConf"] == "********"
    assert "c2VjcmV0" not in json.dumps(runtime)
    config = ServiceConfiguration.load(env={}, overrides={"basicAuthConf": "file:/etc/htpasswd"})
    assert DynamicConfiguration(config, store).runtime()["basicAuthConf"] == "file:/etc/htpasswd"


def test_update_errors_are_preconditions(store: FakeMetadataStore) -> None:
    dynamic = DynamicConfiguration(ServiceConfiguration(), store)
    with pytest.raises(PreconditionFailedError):
        dynamic.update("superUserRoles", "root")
