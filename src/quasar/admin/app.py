"""The admin REST application: ``create_admin_app(broker)``.

Every error becomes a JSON ``{"reason": ...}`` answer with the error's HTTP status,
as Pulsar's admin API answers; an unexpected exception is logged and answered with
500 rather than dropping the connection. Assertion failures are bugs and are not
caught (see the house rules). The same middleware counts each refusal of hostile
input (a body over ``REQUEST_BYTES_MAX``, an error a check tagged) in
``quasar_hostile_input_refused_total`` (``quasar.broker.hostile_input``).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web
from prometheus_client.registry import CollectorRegistry

from quasar.admin.access import AUTHENTICATED, access, authorization_middleware
from quasar.admin.api import AdminBroker
from quasar.admin.authentication import METRICS_PATHS, authentication_middleware
from quasar.admin.brokers import OPERATIONS_KEY
from quasar.admin.brokers import routes as broker_routes
from quasar.admin.cluster import CLUSTER_KEY, owner_redirects
from quasar.admin.cluster import routes as cluster_routes
from quasar.admin.corrupt_records import routes as corrupt_record_routes
from quasar.admin.dashboard import DASHBOARD_ASSET_PATHS, DASHBOARD_KEY
from quasar.admin.dashboard import routes as dashboard_routes
from quasar.admin.http import AUTHORIZATION_KEY, BROKER_KEY
from quasar.admin.lookup import routes as lookup_routes
from quasar.admin.namespaces import routes as namespace_routes
from quasar.admin.non_persistent_topics import routes as non_persistent_routes
from quasar.admin.openapi import routes as openapi_routes
from quasar.admin.permissions import routes as permission_routes
from quasar.admin.schemas import routes as schema_routes
from quasar.admin.tenants import routes as tenant_routes
from quasar.admin.topic_expiry import routes as topic_expiry_routes
from quasar.admin.topic_messages import routes as topic_message_routes
from quasar.admin.topic_ops import routes as topic_ops_routes
from quasar.admin.topics import routes as topic_routes
from quasar.admin.transactions import routes as transaction_routes
from quasar.admin.txn_batch_log import routes as txn_batch_log_routes
from quasar.admin.txn_gather import OWNERS_KEY, CoordinatorOwners
from quasar.auth import AuthenticationService, AuthorizationService
from quasar.broker.dashboard import DashboardSnapshot
from quasar.broker.hostile_input import HostileInputRefusals
from quasar.broker.operations import BrokerOperations
from quasar.cluster.member import ClusterMember
from quasar.errors import REFUSED_ADMIN_BODY_SIZE, QuasarError
from quasar.metrics import broker_registry
from quasar.metrics import http as metrics_http

__all__ = ["create_admin_app"]

log = logging.getLogger(__name__)

# Admin request bodies are small JSON documents; 1 MiB (aiohttp's default, stated
# here so the bound is visible) is far above any legitimate one.
REQUEST_BYTES_MAX = 1024 * 1024

# The broker's count of refused hostile input, which the error middleware adds to.
REFUSALS_KEY = web.AppKey("quasar.admin.refusals", HostileInputRefusals)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if isinstance(exc, web.HTTPRequestEntityTooLarge):  # over REQUEST_BYTES_MAX
            request.app[REFUSALS_KEY].count(REFUSED_ADMIN_BODY_SIZE)
        # Router answers (404 unknown path, 405 wrong method, 413 body too large)
        # get Pulsar's JSON shape too; keep headers such as Allow.
        headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
        return web.json_response(
            {"reason": exc.reason}, status=exc.status, headers=headers
        )
    except AssertionError:
        raise
    except QuasarError as exc:
        request.app[REFUSALS_KEY].counted(exc)  # a refusal of hostile input, if tagged
        # 501 and 503 are deliberate answers (a feature switched off, as Pulsar
        # answers the permission routes without authorization; transactions
        # disabled; the broker not ready yet), not failures: one line at debug, no
        # traceback, so a client polling them cannot fill the log.
        if exc.http_status in (501, 503):
            log.debug("admin %s %s: %s", request.method, request.path, exc)
        elif exc.http_status >= 500:
            log.exception("admin %s %s failed", request.method, request.path)
        return web.json_response(error_body(exc), status=exc.http_status)
    except Exception as exc:
        log.exception("admin %s %s failed unexpectedly", request.method, request.path)
        return web.json_response(
            {"reason": f"Internal server error: {exc}"}, status=500
        )


# /metrics is open unless authenticateMetricsEndpoint is set; then any role may read it.
@access(AUTHENTICATED)
async def _metrics(request: web.Request) -> web.StreamResponse:
    return await metrics_http.metrics(request)


def error_body(exc: BaseException) -> dict[str, str]:
    """The ``{"reason": ...}`` body Pulsar answers an error with."""
    reason = str(exc) or type(exc).__name__
    return {"reason": reason}


def create_admin_app(
    broker: AdminBroker,
    *,
    metrics: CollectorRegistry | None = None,
    authentication: AuthenticationService | None = None,
    authorization: AuthorizationService | None = None,
    authenticate_metrics: bool = False,
    operations: BrokerOperations | None = None,
    refusals: HostileInputRefusals | None = None,
    dashboard: DashboardSnapshot | None = None,
    cluster: ClusterMember | None = None,
    cluster_peer_headers: Mapping[str, str] | None = None,
    cluster_peer_tls: ssl.SSLContext | None = None,
) -> web.Application:
    """Build the aiohttp application serving Pulsar's ``/admin/v2`` subset.

    Run it with ``aiohttp.web.AppRunner`` on ``webServicePort``; routes are listed in
    ``docs/admin.md``. ``GET /metrics`` serves ``metrics``, the broker's registry;
    without one it serves a new ``broker_registry()`` (process series only).
    With ``authentication`` every other route (and ``/metrics`` too with
    ``authenticate_metrics``) needs credentials (``quasar.admin.authentication``);
    with an enabled ``authorization`` every route's access rule is checked
    (``quasar.admin.access``). ``operations`` answers ``/admin/v2/brokers``
    (``quasar.admin.brokers``); without it those routes answer 503. ``refusals``
    counts refused hostile input (the broker's, on ``metrics``; None: a private
    count nobody scrapes).
    (``quasar.admin.brokers``); without it those routes answer 503. ``dashboard``
    answers the web dashboard's data (``quasar.admin.dashboard``); its page and
    scripts are served without credentials, as they hold no data. ``cluster``
    (``quasar broker``): topic requests go to the bundle's owner, and the bundle and
    broker routes of ``quasar.admin.cluster`` are served; the transaction routes over
    every coordinator ask the other members with ``cluster_peer_headers`` (this
    broker's own ``Authorization``; ``quasar.admin.txn_gather``), over ``https://``
    with ``cluster_peer_tls`` (``brokerClientTlsEnabled``).
    """
    if authorization is None:
        authorization = AuthorizationService.allow_all()
    open_paths = frozenset() if authenticate_metrics else METRICS_PATHS
    open_paths |= DASHBOARD_ASSET_PATHS
    middlewares: list[Callable[..., Awaitable[web.StreamResponse]]] = [_errors_as_json]
    if authentication is not None:
        middlewares.append(authentication_middleware(authentication, open_paths))
    if authorization.enabled:
        middlewares.append(authorization_middleware(authorization, open_paths))
    if cluster is not None:
        middlewares.append(owner_redirects(cluster))
    app = web.Application(middlewares=middlewares, client_max_size=REQUEST_BYTES_MAX)
    app[BROKER_KEY] = broker
    app[AUTHORIZATION_KEY] = authorization
    app[REFUSALS_KEY] = refusals if refusals is not None else HostileInputRefusals()
    app[metrics_http.METRICS_REGISTRY_KEY] = (
        broker_registry() if metrics is None else metrics
    )
    if operations is not None:
        app[OPERATIONS_KEY] = operations
    if dashboard is not None:
        app[DASHBOARD_KEY] = dashboard
    app.add_routes(broker_routes)
    app.add_routes(tenant_routes)
    app.add_routes(namespace_routes)
    app.add_routes(topic_routes)
    app.add_routes(topic_ops_routes)
    app.add_routes(non_persistent_routes)
    app.add_routes(topic_message_routes)
    app.add_routes(topic_expiry_routes)
    app.add_routes(txn_batch_log_routes)
    app.add_routes(transaction_routes)
    app.add_routes(corrupt_record_routes)
    app.router.add_get("/metrics", _metrics)
    app.add_routes(permission_routes)
    app.add_routes(schema_routes)
    app.add_routes(dashboard_routes)
    app.add_routes(openapi_routes)
    app.add_routes(lookup_routes)
    if cluster is not None:
        app[CLUSTER_KEY] = cluster
        app.add_routes(cluster_routes)
        owners = CoordinatorOwners(cluster, cluster_peer_headers or {}, cluster_peer_tls)
        app[OWNERS_KEY] = owners

        async def close_owners(_: web.Application) -> None:
            await owners.close()

        app.on_cleanup.append(close_owners)
    return app
