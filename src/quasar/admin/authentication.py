"""Authentication of admin requests: an aiohttp middleware over
``AuthenticationService.authenticate_http``.

With authentication enabled, every request except ``GET /metrics`` (open in Pulsar
unless ``authenticateMetricsEndpoint`` is set) must carry credentials a provider
accepts: ``Authorization: Bearer <token>``, ``Authorization: Basic <base64>``, or a
TLS client certificate; otherwise the anonymous role is used if configured, else the
answer is 401 with Pulsar's ``{"reason": ...}`` body. The role is kept on the request
(``request_role``) for the authorization checks of the routes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from quasar.auth import AuthenticationService, Peer
from quasar.errors import AuthenticationError

__all__ = ["METRICS_PATHS", "authentication_middleware", "request_role"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Paths served without authentication unless authenticateMetricsEndpoint is set.
METRICS_PATHS = frozenset({"/metrics"})
_ROLE = web.RequestKey("quasar.auth.role", str)


def request_role(request: web.Request) -> str | None:
    """The authenticated role of the request (None: authentication is disabled)."""
    return request.get(_ROLE)


def authentication_middleware(
    service: AuthenticationService, open_paths: frozenset[str] = METRICS_PATHS
) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """The middleware authenticating requests with ``service``; ``open_paths`` are
    served to anyone."""

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in open_paths:
            return await handler(request)
        remote = request.remote or "unknown"
        transport = request.transport
        cert = transport.get_extra_info("peercert") if transport is not None else None
        peer = Peer(remote, cert or None)
        loop = asyncio.get_running_loop()
        try:
            # On the thread pool: a bcrypt check must not stall the event loop.
            state = await loop.run_in_executor(
                None, service.authenticate_http, request.headers, peer
            )
        except AuthenticationError as exc:
            log.warning("admin %s %s from %s: authentication failed: %s",
                        request.method, request.path, remote, exc)
            return web.json_response(
                {"reason": str(exc)}, status=401
            )
        request[_ROLE] = state.role
        return await handler(request)

    return authenticate
