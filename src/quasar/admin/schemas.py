"""``/admin/v2/schemas/{tenant}/{namespace}/{topic}``: a topic's schema registry.

Pulsar's paths and JSON (``quasar.broker.schema_admin`` has the shapes). Reading a
schema needs the topic's lookup right (produce or consume), as a client's GET_SCHEMA
does; uploading, deleting and testing schemas are a tenant admin's.
"""

from __future__ import annotations

from aiohttp import web

from quasar.admin.access import TENANT_ADMIN, TOPIC_LOOKUP, access
from quasar.admin.http import broker_of, json_response, read_json, topic_param
from quasar.errors import REFUSED_SCHEMA_DEFINITION, BadRequestError, tag_refusal

routes = web.RouteTableDef()

SCHEMAS = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"


def _version(request: web.Request) -> int:
    raw = request.match_info["version"]
    # Versions are Java longs; anything else cannot name one.
    if not raw.isdigit() or len(raw) > 19:
        raise tag_refusal(
            BadRequestError(f"Invalid schema version: {raw!r}"), REFUSED_SCHEMA_DEFINITION
        )
    return int(raw)


@routes.get(SCHEMAS + "/schema")
@access(TOPIC_LOOKUP)
async def get_schema(request: web.Request) -> web.Response:
    topic = topic_param(request)
    return json_response(broker_of(request).schemas.get(topic))


@routes.get(SCHEMAS + "/schema/{version}")
@access(TOPIC_LOOKUP)
async def get_schema_version(request: web.Request) -> web.Response:
    topic = topic_param(request)
    return json_response(broker_of(request).schemas.get(topic, _version(request)))


@routes.get(SCHEMAS + "/schemas")
@access(TOPIC_LOOKUP)
async def get_all_schemas(request: web.Request) -> web.Response:
    topic = topic_param(request)
    return json_response(broker_of(request).schemas.all_versions(topic))


@routes.post(SCHEMAS + "/schema")
@access(TENANT_ADMIN)
async def upload_schema(request: web.Request) -> web.Response:
    topic = topic_param(request)
    payload = await read_json(request, required=True)
    return json_response(broker_of(request).schemas.upload(topic, payload))


@routes.delete(SCHEMAS + "/schema")
@access(TENANT_ADMIN)
async def delete_schema(request: web.Request) -> web.Response:
    topic = topic_param(request)
    return json_response(broker_of(request).schemas.delete(topic))


@routes.post(SCHEMAS + "/compatibility")
@access(TENANT_ADMIN)
async def test_compatibility(request: web.Request) -> web.Response:
    topic = topic_param(request)
    payload = await read_json(request, required=True)
    return json_response(broker_of(request).schemas.compatibility(topic, payload))


@routes.post(SCHEMAS + "/version")
@access(TENANT_ADMIN)
async def get_version_by_schema(request: web.Request) -> web.Response:
    topic = topic_param(request)
    payload = await read_json(request, required=True)
    return json_response(broker_of(request).schemas.version_of(topic, payload))
