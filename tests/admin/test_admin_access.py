"""Authorization of the admin API: every route's access rule, and the permission
endpoints, over the fake broker with token authentication (token = role name)."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from quasar.admin import create_admin_app
from quasar.admin.access import (
    AUTHENTICATED,
    SUPERUSER,
    rule_of,
)
from quasar.admin.dashboard import DATA_PATH as DASHBOARD_DATA
from quasar.admin.http import BROKER_KEY
from quasar.auth import AuthenticationError, AuthenticationService, AuthorizationService
from quasar.auth.token import TokenAuthenticationProvider
from quasar.auth.tokens import AuthenticatedToken
from quasar.config import AuthorizationConfig
from quasar.resources.models import TenantInfo
from quasar.resources.store import PulsarResources

from .conftest import ExpectError, FakeAdminBroker, memory_operations

Client = TestClient[Any, Any]
NS = "/admin/v2/namespaces/acme/orders"
TOPIC = "/admin/v2/persistent/acme/orders/placed"
ROLES = ("root", "acme-admin", "app", "stranger")

# Concrete values for every path parameter of the admin routes.
PATH_VALUES = {
    "domain": "persistent",
    "tenant": "acme",
    "namespace": "orders",
    "topic": "placed",
    "subscription": "sub",
    "role": "app",
    "clientName": "client-1",
    "coordinatorId": "0",
    "subName": "sub",
    "mostSigBits": "0",
    "leastSigBits": "1",
    "timeoutMs": "1000",
    "ledgerId": "1",
    "numMessages": "1",
    "timestamp": "0",
    "messagePosition": "1",
    "entryId": "0",
    "configName": "superUserRoles",
    "configValue": "root",
    "expireTimeInSeconds": "60",
    "version": "0",
}


def _validate(token: str) -> AuthenticatedToken:
    if token not in ROLES:
        raise AuthenticationError("unknown token")
    return AuthenticatedToken(token, int(time.time() * 1000) + 3_600_000)


def authentication() -> AuthenticationService:
    return AuthenticationService([("Token", TokenAuthenticationProvider(_validate))])


def authorization(resources: PulsarResources, enabled: bool = True) -> AuthorizationService:
    config = AuthorizationConfig(
        authorization_enabled=enabled, super_user_roles=("root",)
    )
    return AuthorizationService(config, resources)


def as_role(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {role}"}


@pytest.fixture
def acme(admin_resources: PulsarResources) -> PulsarResources:
    admin_resources.tenants.create("acme", TenantInfo(("acme-admin",), ("standalone",)))
    admin_resources.namespaces.create("acme/orders")
    return admin_resources


def app_for(resources: PulsarResources, enabled: bool = True) -> web.Application:
    return create_admin_app(
        FakeAdminBroker(resources),
        authentication=authentication(),
        authorization=authorization(resources, enabled),
        operations=memory_operations(),
    )


@pytest.fixture
async def client(acme: PulsarResources) -> AsyncIterator[Client]:
    async with TestClient(TestServer(app_for(acme))) as test_client:
        yield test_client


def routes(app: web.Application) -> list[tuple[str, str, Any]]:
    """(method, concrete path, handler) of every route of the app."""
    out = []
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        path = re.sub(
            r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], route.resource.canonical
        )
        out.append((route.method, path, route.handler))
    return out


def test_every_route_declares_an_access_rule(acme: PulsarResources) -> None:
    missing = [
        (method, path) for method, path, handler in routes(app_for(acme))
        if rule_of(handler) is None
    ]
    assert missing == []


async def test_a_role_without_rights_is_refused_everywhere(
    client: Client, expect_error: ExpectError
) -> None:
    checked = 0
    for method, path, handler in routes(client.app):
        if rule_of(handler) is AUTHENTICATED:
            continue
        resp = await client.request(method, path, headers=as_role("stranger"), json=[])
        await expect_error(resp, 401)
        checked += 1
    assert checked >= 50


async def test_authenticated_routes_admit_any_role(client: Client) -> None:
    resp = await client.get("/admin/v2/clusters", headers=as_role("stranger"))
    assert resp.status == 200


async def test_the_tenant_admin_manages_its_tenant_but_is_no_superuser(
    client: Client, expect_error: ExpectError
) -> None:
    for method, path, handler in routes(client.app):
        rule = rule_of(handler)
        resp = await client.request(method, path, headers=as_role("acme-admin"), json=[])
        if rule is SUPERUSER:
            await expect_error(resp, 401, "super-user")
        else:
            # Refusals are 401; anything else is the route's own answer.
            assert resp.status != 401, (method, path, await resp.text())
    # Another tenant's resources stay closed.
    resp = await client.get("/admin/v2/namespaces/public", headers=as_role("acme-admin"))
    await expect_error(resp, 401, "this tenant")


async def test_the_superuser_may_call_everything(client: Client) -> None:
    # The topic and subscription the paths name exist and hold a message, so the
    # routes reach the broker; deletions run last so they do not hide the others.
    broker = client.app[BROKER_KEY]
    assert isinstance(broker, FakeAdminBroker)
    broker.publish("persistent://acme/orders/placed", b"hello")
    broker.topics["persistent://acme/orders/placed"]["sub"] = "earliest"
    ordered = sorted(routes(client.app), key=lambda route: route[0] == "DELETE")
    server_errors = []
    for method, path, _ in ordered:
        resp = await client.request(method, path, headers=as_role("root"), json=[])
        assert resp.status != 401, (method, path, await resp.text())
        # The fake answers as a broker would: no 5xx, but the 503 of the transaction
        # routes (transactions are disabled on the fake, as the broker answers them
        # with transactionCoordinatorEnabled=false) and of the dashboard's data (an
        # app built without a dashboard; tests/dashboard serve it from a real broker).
        if resp.status >= 500 and not (
            resp.status == 503
            and (path.startswith("/admin/v3/transactions/") or path == DASHBOARD_DATA)
        ):
            server_errors.append((method, path, resp.status, await resp.text()))
    assert server_errors == []


async def test_a_refused_request_changes_nothing(
    client: Client, acme: PulsarResources, expect_error: ExpectError
) -> None:
    await expect_error(await client.delete(NS, headers=as_role("app")), 401)
    assert acme.namespaces.exists("acme/orders")
    await expect_error(
        await client.put("/admin/v2/tenants/evil", headers=as_role("acme-admin")), 401
    )
    assert not acme.tenants.exists("evil")


async def test_grants_open_what_they_name(
    client: Client, acme: PulsarResources, expect_error: ExpectError
) -> None:
    root, app = as_role("root"), as_role("app")
    await expect_error(await client.get(NS + "/topics", headers=app), 401)
    resp = await client.post(NS + "/permissions/app", headers=root, json=["consume"])
    assert resp.status == 204, await resp.text()
    assert await (await client.get(NS + "/permissions", headers=root)).json() == {
        "app": ["consume"]
    }
    assert (await client.get(NS + "/topics", headers=app)).status == 200
    assert (await client.put(TOPIC, headers=root)).status == 204
    assert (await client.get(TOPIC + "/stats", headers=app)).status == 200
    # Consuming is not administering.
    await expect_error(await client.delete(TOPIC, headers=app), 401)
    await expect_error(await client.post(NS + "/permissions/app", headers=app, json=["produce"]), 401)
    # Revoked: closed again from the next request on.
    assert (await client.delete(NS + "/permissions/app", headers=root)).status == 204
    await expect_error(await client.get(TOPIC + "/stats", headers=app), 401)


async def test_topic_grants_are_listed_with_the_namespace_grants(
    client: Client, expect_error: ExpectError
) -> None:
    root = as_role("root")
    await client.post(NS + "/permissions/app", headers=root, json=["produce"])
    resp = await client.post(TOPIC + "/permissions/app", headers=root, json=["consume"])
    assert resp.status == 204
    await client.post(TOPIC + "/permissions/reader", headers=root, json=["consume"])
    assert await (await client.get(TOPIC + "/permissions", headers=root)).json() == {
        "app": ["produce", "consume"],
        "reader": ["consume"],
    }
    assert (await client.get(TOPIC + "/stats", headers=as_role("app"))).status != 401
    assert (await client.delete(TOPIC + "/permissions/reader", headers=root)).status == 204
    # A namespace-level grant is not revoked on one topic.
    resp = await client.delete(TOPIC + "/permissions/reader", headers=root)
    await expect_error(resp, 412, "topic level")


async def test_subscription_permissions_and_auth_mode(client: Client) -> None:
    root = as_role("root")
    path = NS + "/permissions/subscription/billing"
    assert (await client.post(path, headers=root, json=["app", "ops"])).status == 204
    got = await (await client.get(NS + "/permissions/subscription", headers=root)).json()
    assert got == {"billing": ["app", "ops"]}
    assert (await client.delete(NS + "/permissions/billing/ops", headers=root)).status == 204
    got = await (await client.get(NS + "/permissions/subscription", headers=root)).json()
    assert got == {"billing": ["app"]}
    assert await (await client.get(NS + "/subscriptionAuthMode", headers=root)).json() == "None"
    resp = await client.post(NS + "/subscriptionAuthMode", headers=root, json="Prefix")
    assert resp.status == 204
    assert await (await client.get(NS + "/subscriptionAuthMode", headers=root)).json() == "Prefix"


@pytest.mark.parametrize(
    ("path", "body", "status", "reason"),
    [
        (NS + "/permissions/app", ["produce", "fly"], 412, "fly"),
        (NS + "/permissions/app", {"produce": True}, 400, "actions"),
        (NS + "/permissions/app", None, 400, "body"),
        (NS + "/permissions/subscription/s", ["", "x"], 400, "roles"),
        (NS + "/subscriptionAuthMode", "Suffix", 400, "subscriptionAuthMode"),
    ],
)
async def test_bad_grants_are_refused(
    client: Client, expect_error: ExpectError, path: str, body: Any, status: int, reason: str
) -> None:
    resp = await client.post(path, headers=as_role("root"), json=body)
    await expect_error(resp, status, reason)


async def test_grants_answer_501_while_authorization_is_off(
    acme: PulsarResources, expect_error: ExpectError
) -> None:
    async with TestClient(TestServer(app_for(acme, enabled=False))) as client:
        resp = await client.post(NS + "/permissions/app", headers=as_role("app"), json=["produce"])
        await expect_error(resp, 501, "Authorization is not enabled")
        assert (await client.get(NS + "/permissions", headers=as_role("app"))).status == 200


async def test_a_route_without_a_rule_is_refused(acme: PulsarResources) -> None:
    app = app_for(acme)

    async def unguarded(request: web.Request) -> web.Response:
        raise AssertionError("must not run")

    app.router.add_get("/admin/v2/unguarded", unguarded)
    async with TestClient(TestServer(app)) as client:
        resp = await client.get("/admin/v2/unguarded", headers=as_role("root"))
        assert resp.status == 401


async def test_metrics_stay_open_unless_authenticate_metrics_endpoint(
    acme: PulsarResources,
) -> None:
    async with TestClient(TestServer(app_for(acme))) as client:
        assert (await client.get("/metrics")).status == 200
    app = create_admin_app(
        FakeAdminBroker(acme),
        authentication=authentication(),
        authorization=authorization(acme),
        authenticate_metrics=True,
    )
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/metrics")).status == 401
        assert (await client.get("/metrics", headers=as_role("stranger"))).status == 200



async def test_client_transactions_answers_for_the_callers_role(
    acme: PulsarResources,
) -> None:
    seen: list[tuple[str, str | None, bool]] = []

    class Broker(FakeAdminBroker):
        async def client_transactions(
            self, client_name: str, *, role: str | None, superuser: bool,
            coordinator_id: int | None = None,
        ) -> dict[str, Any]:
            seen.append((client_name, role, superuser))
            return {"clientName": client_name, "open": [], "terminated": []}

    app = create_admin_app(
        Broker(acme), authentication=authentication(), authorization=authorization(acme)
    )
    path = "/admin/v3/transactions/clientTransactions/etl-1"
    async with TestClient(TestServer(app)) as client:
        assert (await client.get(path, headers=as_role("app"))).status == 200
        assert (await client.get(path, headers=as_role("root"))).status == 200
    assert seen == [("etl-1", "app", False), ("etl-1", "root", True)]
