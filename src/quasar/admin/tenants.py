"""``/admin/v2/tenants`` and ``/admin/v2/clusters``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from quasar.admin.access import AUTHENTICATED, SUPERUSER, TENANT_ADMIN, access
from quasar.admin.http import (
    broker_of,
    json_response,
    no_content,
    read_json,
    tenant_param,
)
from quasar.errors import InvalidResourceError
from quasar.resources.models import TenantInfo

routes = web.RouteTableDef()


def _tenant_info(body: Any, cluster_name: str) -> TenantInfo:
    """TenantInfo from a request body, defaulting ``allowedClusters`` to this cluster.

    Pulsar requires ``allowedClusters``; quasar has exactly one cluster, so a missing
    body or key means that one. An explicit empty list is still refused, as in Pulsar.
    """
    if body is None:
        return TenantInfo(allowed_clusters=(cluster_name,))
    info = TenantInfo.from_json(body)
    if "allowedClusters" not in body:
        return TenantInfo(
            admin_roles=info.admin_roles, allowed_clusters=(cluster_name,)
        )
    if not info.allowed_clusters:
        raise InvalidResourceError("Clusters can not be empty")
    unknown = sorted(set(info.allowed_clusters) - {cluster_name})
    if unknown:
        raise InvalidResourceError(f"Clusters do not exist: {', '.join(unknown)}")
    return info


@routes.get("/admin/v2/tenants")
@access(SUPERUSER)
async def list_tenants(request: web.Request) -> web.Response:
    return json_response(broker_of(request).resources.tenants.list())


@routes.get("/admin/v2/tenants/{tenant}")
@access(TENANT_ADMIN)
async def get_tenant(request: web.Request) -> web.Response:
    tenant = tenant_param(request)
    return json_response(broker_of(request).resources.tenants.get(tenant).to_json())


@routes.put("/admin/v2/tenants/{tenant}")
@access(SUPERUSER)
async def create_tenant(request: web.Request) -> web.Response:
    tenant = tenant_param(request)
    broker = broker_of(request)
    info = _tenant_info(await read_json(request, required=False), broker.cluster_name)
    broker.resources.tenants.create(tenant, info)
    return no_content()


@routes.post("/admin/v2/tenants/{tenant}")
@access(SUPERUSER)
async def update_tenant(request: web.Request) -> web.Response:
    tenant = tenant_param(request)
    broker = broker_of(request)
    info = _tenant_info(await read_json(request, required=True), broker.cluster_name)
    broker.resources.tenants.update(tenant, info)
    return no_content()


@routes.delete("/admin/v2/tenants/{tenant}")
@access(SUPERUSER)
async def delete_tenant(request: web.Request) -> web.Response:
    tenant = tenant_param(request)
    broker_of(request).resources.tenants.delete(tenant)
    return no_content()


@routes.get("/admin/v2/clusters")
@access(AUTHENTICATED)
async def list_clusters(request: web.Request) -> web.Response:
    # This broker's cluster, and those initialize-cluster-metadata recorded.
    broker = broker_of(request)
    return json_response(sorted({broker.cluster_name, *broker.resources.clusters.list()}))

