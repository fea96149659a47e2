"""Small request/response helpers shared by the admin route modules."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from quasar.admin.api import AdminBroker
from quasar.auth import AuthorizationService
from quasar.errors import (
    REFUSED_ADMIN_JSON_DEPTH,
    REFUSED_NAMESPACE_NAME,
    REFUSED_TOPIC_NAME,
    BadRequestError,
    InvalidResourceError,
    InvalidTopicName,
    ResourceNotFoundError,
    tag_refusal,
)
from quasar.protocol.namespace_name import (
    PERSISTENT,
    parse_namespace,
    parse_topic,
    validate_tenant,
)

BROKER_KEY = web.AppKey("quasar.admin.broker", AdminBroker)
AUTHORIZATION_KEY = web.AppKey("quasar.admin.authorization", AuthorizationService)


def broker_of(request: web.Request) -> AdminBroker:
    return request.app[BROKER_KEY]


def authorization_of(request: web.Request) -> AuthorizationService:
    return request.app[AUTHORIZATION_KEY]


async def read_json(request: web.Request, *, required: bool) -> Any:
    """The request body parsed as JSON; ``None`` for an empty optional body.

    Raises:
        BadRequestError: malformed JSON, or no body where one is required.
    """
    raw = await request.read()
    if not raw.strip():
        if required:
            raise BadRequestError("A JSON request body is required")
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequestError(f"Malformed JSON request body: {exc}") from None
    except RecursionError:
        # No admin body nests more than a few levels; the parser's own bound is hit
        # only by a body built to exhaust it.
        raise tag_refusal(
            BadRequestError("Malformed JSON request body: nested too deeply"),
            REFUSED_ADMIN_JSON_DEPTH,
        ) from None


def query_bool(request: web.Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter, read the way JAX-RS reads one: only "true" is true."""
    value = request.query.get(name)
    if value is None:
        return default
    return value.strip().lower() == "true"


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


def no_content() -> web.Response:
    """204, Pulsar's answer to a successful PUT/POST/DELETE."""
    return web.Response(status=204)


def tenant_param(request: web.Request) -> str:
    """The ``{tenant}`` path segment, validated (412 if invalid, tagged as a refusal
    of hostile input)."""
    try:
        return validate_tenant(request.match_info["tenant"])
    except InvalidResourceError as e:
        tag_refusal(e, REFUSED_NAMESPACE_NAME)
        raise


def namespace_param(request: web.Request) -> str:
    """``tenant/namespace`` from the path, validated (412 if invalid, tagged as a
    refusal of hostile input)."""
    namespace = f"{request.match_info['tenant']}/{request.match_info['namespace']}"
    try:
        parse_namespace(namespace)
    except InvalidResourceError as e:
        tag_refusal(e, REFUSED_NAMESPACE_NAME)
        raise
    return namespace


def existing_namespace(request: web.Request) -> str:
    """``namespace_param``, and 404 if the namespace does not exist."""
    namespace = namespace_param(request)
    if not broker_of(request).resources.namespaces.exists(namespace):
        raise ResourceNotFoundError("Namespace does not exist")
    return namespace


def topic_param(request: web.Request) -> str:
    """The full persistent topic name from the path, in an existing namespace.

    aiohttp has already percent-decoded the ``{topic}`` segment (``%2F`` included).

    Raises:
        InvalidTopicName, InvalidResourceError: invalid name (412, tagged as a
            refusal of hostile input).
        ResourceNotFoundError: the namespace does not exist (404).
    """
    namespace = namespace_param(request)
    try:
        topic = str(
            parse_topic(f"{PERSISTENT}://{namespace}/{request.match_info['topic']}")
        )
    except InvalidTopicName as e:
        tag_refusal(e, REFUSED_TOPIC_NAME)
        raise
    existing_namespace(request)
    return topic
