"""Authorization against a real broker process configured with Pulsar's keys alone
(``authorizationEnabled``, ``superUserRoles``, token authentication), driven by the
official ``pulsar-client``, by quasar's client and by the admin API.

Roles: ``root`` is the super-user; ``acme-admin`` administers tenant ``acme``; ``app``,
``ops`` and ``stranger`` hold only what a test grants them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pulsar
import pytest

from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.client import AuthenticationToken, Client
from quasar.client.admin import AdminClient
from quasar.errors import AdminError, AuthorizationError
from quasar.testing.process import BrokerProcess
from quasar.testing.secured import token_settings

SECRET = create_secret_key()
NS = "acme/orders"

T = TypeVar("T")


def token(role: str) -> str:
    return create_token(role, SECRET)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp: Path = tmp_path_factory.mktemp("authz-broker")
    settings = token_settings(SECRET, super_users="root")
    proc = BrokerProcess(tmp / "data", settings=settings).start()
    admin(proc, "root", lambda a: a.create_tenant("acme", admin_roles=["acme-admin"]))
    admin(proc, "acme-admin", lambda a: a.create_namespace(NS))
    yield proc
    proc.stop()


def admin(
    broker: BrokerProcess, role: str, call: Callable[[AdminClient], Awaitable[T]]
) -> T:
    async def run() -> T:
        async with AdminClient(
            broker.admin_url, authentication=AuthenticationToken(token(role))
        ) as client:
            return await call(client)

    return asyncio.run(run())


def grant(broker: BrokerProcess, path: str, body: Any) -> None:
    admin(broker, "root", lambda a: a.request("POST", path, body))


def revoke(broker: BrokerProcess, path: str) -> None:
    admin(broker, "root", lambda a: a.request("DELETE", path))


def topic() -> str:
    return f"persistent://{NS}/authz-{uuid.uuid4().hex[:12]}"


def official(broker: BrokerProcess, role: str) -> pulsar.Client:
    return pulsar.Client(
        broker.url,
        authentication=pulsar.AuthenticationToken(token(role)),
        operation_timeout_seconds=10,
    )


@contextmanager
def quasar_client(broker: BrokerProcess, role: str) -> Iterator[Client]:
    client = Client(broker.url, authentication=AuthenticationToken(token(role)))
    try:
        yield client
    finally:
        client.close()


def local_name(full: str) -> str:
    return full.rsplit("/", 1)[1]


def test_a_role_without_grants_can_neither_produce_nor_consume(broker: BrokerProcess) -> None:
    name = topic()
    client = official(broker, "stranger")
    try:
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer(name)
        with pytest.raises(pulsar.AuthorizationError):
            client.subscribe(name, "s")
    finally:
        client.close()
    with quasar_client(broker, "stranger") as qc:
        with pytest.raises(AuthorizationError, match="not authorized"):
            qc.create_producer(name)


def test_topic_grants_open_exactly_their_actions(broker: BrokerProcess) -> None:
    name = topic()
    base = f"/admin/v2/persistent/{NS}/{local_name(name)}/permissions"
    grant(broker, f"{base}/app", ["produce"])
    client = official(broker, "app")
    try:
        producer = client.create_producer(name)
        producer.send(b"granted")
        with pytest.raises(pulsar.AuthorizationError):
            client.subscribe(name, "s")
        # A consume grant on the namespace adds consuming, for every topic.
        grant(broker, f"/admin/v2/namespaces/{NS}/permissions/app", ["consume"])
        consumer = client.subscribe(
            name, "s", initial_position=pulsar.InitialPosition.Earliest
        )
        assert consumer.receive(10_000).data() == b"granted"
    finally:
        client.close()
        revoke(broker, f"/admin/v2/namespaces/{NS}/permissions/app")
    # Revoked: the next producer or consumer is refused.
    with quasar_client(broker, "app") as qc:
        qc.create_producer(name).close()  # the topic grant remains
        with pytest.raises(AuthorizationError, match="Subscribe"):
            qc.subscribe(name, "again")
    revoke(broker, f"{base}/app")
    with quasar_client(broker, "app") as qc:
        with pytest.raises(AuthorizationError):
            qc.create_producer(name)


def test_subscription_roles_keep_a_subscription_to_its_roles(broker: BrokerProcess) -> None:
    name = topic()
    base = f"/admin/v2/persistent/{NS}/{local_name(name)}/permissions"
    grant(broker, f"{base}/ops", ["consume"])
    grant(broker, f"{base}/app", ["consume"])
    grant(broker, f"/admin/v2/namespaces/{NS}/permissions/subscription/billing", ["app"])
    try:
        with quasar_client(broker, "ops") as qc:
            with pytest.raises(AuthorizationError):
                qc.subscribe(name, "billing")
            qc.subscribe(name, "audit").close()
        with quasar_client(broker, "app") as qc:
            qc.subscribe(name, "billing").close()
    finally:
        revoke(broker, f"/admin/v2/namespaces/{NS}/permissions/billing/app")


def test_the_tenant_admin_uses_its_tenant_only(broker: BrokerProcess) -> None:
    client = official(broker, "acme-admin")
    try:
        client.create_producer(topic()).send(b"mine")
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer("persistent://public/default/not-mine")
    finally:
        client.close()
    with pytest.raises(AdminError) as refused:
        admin(broker, "acme-admin", lambda a: a.create_namespace("public/taken"))
    assert refused.value.status == 401
    with pytest.raises(AdminError) as refused:
        admin(broker, "acme-admin", lambda a: a.create_tenant("evil"))
    assert refused.value.status == 401
    assert "evil" not in admin(broker, "root", lambda a: a.tenants())


def test_system_topics_are_closed_to_tenants(broker: BrokerProcess) -> None:
    grant(broker, f"/admin/v2/namespaces/{NS}/permissions/app", ["produce", "consume"])
    try:
        client = official(broker, "app")
        try:
            for system in (
                f"persistent://{NS}/__change_events",
                "persistent://pulsar/system/__transaction_log_0",
            ):
                with pytest.raises(pulsar.AuthorizationError):
                    client.create_producer(system)
                with pytest.raises(pulsar.AuthorizationError):
                    client.subscribe(system, "peek")
        finally:
            client.close()
    finally:
        revoke(broker, f"/admin/v2/namespaces/{NS}/permissions/app")


def test_admin_reads_need_the_right_grant(broker: BrokerProcess) -> None:
    name = topic()
    admin(broker, "acme-admin", lambda a: a.create_topic(name))
    with pytest.raises(AdminError) as refused:
        admin(broker, "app", lambda a: a.stats(name))
    assert refused.value.status == 401
    grant(broker, f"/admin/v2/namespaces/{NS}/permissions/app", ["consume"])
    try:
        stats = admin(broker, "app", lambda a: a.stats(name))
        assert stats["subscriptions"] == {}
        assert name in admin(broker, "app", lambda a: a.topics(NS))
        with pytest.raises(AdminError) as refused:
            admin(broker, "app", lambda a: a.delete_topic(name))
        assert refused.value.status == 401
    finally:
        revoke(broker, f"/admin/v2/namespaces/{NS}/permissions/app")
