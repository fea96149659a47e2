"""The admin API's OpenAPI 3.0 document, built from the routes the app serves.

``openapi_document(app)`` walks the application's route table and describes each
route with its entry in ``openapi_operations.OPERATIONS`` (query parameters, body,
success answer) and its path parameters typed by name
(``openapi_schemas.PATH_PARAMETERS``). Building from the served routes keeps the
document from drifting: a route without an entry, or an entry without a route, is
reported by ``undocumented_routes`` / ``unserved_operations``, which a test checks.
The document is served at ``GET /admin/v2/openapi.json`` to any authenticated role.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from quasar.admin.access import AUTHENTICATED, access
from quasar.admin.http import json_response
from quasar.admin.openapi_operations import (
    CLUSTER_OPERATIONS,
    OPERATIONS,
    Operation,
    QueryParameter,
)
from quasar.admin.openapi_schemas import COMPONENT_SCHEMAS, PATH_PARAMETERS, ref

__all__ = [
    "OPENAPI_PATH",
    "openapi_document",
    "routes",
    "served_operations",
    "undocumented_routes",
    "unserved_operations",
]

OPENAPI_PATH = "/admin/v2/openapi.json"
OPENAPI_VERSION = "3.0.3"

routes = web.RouteTableDef()

_PLACEHOLDER = re.compile(r"\{(\w+)\}")

# aiohttp adds a HEAD route beside every GET; it is not a separate operation.
_IMPLICIT_METHODS = frozenset({"HEAD"})


def served_operations(app: web.Application) -> list[str]:
    """``"METHOD /path"`` of every route ``app`` serves, in registration order."""
    served = []
    for route in app.router.routes():
        if route.method in _IMPLICIT_METHODS:
            continue
        info = route.resource.get_info() if route.resource is not None else {}
        path = info.get("path") or info.get("formatter")
        if path is None and "prefix" in info:
            # A static resource serves every file under its prefix.
            path = info["prefix"].rstrip("/") + "/{filename}"
        assert path is not None, f"route {route!r} has no path"
        served.append(f"{route.method} {path}")
    return served


def undocumented_routes(app: web.Application) -> list[str]:
    """Routes served by ``app`` that the document has no entry for."""
    return [
        key for key in served_operations(app)
        if key not in OPERATIONS and key not in CLUSTER_OPERATIONS
    ]


def unserved_operations(app: web.Application) -> list[str]:
    """Entries of the document for routes ``app`` does not serve."""
    served = set(served_operations(app))
    return sorted(key for key in OPERATIONS if key not in served)


def _query_parameter(parameter: QueryParameter) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": parameter.name,
        "in": "query",
        "required": False,
        "schema": parameter.schema,
    }
    if parameter.description:
        out["description"] = parameter.description
    return out


def _path_parameter(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": PATH_PARAMETERS[name]}


def _operation_object(
    method: str, path: str, tag: str, operation: Operation
) -> dict[str, Any]:
    answer = operation.answer
    success: dict[str, Any] = {"description": "Success"}
    if answer.media_type is not None:
        success["content"] = {answer.media_type: {"schema": answer.schema or {}}}
    responses: dict[str, Any] = {str(answer.status): success}
    if answer.empty_when_unset:
        responses["204"] = {"description": "No value set"}
    responses["default"] = {
        "description": "Error, with Pulsar's reason",
        "content": {"application/json": {"schema": ref("ErrorData")}},
    }
    parameters = [_path_parameter(name) for name in _PLACEHOLDER.findall(path)]
    parameters += [_query_parameter(q) for q in operation.query]
    out: dict[str, Any] = {
        "operationId": _operation_id(method, path),
        "summary": operation.summary,
        "tags": [tag],
        "parameters": parameters,
        "responses": responses,
    }
    if operation.body is not None:
        out["requestBody"] = {
            "required": operation.body_required,
            "content": {"application/json": {"schema": operation.body}},
        }
    return out


def _operation_id(method: str, path: str) -> str:
    words = re.sub(r"[{}]", "", path).strip("/").replace(".", "_").split("/")
    return method.lower() + "".join(w[:1].upper() + w[1:] for w in words if w)


def openapi_document(app: web.Application) -> dict[str, Any]:
    """The OpenAPI document of every route ``app`` serves.

    Raises:
        KeyError: a served route has no entry in ``OPERATIONS`` (a bug the tests catch).
    """
    paths: dict[str, dict[str, Any]] = {}
    for key in served_operations(app):
        method, path = key.split(" ", 1)
        tag, operation = OPERATIONS[key] if key in OPERATIONS else CLUSTER_OPERATIONS[key]
        paths.setdefault(path, {})[method.lower()] = _operation_object(
            method, path, tag, operation
        )
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "quasar admin REST API",
            "version": "v2",
            "description": (
                "Pulsar's admin REST API as quasar serves it. Errors answer "
                '{"reason": ...} with Pulsar\'s status.'
            ),
        },
        "paths": paths,
        "components": {"schemas": COMPONENT_SCHEMAS},
    }


@routes.get(OPENAPI_PATH)
@access(AUTHENTICATED)
async def openapi_json(request: web.Request) -> web.Response:
    return json_response(openapi_document(request.app))
