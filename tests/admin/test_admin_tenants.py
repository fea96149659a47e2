"""Tenants, clusters, health, and the error handling every route shares."""

from __future__ import annotations

import io
from typing import Any

from aiohttp.test_utils import TestClient

from quasar.errors import ServiceNotReady
from quasar.resources.clusters import ClusterData
from quasar.resources.store import PulsarResources

Client = TestClient[Any, Any]


async def test_list_tenants(client: Client) -> None:
    resp = await client.get("/admin/v2/tenants")
    assert resp.status == 200
    assert await resp.json() == ["public", "pulsar"]


async def test_create_get_update_delete_tenant(client: Client) -> None:
    body = {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
    resp = await client.put("/admin/v2/tenants/acme", json=body)
    assert resp.status == 204
    resp = await client.get("/admin/v2/tenants/acme")
    assert resp.status == 200
    assert await resp.json() == body

    resp = await client.post("/admin/v2/tenants/acme", json={"adminRoles": ["a", "b"]})
    assert resp.status == 204
    assert await (await client.get("/admin/v2/tenants/acme")).json() == {
        "adminRoles": ["a", "b"],
        "allowedClusters": ["standalone"],
    }

    resp = await client.delete("/admin/v2/tenants/acme")
    assert resp.status == 204
    assert await (await client.get("/admin/v2/tenants")).json() == ["public", "pulsar"]


async def test_create_tenant_without_body_defaults_to_this_cluster(
    client: Client,
) -> None:
    assert (await client.put("/admin/v2/tenants/acme")).status == 204
    assert await (await client.get("/admin/v2/tenants/acme")).json() == {
        "adminRoles": [],
        "allowedClusters": ["standalone"],
    }


async def test_create_existing_tenant_conflicts(
    client: Client, expect_error: Any
) -> None:
    await expect_error(
        await client.put("/admin/v2/tenants/public"), 409, "already exists"
    )


async def test_invalid_tenant_name(client: Client, expect_error: Any) -> None:
    await expect_error(
        await client.put("/admin/v2/tenants/bad%20name"), 412, "not valid"
    )
    await expect_error(await client.get("/admin/v2/tenants/a%3Fb"), 412, "not valid")


async def test_tenant_bodies(client: Client, expect_error: Any) -> None:
    url = "/admin/v2/tenants/acme"
    await expect_error(await client.put(url, data=b"{not json"), 400, "Malformed JSON")
    await expect_error(await client.put(url, data=b"\xff\xfe"), 400, "Malformed JSON")
    await expect_error(
        await client.put(url, json={"adminRoles": "ops"}), 400, "adminRoles"
    )
    await expect_error(await client.put(url, json=[1, 2]), 400, "TenantInfo")
    await expect_error(
        await client.put(url, json={"allowedClusters": []}), 412, "empty"
    )
    await expect_error(
        await client.put(url, json={"allowedClusters": ["elsewhere"]}), 412, "elsewhere"
    )
    assert (await client.get(url)).status == 404


async def test_missing_tenant(client: Client, expect_error: Any) -> None:
    url = "/admin/v2/tenants/nope"
    await expect_error(await client.get(url), 404, "Tenant does not exist")
    await expect_error(await client.post(url, json={}), 404, "Tenant does not exist")
    await expect_error(await client.delete(url), 404, "Tenant does not exist")


async def test_update_tenant_needs_a_body(client: Client, expect_error: Any) -> None:
    await expect_error(await client.post("/admin/v2/tenants/public"), 400, "required")


async def test_tenant_with_namespaces_cannot_be_deleted(
    client: Client, expect_error: Any
) -> None:
    await expect_error(
        await client.delete("/admin/v2/tenants/public"), 409, "namespaces"
    )


async def test_clusters_and_health(client: Client, admin_resources: PulsarResources) -> None:
    resp = await client.get("/admin/v2/clusters")
    assert (resp.status, await resp.json()) == (200, ["standalone"])
    # Clusters recorded by initialize-cluster-metadata are listed too.
    admin_resources.clusters.create("east", ClusterData(broker_service_url="pulsar://e:6650"))
    resp = await client.get("/admin/v2/clusters")
    assert (resp.status, await resp.json()) == (200, ["east", "standalone"])
    resp = await client.get("/admin/v2/brokers/health")
    assert (resp.status, await resp.text()) == (200, "ok")


async def test_unknown_path_and_method_answer_json(
    client: Client, expect_error: Any
) -> None:
    await expect_error(await client.get("/admin/v2/nothing-here"), 404)
    resp = await client.patch("/admin/v2/tenants")
    await expect_error(resp, 405)
    assert "GET" in resp.headers["Allow"]


async def test_oversized_body_is_refused(client: Client, expect_error: Any) -> None:
    body = io.BytesIO(b"[" + b"1," * (1024 * 1024) + b"1]")
    await expect_error(await client.put("/admin/v2/tenants/acme", data=body), 413)


async def test_broker_errors_keep_their_status(
    client: Client, broker: Any, expect_error: Any
) -> None:
    await client.put("/admin/v2/persistent/public/default/t")
    broker.fail_with = ServiceNotReady("broker is starting")
    url = "/admin/v2/persistent/public/default/t/stats"
    await expect_error(await client.get(url), 503, "starting")


async def test_unexpected_exception_is_a_json_500(
    client: Client, broker: Any, expect_error: Any
) -> None:
    await client.put("/admin/v2/persistent/public/default/t")
    broker.fail_with = RuntimeError("boom")
    url = "/admin/v2/persistent/public/default/t/stats"
    await expect_error(await client.get(url), 500, "boom")
    # The server keeps serving.
    broker.fail_with = None
    assert (await client.get(url)).status == 200


async def test_the_system_tenant_and_namespace_cannot_be_deleted(
    client: Client, expect_error: Any
) -> None:
    await expect_error(
        await client.delete("/admin/v2/namespaces/pulsar/system?force=true"),
        412,
        "cannot be deleted",
    )
    await expect_error(await client.delete("/admin/v2/tenants/pulsar"), 412, "cannot be deleted")
    resp = await client.get("/admin/v2/namespaces/pulsar")
    assert await resp.json() == ["pulsar/system"]


async def test_a_deeply_nested_body_is_a_bad_request(client: Client, expect_error: Any) -> None:
    body = "[" * 100_000 + "]" * 100_000
    resp = await client.post(
        "/admin/v2/tenants/public", data=body, headers={"Content-Type": "application/json"}
    )
    await expect_error(resp, 400, "nested too deeply")
