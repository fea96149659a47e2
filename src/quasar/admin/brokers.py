"""``/admin/v2/brokers``: health, readiness, version and the dynamic configuration.

::

    GET    /admin/v2/brokers/health[?topicVersion=V1|V2]   -> "ok" | 500 | 503
    GET    /admin/v2/brokers/ready                         -> "ok" | 500
    GET    /admin/v2/brokers/version                       -> "0.1.0"
    GET    /admin/v2/brokers/configuration                 -> ["superUserRoles", ...]
    GET    /admin/v2/brokers/configuration/values          -> {"superUserRoles": "a,b"}
    GET    /admin/v2/brokers/configuration/runtime         -> {"clusterName": ..., ...}
    POST   /admin/v2/brokers/configuration/{name}/{value}  -> 204 | 412
    DELETE /admin/v2/brokers/configuration/{name}          -> 204 | 412

As in Pulsar (BrokersBase): the health check and the configuration are for
super-users; ``ready`` and ``version`` need no role (authentication still applies,
as to every admin path). The broker's side of each is ``BrokerOperations``
(``quasar.broker.operations``), given to the app by the composition root.
"""

from __future__ import annotations

from aiohttp import web

from quasar.admin.access import AUTHENTICATED, SUPERUSER, access
from quasar.admin.http import json_response, no_content
from quasar.broker.health_check import TOPIC_VERSIONS
from quasar.broker.operations import BrokerOperations
from quasar.errors import AdminError, BadRequestError, ResourceNotFoundError

__all__ = ["OPERATIONS_KEY", "routes"]

routes = web.RouteTableDef()

BASE = "/admin/v2/brokers"
OPERATIONS_KEY = web.AppKey("quasar.admin.operations", BrokerOperations)


def _operations(request: web.Request) -> BrokerOperations:
    operations = request.app.get(OPERATIONS_KEY)
    if operations is None:
        # An admin app built without a running broker behind it (a tool's or a
        # test's): nothing here can be answered truthfully.
        raise AdminError("Broker is not ready", http_status=503)
    return operations


def _ok() -> web.Response:
    # Pulsar answers these checks with the plain text "ok".
    return web.Response(text="ok")


@routes.get(f"{BASE}/health")
@access(SUPERUSER)
async def health(request: web.Request) -> web.Response:
    operations = _operations(request)
    if operations.closing:
        raise AdminError("Broker is closing", http_status=503)
    version = request.query.get("topicVersion", "V1")
    if version not in TOPIC_VERSIONS:
        raise BadRequestError(
            f"Invalid topicVersion {version!r}: expected one of {', '.join(TOPIC_VERSIONS)}"
        )
    broker_id = request.query.get("brokerId")
    if broker_id is not None and broker_id != operations.health.broker_id:
        # A standalone broker is the only broker of its cluster: there is no other
        # broker to redirect to, as Pulsar does.
        raise ResourceNotFoundError(f"Broker {broker_id} not found")
    await operations.health.check(version)
    return _ok()


@routes.get(f"{BASE}/ready")
@access(AUTHENTICATED)
async def ready(request: web.Request) -> web.Response:
    operations = request.app.get(OPERATIONS_KEY)
    if operations is None or not operations.ready:
        raise AdminError("Broker is not ready", http_status=500)
    return _ok()


@routes.get(f"{BASE}/version")
@access(AUTHENTICATED)
async def version(request: web.Request) -> web.Response:
    return web.Response(text=_operations(request).version)


@routes.get(f"{BASE}/configuration")
@access(SUPERUSER)
async def dynamic_configuration_names(request: web.Request) -> web.Response:
    return json_response(_operations(request).dynamic.names())


@routes.get(f"{BASE}/configuration/values")
@access(SUPERUSER)
async def dynamic_configuration_values(request: web.Request) -> web.Response:
    return json_response(_operations(request).dynamic.overrides())


@routes.get(f"{BASE}/configuration/runtime")
@access(SUPERUSER)
async def runtime_configuration(request: web.Request) -> web.Response:
    return json_response(_operations(request).dynamic.runtime())


@routes.post(f"{BASE}/configuration/{{configName}}/{{configValue}}")
@access(SUPERUSER)
async def update_dynamic_configuration(request: web.Request) -> web.Response:
    info = request.match_info
    _operations(request).dynamic.update(info["configName"], info["configValue"])
    return no_content()


@routes.delete(f"{BASE}/configuration/{{configName}}")
@access(SUPERUSER)
async def delete_dynamic_configuration(request: web.Request) -> web.Response:
    _operations(request).dynamic.delete(request.match_info["configName"])
    return no_content()
