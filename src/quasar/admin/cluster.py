"""The admin API of a cluster member (``quasar broker``): redirects to a topic's
owner, bundle unloads, and the live brokers.

* Requests on one topic (``/admin/v2/{persistent,non-persistent}/{tenant}/{ns}/
  {topic}/...``) are served by the broker owning the topic's bundle; any other
  broker answers 307 with the same path and query on the owner's web URL and
  ``authoritative=true``, as Pulsar redirects them. An unowned bundle goes to the
  load manager's choice (acquired here when that is this broker, or when the request
  is already ``authoritative``). Requests on a partitioned topic's base name and its
  ``/partitions`` metadata are served by any broker.
* ``PUT /admin/v2/namespaces/{tenant}/{ns}/{bundle}/unload``: the owner closes the
  bundle's topics and gives the bundle up; another broker answers 307 to the owner;
  an unowned bundle needs nothing (204). ``PUT .../{ns}/unload`` unloads every
  bundle of the namespace, here and, through their own unload route, on the
  brokers that own the others.
* ``GET /admin/v3/transactions/clientTransactions/{clientName}``: the coordinators
  this member does not host are asked of the members that do
  (``?coordinatorId=n``, with the request's credentials), so any member answers for
  every coordinator.
* ``GET /admin/v2/brokers/{cluster}``: the live brokers' ids;
  ``GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces``: the bundles a
  broker owns (this broker answers for itself; for another, 307 to it).

Without a cluster member (``quasar standalone``) none of this is installed.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web

from quasar.admin.access import SUPERUSER, access
from quasar.admin.authentication import request_role
from quasar.admin.http import (
    authorization_of,
    broker_of,
    existing_namespace,
    json_response,
    no_content,
)
from quasar.cluster.member import ClusterMember, OwnedBundle
from quasar.errors import AdminError, QuasarError, ResourceNotFoundError, TopicNotFound
from quasar.protocol.namespace_name import parse_topic
from quasar.protocol.topic_name import TopicName
from quasar.resources.bundles import BundleRange

__all__ = [
    "CLUSTER_KEY",
    "gather_client_transactions",
    "owner_redirects",
    "routes",
    "unload_namespace_bundles",
]

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
# Coordinator n is partition n of this topic, hosted by the owner of its bundle.
_COORDINATOR_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _topic_of(request: web.Request, domain: str) -> TopicName | None:
    info = request.match_info
    try:
        return parse_topic(f"{domain}://{info['tenant']}/{info['namespace']}/{info['topic']}")
    except QuasarError:
        return None  # the route's own handler answers the bad name


def _location(base: str, request: web.Request) -> str:
    return base.rstrip("/") + str(request.rel_url.update_query(authoritative="true"))


def owner_redirects(member: ClusterMember) -> Callable[..., Awaitable[web.StreamResponse]]:
    """The middleware that sends a topic's admin requests to its owner (307)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        resource = request.match_info.route.resource
        match = _TOPIC_ROUTE.match(resource.canonical if resource is not None else "")
        if match is None or (match.group(2) or "") in _ANY_BROKER_SUFFIXES:
            return await handler(request)
        name = _topic_of(request, match.group(1))
        service = broker_of(request)
        if name is None or (
            not name.is_partition and service.resources.partitioned_topics.get(name.full)
        ):
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


async def gather_client_transactions(
    request: web.Request,
    member: ClusterMember,
    answer: dict[str, Any],
    coordinator_id: int | None,
) -> dict[str, Any]:
    """``answer`` (this member's ``clientTransactions``) completed with the
    coordinators it does not host, each asked of its owner with the request's
    credentials. A coordinator that cannot be asked stays in
    ``unavailableCoordinators``. A request for one coordinator (``coordinator_id``)
    that another member hosts is redirected there (307), as a topic's requests are.
    """
    missing = list(answer["unavailableCoordinators"])
    if not missing:
        return answer
    if coordinator_id is not None:
        owner = member.admin_target(
            _coordinator_topic(coordinator_id), authoritative=False, secure=request.secure
        )
        if owner is not None:
            raise web.HTTPTemporaryRedirect(_location(owner, request))
        # The lookup gave this member the coordinator's bundle just now.
        return await _local_part(request, coordinator_id)
    name = request.match_info["clientName"]
    headers = {k: v for k, v in request.headers.items() if k.lower() == "authorization"}
    timeout = aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        parts = await asyncio.gather(*(
            _coordinator_part(request, member, session, headers, name, tc_id)
            for tc_id in missing
        ))
    unavailable = []
    for tc_id, part in zip(missing, parts, strict=True):
        if part is None:
            unavailable.append(tc_id)
            continue
        answer["open"].extend(part["open"])
        answer["terminated"].extend(part["terminated"])
    answer["open"].sort(key=lambda t: (t["mostSigBits"], t["leastSigBits"]))
    answer["terminated"].sort(
        key=lambda t: (t["endTime"], t["mostSigBits"], t["leastSigBits"])
    )
    answer["unavailableCoordinators"] = sorted(unavailable)
    return answer


async def _local_part(request: web.Request, tc_id: int) -> dict[str, Any]:
    role = request_role(request)
    return await broker_of(request).client_transactions(
        request.match_info["clientName"], role=role,
        superuser=authorization_of(request).is_superuser(role), coordinator_id=tc_id,
    )


def _entries(value: Any, more: tuple[str, ...]) -> bool:
    """Whether ``value`` is a list of transaction entries with integer ids (and
    integer ``more`` fields)."""
    return isinstance(value, list) and all(
        isinstance(t, dict)
        and all(type(t.get(k)) is int for k in ("mostSigBits", "leastSigBits", *more))
        for t in value
    )


def _coordinator_topic(tc_id: int) -> TopicName:
    return TopicName.parse(f"{_COORDINATOR_ASSIGN}-partition-{tc_id}")


async def _coordinator_part(
    request: web.Request,
    member: ClusterMember,
    session: aiohttp.ClientSession,
    headers: dict[str, str],
    name: str,
    tc_id: int,
) -> dict[str, Any] | None:
    """Coordinator ``tc_id``'s part of the answer, from the member hosting it; None
    when it cannot be had (no owner reachable, or the owner cannot load it)."""
    try:
        owner = member.admin_target(
            _coordinator_topic(tc_id), authoritative=False, secure=request.secure
        )
        if owner is None:
            # The lookup gave this member the coordinator's bundle just now.
            part = await _local_part(request, tc_id)
        else:
            url = (
                f"{owner.rstrip('/')}/admin/v3/transactions/clientTransactions/"
                f"{quote(name, safe='')}"
            )
            async with session.get(
                url, params={"coordinatorId": str(tc_id)}, headers=headers,
                allow_redirects=False,
            ) as resp:
                if resp.status != 200:
                    log.info("client transactions: coordinator %d on %s answered %d",
                             tc_id, owner, resp.status)
                    return None
                part = await resp.json(content_type=None)
        if not isinstance(part, dict) or part.get("unavailableCoordinators"):
            return None
        live, ended = part["open"], part["terminated"]
        # Another member's answer is checked as any input: the merge sorts on these.
        if not (_entries(live, ()) and _entries(ended, ("endTime",))):
            log.info("client transactions: coordinator %d answered a malformed body", tc_id)
            return None
        return {"open": live, "terminated": ended}
    except (QuasarError, aiohttp.ClientError, OSError, TimeoutError, KeyError,
            TypeError, ValueError) as exc:
        log.info("client transactions: coordinator %d cannot be asked: %s", tc_id, exc)
        return None


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
