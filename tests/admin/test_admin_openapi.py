"""The admin API's OpenAPI document: valid, complete, and served to any role.

The document is built from the app's route table, so these tests fail when a route is
added without an entry in ``quasar.admin.openapi_operations`` or an entry outlives
its route. ``test_admin_openapi_fuzz.py`` drives a real broker from the document.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from openapi_spec_validator import validate

from quasar.admin import create_admin_app
from quasar.admin.access import SUPERUSER, access
from quasar.admin.openapi import (
    OPENAPI_PATH,
    openapi_document,
    served_operations,
    undocumented_routes,
    unserved_operations,
)
from quasar.admin.openapi_operations import OPERATIONS
from quasar.admin.openapi_schemas import PATH_PARAMETERS
from quasar.resources.store import PulsarResources

from .conftest import ExpectError, FakeAdminBroker
from .test_admin_access import as_role, authentication, authorization


def _app(resources: PulsarResources) -> web.Application:
    return create_admin_app(
        FakeAdminBroker(resources),
        authentication=authentication(),
        authorization=authorization(resources),
    )


def test_the_document_is_valid_openapi(admin_resources: PulsarResources) -> None:
    document = openapi_document(_app(admin_resources))
    validate(document)  # type: ignore[arg-type]
    assert document["openapi"].startswith("3.0")


def test_every_served_route_is_documented_and_nothing_else(
    admin_resources: PulsarResources,
) -> None:
    app = _app(admin_resources)
    assert undocumented_routes(app) == []
    assert unserved_operations(app) == []
    document = openapi_document(app)
    documented = {
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        for method in operations
    }
    assert documented == set(served_operations(app)) == set(OPERATIONS)
    assert OPENAPI_PATH in document["paths"]


def test_a_route_without_an_entry_is_reported(admin_resources: PulsarResources) -> None:
    app = _app(admin_resources)

    @access(SUPERUSER)
    async def extra(request: web.Request) -> web.Response:
        return web.Response()

    app.router.add_post("/admin/v2/persistent/{tenant}/{namespace}/{topic}/extra", extra)
    assert undocumented_routes(app) == [
        "POST /admin/v2/persistent/{tenant}/{namespace}/{topic}/extra"
    ]
    with pytest.raises(KeyError):
        openapi_document(app)


def test_a_static_resource_is_one_operation_per_prefix(
    admin_resources: PulsarResources, tmp_path: Path
) -> None:
    app = _app(admin_resources)
    app.router.add_static("/assets/", tmp_path)
    assert undocumented_routes(app) == ["GET /assets/{filename}"]


def test_every_path_parameter_is_typed_and_required(
    admin_resources: PulsarResources,
) -> None:
    document = openapi_document(_app(admin_resources))
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            in_path = [p for p in operation["parameters"] if p["in"] == "path"]
            assert [p["name"] for p in in_path] == re.findall(r"\{(\w+)\}", path)
            assert all(p["name"] in PATH_PARAMETERS for p in in_path)
            assert all(p["required"] and "type" in p["schema"] for p in in_path)
            assert "default" in operation["responses"], (method, path)
            assert operation["responses"]["default"]["content"]["application/json"]


def test_bodies_are_described_where_handlers_read_them(
    admin_resources: PulsarResources,
) -> None:
    document = openapi_document(_app(admin_resources))
    paths = document["paths"]
    base = "/admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{subscription}"
    reset = paths[base + "/resetcursor"]["post"]["requestBody"]
    assert reset["required"]
    assert {"$ref": "#/components/schemas/ResetCursorData"} in (
        reset["content"]["application/json"]["schema"]["oneOf"]
    )
    tenant = paths["/admin/v2/tenants/{tenant}"]["put"]["requestBody"]
    assert tenant["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TenantInfo"
    }
    quota = paths["/admin/v2/namespaces/{tenant}/{namespace}/backlogQuota"]["post"]
    assert [p["name"] for p in quota["parameters"] if p["in"] == "query"] == [
        "backlogQuotaType"
    ]
    schemas = document["components"]["schemas"]
    assert set(schemas["ResetCursorData"]["properties"]) >= {
        "ledgerId", "entryId", "partitionIndex", "batchIndex", "excluded"
    }
    assert schemas["ErrorData"]["required"] == ["reason"]


async def test_the_document_is_served_to_any_authenticated_role(
    admin_resources: PulsarResources, expect_error: ExpectError
) -> None:
    app = _app(admin_resources)
    async with TestClient(TestServer(app)) as client:
        await expect_error(await client.get(OPENAPI_PATH), 401)
        resp = await client.get(OPENAPI_PATH, headers=as_role("stranger"))
        assert resp.status == 200
        assert resp.content_type == "application/json"
        served: dict[str, Any] = await resp.json()
    assert served == openapi_document(app)


def test_a_cluster_members_document_has_its_routes(admin_resources: PulsarResources) -> None:
    from typing import cast

    from quasar.admin.openapi_operations import CLUSTER_OPERATIONS
    from quasar.cluster.member import ClusterMember

    app = create_admin_app(
        FakeAdminBroker(admin_resources), cluster=cast(ClusterMember, object())
    )
    assert undocumented_routes(app) == []
    document = openapi_document(app)
    validate(document)  # type: ignore[arg-type]
    documented = {
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        for method in operations
    }
    assert set(CLUSTER_OPERATIONS) <= documented
