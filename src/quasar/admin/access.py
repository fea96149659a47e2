"""Who may call each admin route: one access rule per route, checked before it runs.

Every route handler is declared with the rule Pulsar applies to it, as a decorator
under its route decorator::

    @routes.delete(TOPIC)
    @access(TENANT_ADMIN)
    async def delete_topic(request): ...

With authorization enabled, ``authorization_middleware`` evaluates the route's rule
with the request's role (from ``quasar.admin.authentication``) before the handler
runs, so a refused request changes nothing. A route without a rule is refused (and
logged as a bug): a route added without thinking about access fails closed.
A refusal is 401 with Pulsar's reason, as Pulsar's admin API answers it.

The rules:

* ``SUPERUSER``: a role in ``superUserRoles``;
* ``TENANT_ADMIN``: a super-user or a role in the ``{tenant}``'s ``adminRoles``;
* ``namespace_grant(action)``: a tenant admin or a role granted ``action`` on the
  ``{tenant}/{namespace}``;
* ``TOPIC_LOOKUP``, ``TOPIC_CONSUME``: the topic's lookup (produce or consume) or
  consume right; ``TOPIC_CONSUME`` also passes the ``{subscription}``'s rules;
* ``AUTHENTICATED``: any authenticated role; the handler narrows what it answers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiohttp import web

from quasar.admin.authentication import request_role
from quasar.auth import AuthorizationService
from quasar.errors import NotAuthorizedError
from quasar.protocol.namespace_name import PERSISTENT, parse_topic

__all__ = [
    "AUTHENTICATED",
    "SUPERUSER",
    "TENANT_ADMIN",
    "TOPIC_CONSUME",
    "TOPIC_LOOKUP",
    "AccessRule",
    "access",
    "authorization_middleware",
    "namespace_grant",
    "rule_of",
]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
H = TypeVar("H", bound=Handler)

# A rule answers whether the request's role may call the route; it may raise the
# admin errors of an invalid name in the path (412), as the handler itself would.
AccessRule = Callable[[web.Request, AuthorizationService, "str | None"], bool]

_RULE_ATTRIBUTE = "__quasar_access_rule__"

# Pulsar's reasons, by rule.
_SUPERUSER_REASON = "This operation requires super-user access"
_TENANT_REASON = "Don't have permission to administrate resources on this tenant"


def access(rule: AccessRule) -> Callable[[H], H]:
    """Declare ``rule`` as the access rule of the decorated route handler."""

    def declare(handler: H) -> H:
        setattr(handler, _RULE_ATTRIBUTE, rule)
        return handler

    return declare


def rule_of(handler: object) -> AccessRule | None:
    """The access rule declared on a route handler, if any."""
    rule = getattr(handler, _RULE_ATTRIBUTE, None)
    return rule if callable(rule) else None


def SUPERUSER(  # noqa: N802 - used as a constant in route declarations
    request: web.Request, authorization: AuthorizationService, role: str | None
) -> bool:
    return authorization.is_superuser(role)


def TENANT_ADMIN(  # noqa: N802
    request: web.Request, authorization: AuthorizationService, role: str | None
) -> bool:
    return authorization.is_tenant_admin(request.match_info["tenant"], role)


def AUTHENTICATED(  # noqa: N802
    request: web.Request, authorization: AuthorizationService, role: str | None
) -> bool:
    return role is not None or authorization.is_superuser(role)


def namespace_grant(action: str) -> AccessRule:
    """A tenant admin, or a role granted ``action`` on the whole namespace."""

    def rule(
        request: web.Request, authorization: AuthorizationService, role: str | None
    ) -> bool:
        info = request.match_info
        namespace = f"{info['tenant']}/{info['namespace']}"
        return authorization.allows_in_namespace(namespace, role, action)

    return rule


def _topic(request: web.Request) -> str:
    info = request.match_info
    return f"{PERSISTENT}://{info['tenant']}/{info['namespace']}/{info['topic']}"


def TOPIC_LOOKUP(  # noqa: N802
    request: web.Request, authorization: AuthorizationService, role: str | None
) -> bool:
    return authorization.can_lookup(parse_topic(_topic(request)), role)


def TOPIC_CONSUME(  # noqa: N802
    request: web.Request, authorization: AuthorizationService, role: str | None
) -> bool:
    subscription = request.match_info.get("subscription")
    return authorization.can_consume(parse_topic(_topic(request)), role, subscription)


def _reason(rule: AccessRule, request: web.Request) -> str:
    if rule is SUPERUSER:
        return _SUPERUSER_REASON
    if rule is TENANT_ADMIN:
        return _TENANT_REASON
    return f"Client is not authorized to perform {request.method} {request.path}"


def authorization_middleware(
    authorization: AuthorizationService, open_paths: frozenset[str]
) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """The middleware applying each route's rule (install it after authentication);
    ``open_paths`` are served to anyone, as authentication lets them through."""

    @web.middleware
    async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
        match = request.match_info
        # No such route (the router answers 404/405), or a path open to all.
        if match.http_exception is not None or request.path in open_paths:
            return await handler(request)
        rule = rule_of(match.handler)
        role = request_role(request)
        if rule is None:
            log.error("admin route %s %s has no access rule: refused",
                      request.method, match.route.resource)
            raise NotAuthorizedError(_SUPERUSER_REASON)
        if not rule(request, authorization, role):
            log.warning("admin %s %s from %s: role %r refused",
                        request.method, request.path, request.remote, role)
            raise NotAuthorizedError(_reason(rule, request))
        return await handler(request)

    return authorize
