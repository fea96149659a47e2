"""The admin API of a cluster member (``quasar broker``): redirects to a topic's
owner, bundle unloads, and the live brokers.

* Requests on one topic (``/admin/v2/{persistent,non-persistent}/{tenant}/{ns}/
  {topic}/...``) are served by the broker owning the topic's bundle; any other
  broker answers 307 with the same path and query on the owner's web URL and
  ``authoritative=true``, as Pulsar redirects them. An unowned bundle goes to the
  load manager's choice (acquired here when that is this broker, or when the request
  is already ``authoritative``). Requests on a partitioned topic's base name and its
  ``/partitions`` metadata are served by any broker. The transaction routes about one
  coordinator or one topic's buffer or pending acks go to that coordinator's or
  topic's owner the same way (``quasar.admin.txn_routing``).
* ``PUT /admin/v2/namespaces/{tenant}/{ns}/{bundle}/unload``: the owner closes the
  bundle's topics and gives the bundle up; another broker answers 307 to the owner;
  an unowned bundle needs nothing (204). ``PUT .../{ns}/unload`` unloads every
  bundle of the namespace, here and, through their own unload route, on the
  brokers that own the others.
* ``PUT /admin/v2/namespaces/{tenant}/{ns}/{bundle}/split?unload=&splitAlgorithmName=``:
  the owner splits the bundle in two (``ClusterMember.split``); another broker
  answers 307 to the owner; an unowned bundle is acquired by the broker asked, which
  then splits it. An unknown algorithm is refused with 412, as Pulsar does.
* ``GET /admin/v2/brokers/{cluster}``: the live brokers' ids;
  ``GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces``: the bundles a
  broker owns (this broker answers for itself; for another, 307 to it).

Without a cluster member (``quasar standalone``) none of this is installed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web

from quasar.admin.access import SUPERUSER, access
from quasar.admin.http import broker_of, existing_namespace, json_response, no_content
from quasar.admin.txn_routing import transaction_route_topic
from quasar.cluster.member import ClusterMember, OwnedBundle
from quasar.errors import (
    AdminError,
    PreconditionFailedError,
    QuasarError,
    ResourceNotFoundError,
    ServiceNotReady,
    TopicNotFound,
)
from quasar.protocol.namespace_name import parse_topic
from quasar.protocol.topic_name import TopicName
from quasar.resources.bundles import SPLIT_ALGORITHMS, BundleRange

__all__ = ["CLUSTER_KEY", "owner_redirects", "routes", "unload_namespace_bundles"]

log = logging.getLogger(__name__)

CLUSTER_KEY = web.AppKey("quasar.admin.cluster", ClusterMember)
routes = web.RouteTableDef()

# Routes on one topic, by their declared path (not the request's, so that a
# namespace route such as ``.../{namespace}/partitioned`` is never taken for one).
_TOPIC_ROUTE = re.compile(
    r"^/admin/v2/(persistent|non-persistent)/\{tenant\}/\{namespace\}/\{topic\}(/.*)?$"
)
# Served by any broker: the partitioned-topic metadata.
_ANY_BROKER_SUFFIXES = ("/partitions",)
# Bound on how long unloading a bundle on its owner may take.
FORWARD_TIMEOUT_S = 30.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _topic_of(request: web.Request, domain: str) -> TopicName | None:
    info = request.match_info
    try:
        return parse_topic(f"{domain}://{info['tenant']}/{info['namespace']}/{info['topic']}")
    except QuasarError:
        return None  # the route's own handler answers the bad name


def _location(base: str, request: web.Request) -> str:
    return base.rstrip("/") + str(request.rel_url.update_query(authoritative="true"))


def _admin_v2_topic(request: web.Request, canonical: str) -> TopicName | None:
    """The topic of an ``/admin/v2`` topic route, unless any broker serves it."""
    match = _TOPIC_ROUTE.match(canonical)
    if match is None or (match.group(2) or "") in _ANY_BROKER_SUFFIXES:
        return None
    return _topic_of(request, match.group(1))


def owner_redirects(member: ClusterMember) -> Callable[..., Awaitable[web.StreamResponse]]:
    """The middleware that sends a topic's admin requests, and the transaction
    requests about one coordinator or topic (``quasar.admin.txn_routing``), to the
    owner (307)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        resource = request.match_info.route.resource
        canonical = resource.canonical if resource is not None else ""
        name = _admin_v2_topic(request, canonical) or transaction_route_topic(
            request, canonical
        )
        if name is None:
            return await handler(request)
        service = broker_of(request)
        if not name.is_partition and service.resources.partitioned_topics.get(name.full):
            return await handler(request)
        authoritative = request.query.get("authoritative", "false").lower() == "true"
        try:
            target = member.admin_target(name, authoritative, secure=request.secure)
        except (ResourceNotFoundError, TopicNotFound):
            return await handler(request)  # no such namespace: the handler's 404
        if target is None:
            return await handler(request)
        raise web.HTTPTemporaryRedirect(_location(target, request))

    return middleware


def _bundle_param(request: web.Request, member: ClusterMember) -> OwnedBundle:
    namespace = existing_namespace(request)
    bundle = BundleRange.parse(request.match_info["bundle"])
    if not member.bundles(namespace).contains(bundle):
        raise ResourceNotFoundError(f"Bundle {namespace}/{bundle.name} does not exist")
    return namespace, bundle


@routes.put("/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload")
@access(SUPERUSER)
async def unload_bundle(request: web.Request) -> web.Response:
    member = request.app[CLUSTER_KEY]
    owned = _bundle_param(request, member)
    if await member.unload(owned):
        return no_content()
    owner = member.owner_http_url(owned, secure=request.secure)
    if owner is None:
        return no_content()  # nobody serves it: nothing to unload
    raise web.HTTPTemporaryRedirect(_location(owner, request))


@routes.put("/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split")
@access(SUPERUSER)
async def split_bundle(request: web.Request) -> web.Response:
    member = request.app[CLUSTER_KEY]
    owned = _bundle_param(request, member)
    algorithm = request.query.get("splitAlgorithmName") or (
        member.settings.default_namespace_bundle_split_algorithm
    )
    if algorithm not in SPLIT_ALGORITHMS:
        raise PreconditionFailedError(
            "Unsupported namespace bundle split algorithm, supported algorithms are "
            f"{list(SPLIT_ALGORITHMS)}"
        )
    if request.can_read_body and await request.read() not in (b"", b"null", b"[]"):
        # Pulsar's body lists split boundaries for specified_positions_divide.
        raise PreconditionFailedError(
            "Split boundaries in the request body are not supported (only "
            f"{list(SPLIT_ALGORITHMS)})"
        )
    unload = request.query.get("unload", "false").lower() == "true"
    member.acquire(owned)  # when nobody owns it, the broker asked takes it to split it
    if await member.split(owned, algorithm, unload) is not None:
        return no_content()
    owner = member.owner_http_url(owned, secure=request.secure)
    if owner is None:
        raise ServiceNotReady(f"Bundle {owned[0]}/{owned[1].name} changed hands; retry")
    raise web.HTTPTemporaryRedirect(_location(owner, request))


async def unload_namespace_bundles(request: web.Request, namespace: str) -> None:
    """Unload every bundle of ``namespace``: those owned here directly, the others
    on their owners (the same request's credentials go along).

    Raises:
        AdminError: an owner answered the unload with an error (its status).
    """
    member = request.app[CLUSTER_KEY]
    for bundle in member.bundles(namespace).ranges():
        owned = (namespace, bundle)
        if await member.unload(owned):
            continue
        owner = member.owner_http_url(owned, secure=request.secure)
        if owner is None:
            continue
        url = f"{owner.rstrip('/')}/admin/v2/namespaces/{namespace}/{bundle.name}/unload"
        headers = {
            k: v for k, v in request.headers.items() if k.lower() == "authorization"
        }
        timeout = aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.put(url, headers=headers) as answer:
                if answer.status >= 300:
                    raise AdminError(
                        f"unloading {namespace}/{bundle.name} on {owner}: "
                        f"{answer.status} {await answer.text()}",
                        http_status=answer.status if answer.status >= 400 else 500,
                    )


@routes.get("/admin/v2/brokers/{cluster}")
@access(SUPERUSER)
async def active_brokers(request: web.Request) -> web.Response:
    member = request.app[CLUSTER_KEY]
    _require_cluster(request, member)
    return json_response([b.broker_id for b in member.registry.live_brokers()])


@routes.get("/admin/v2/brokers/{cluster}/{broker}/ownedNamespaces")
@access(SUPERUSER)
async def owned_namespaces(request: web.Request) -> web.Response:
    member = request.app[CLUSTER_KEY]
    _require_cluster(request, member)
    broker_id = request.match_info["broker"]
    if broker_id != member.broker_id:
        for b in member.registry.live_brokers():
            if b.broker_id == broker_id and b.urls.http_url is not None:
                raise web.HTTPTemporaryRedirect(_location(b.urls.http_url, request))
        raise ResourceNotFoundError(f"Broker {broker_id} is not a live broker")
    return json_response({
        f"{namespace}/{bundle.name}": {
            "broker_assignment": "shared",
            "is_controlled": False,
            "is_active": True,
        }
        for namespace, bundle in sorted(member.owned)
    })


def _require_cluster(request: web.Request, member: ClusterMember) -> None:
    cluster = request.match_info["cluster"]
    if cluster != broker_of(request).cluster_name:
        raise ResourceNotFoundError(f"Cluster {cluster} does not exist")
