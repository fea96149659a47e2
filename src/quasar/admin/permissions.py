"""Permission grants: Pulsar's ``.../permissions`` endpoints on namespaces and topics.

::

    GET    /admin/v2/namespaces/{t}/{ns}/permissions             {role: [actions]}
    POST   /admin/v2/namespaces/{t}/{ns}/permissions/{role}      ["produce", "consume"]
    DELETE /admin/v2/namespaces/{t}/{ns}/permissions/{role}
    GET    /admin/v2/namespaces/{t}/{ns}/permissions/subscription   {sub: [roles]}
    POST   /admin/v2/namespaces/{t}/{ns}/permissions/subscription/{sub}   ["r1", "r2"]
    DELETE /admin/v2/namespaces/{t}/{ns}/permissions/{sub}/{role}
    GET    /admin/v2/namespaces/{t}/{ns}/subscriptionAuthMode    "None" | "Prefix"
    POST   /admin/v2/namespaces/{t}/{ns}/subscriptionAuthMode    "Prefix"
    GET    /admin/v2/persistent/{t}/{ns}/{topic}/permissions     {role: [actions]}
    POST   /admin/v2/persistent/{t}/{ns}/{topic}/permissions/{role}   ["consume"]
    DELETE /admin/v2/persistent/{t}/{ns}/{topic}/permissions/{role}

Actions are Pulsar's AuthAction names (``produce``, ``consume``, ``functions``,
``sources``, ``sinks``, ``packages``); a grant replaces the role's earlier one. A
topic's permissions list its namespace's grants with the topic's own added, as
Pulsar's does. Only tenant admins may read or change grants; changing them answers
501 while ``authorizationEnabled`` is off, since they would have no effect.
Grants are kept in the namespace's policies (``auth_policies``) and hold from the
next request on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiohttp import web

from quasar.admin.access import TENANT_ADMIN, access
from quasar.admin.http import (
    authorization_of,
    broker_of,
    existing_namespace,
    json_response,
    no_content,
    read_json,
    topic_param,
)
from quasar.errors import AdminError, InvalidValueError, PreconditionFailedError
from quasar.resources.models import (
    SUBSCRIPTION_AUTH_MODES,
    AuthPolicies,
    Grants,
    Policies,
    auth_actions,
)

routes = web.RouteTableDef()

NS = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"


def _enabled(request: web.Request) -> None:
    """Raises 501 when grants would have no effect."""
    if not authorization_of(request).enabled:
        raise AdminError("Authorization is not enabled", http_status=501)


def _name(request: web.Request, key: str) -> str:
    value = request.match_info[key]
    if not value.strip():
        raise InvalidValueError(f"{key} must not be blank")
    return value


def _change_auth(
    request: web.Request, namespace: str, change: Callable[[AuthPolicies], AuthPolicies]
) -> None:
    def apply(policies: Policies) -> Policies:
        return replace(policies, auth_policies=change(policies.auth_policies))

    broker_of(request).resources.namespaces.update(namespace, apply)


def _auth_policies(request: web.Request, namespace: str) -> AuthPolicies:
    return broker_of(request).resources.namespaces.get(namespace).auth_policies


def _grants(auth: AuthPolicies, topic: str | None) -> Grants:
    """The grants of the namespace (``topic`` None) or of one topic."""
    return auth.namespace_auth if topic is None else auth.destination_auth.get(topic, {})


def _with_grants(auth: AuthPolicies, topic: str | None, grants: Grants) -> AuthPolicies:
    """``auth`` with the namespace's (``topic`` None) or one topic's grants replaced;
    a topic left without grants is dropped from ``destination_auth``."""
    if topic is None:
        return replace(auth, namespace_auth=grants)
    destination = {t: g for t, g in auth.destination_auth.items() if t != topic}
    if grants:
        destination[topic] = grants
    return replace(auth, destination_auth=destination)


async def _grant(request: web.Request, namespace: str, topic: str | None) -> web.Response:
    """Replace the path's role's grant on the namespace or topic with the body's."""
    role = _name(request, "role")
    actions = auth_actions(await read_json(request, required=True))
    _change_auth(
        request,
        namespace,
        lambda auth: _with_grants(auth, topic, {**_grants(auth, topic), role: actions}),
    )
    return no_content()


def _revoke(request: web.Request, namespace: str, topic: str | None, role: str) -> web.Response:
    """Remove ``role``'s grant on the namespace or topic."""
    _change_auth(
        request,
        namespace,
        lambda auth: _with_grants(
            auth, topic, {r: a for r, a in _grants(auth, topic).items() if r != role}
        ),
    )
    return no_content()


def _roles(body: Any) -> frozenset[str]:
    if not isinstance(body, list) or not all(
        isinstance(role, str) and role.strip() for role in body
    ):
        raise InvalidValueError("roles must be a JSON list of non-blank strings")
    return frozenset(body)


# -- namespaces ------------------------------------------------------------------------
@routes.get(NS + "/permissions")
@access(TENANT_ADMIN)
async def get_namespace_permissions(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    return json_response(_auth_policies(request, namespace).to_json()["namespace_auth"])


@routes.post(NS + "/permissions/{role}")
@access(TENANT_ADMIN)
async def grant_on_namespace(request: web.Request) -> web.Response:
    _enabled(request)
    return await _grant(request, existing_namespace(request), None)


@routes.delete(NS + "/permissions/{role}")
@access(TENANT_ADMIN)
async def revoke_on_namespace(request: web.Request) -> web.Response:
    _enabled(request)
    namespace = existing_namespace(request)
    return _revoke(request, namespace, None, _name(request, "role"))


@routes.get(NS + "/permissions/subscription")
@access(TENANT_ADMIN)
async def get_subscription_permissions(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    return json_response(
        _auth_policies(request, namespace).to_json()["subscription_auth_roles"]
    )


@routes.post(NS + "/permissions/subscription/{subscription}")
@access(TENANT_ADMIN)
async def grant_on_subscription(request: web.Request) -> web.Response:
    _enabled(request)
    namespace = existing_namespace(request)
    subscription = _name(request, "subscription")
    roles = _roles(await read_json(request, required=True))

    def grant(auth: AuthPolicies) -> AuthPolicies:
        subs = {**auth.subscription_auth_roles, subscription: roles}
        return replace(auth, subscription_auth_roles=subs)

    _change_auth(request, namespace, grant)
    return no_content()


@routes.delete(NS + "/permissions/{subscription}/{role}")
@access(TENANT_ADMIN)
async def revoke_on_subscription(request: web.Request) -> web.Response:
    _enabled(request)
    namespace = existing_namespace(request)
    subscription = _name(request, "subscription")
    role = _name(request, "role")

    def revoke(auth: AuthPolicies) -> AuthPolicies:
        subs = dict(auth.subscription_auth_roles)
        remaining = subs.get(subscription, frozenset()) - {role}
        if remaining:
            subs[subscription] = remaining
        else:
            subs.pop(subscription, None)
        return replace(auth, subscription_auth_roles=subs)

    _change_auth(request, namespace, revoke)
    return no_content()


@routes.get(NS + "/subscriptionAuthMode")
@access(TENANT_ADMIN)
async def get_subscription_auth_mode(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    mode = broker_of(request).resources.namespaces.get(namespace).subscription_auth_mode
    return json_response(mode)


@routes.post(NS + "/subscriptionAuthMode")
@access(TENANT_ADMIN)
async def set_subscription_auth_mode(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    mode = await read_json(request, required=True)
    if mode not in SUBSCRIPTION_AUTH_MODES:
        raise InvalidValueError(
            f"subscriptionAuthMode must be one of {', '.join(SUBSCRIPTION_AUTH_MODES)}"
        )
    broker_of(request).resources.namespaces.update(
        namespace, lambda p: replace(p, subscription_auth_mode=mode)
    )
    return no_content()


# -- topics ----------------------------------------------------------------------------
@routes.get(TOPIC + "/permissions")
@access(TENANT_ADMIN)
async def get_topic_permissions(request: web.Request) -> web.Response:
    topic = topic_param(request)
    namespace = existing_namespace(request)
    auth = _auth_policies(request, namespace)
    merged = dict(auth.namespace_auth)
    for role, actions in auth.destination_auth.get(topic, {}).items():
        merged[role] = merged.get(role, frozenset()) | actions
    return json_response(AuthPolicies(namespace_auth=merged).to_json()["namespace_auth"])


@routes.post(TOPIC + "/permissions/{role}")
@access(TENANT_ADMIN)
async def grant_on_topic(request: web.Request) -> web.Response:
    _enabled(request)
    topic = topic_param(request)
    return await _grant(request, existing_namespace(request), topic)


@routes.delete(TOPIC + "/permissions/{role}")
@access(TENANT_ADMIN)
async def revoke_on_topic(request: web.Request) -> web.Response:
    _enabled(request)
    topic = topic_param(request)
    namespace = existing_namespace(request)
    role = _name(request, "role")
    if role not in _auth_policies(request, namespace).destination_auth.get(topic, {}):
        # As Pulsar: a namespace-level grant cannot be revoked on one topic.
        raise PreconditionFailedError(
            f"Permissions for role {role} are not set at the topic level"
        )
    return _revoke(request, namespace, topic, role)
