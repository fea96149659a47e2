"""A cluster member's way to ask every transaction coordinator's owner.

The transaction routes over every coordinator (``coordinatorStats`` without an id,
``slowTransactions`` without ``coordinatorId``, ``clientTransactions``) answer for the
whole cluster, as Pulsar's do: the member asked answers for the coordinators it owns
(acquiring an unowned one's bundle when the load manager picks it, as a lookup
would) and asks the owner of each other coordinator for that coordinator's answer,
with the route's one-coordinator form (``?coordinatorId=N&authoritative=true``).

* **Credentials.** The member asks as itself (``brokerClientAuthenticationParameters``,
  a super-user, as its binary connections to the other members), never with the
  caller's credentials: the caller's own right was checked by this member before
  anything is asked, and what the answer shows is narrowed here to it.
* **Bounds.** All owners are asked at once, at most ``PEER_REQUESTS_IN_FLIGHT_MAX``
  requests in flight, each bounded by ``PEER_REQUEST_TIMEOUT_S`` and its answer by
  ``PEER_ANSWER_BYTES_MAX``. An owner that moved meanwhile answers 307; that is
  followed (at most ``PEER_REDIRECTS_MAX`` times) only to a live member's web URL.
* **Failures.** An owner that cannot be reached, answers too late or redirects
  elsewhere is ``ServiceNotReady`` (503, retryable: its coordinator moves once its
  session expires) naming the coordinator and the owner; an error answer keeps its
  status with the coordinator named in the reason; a refusal of this member's own
  credentials (401/403) is a configuration error (500).
* **Transport.** Members are asked over their plaintext web URL (``webServicePort``),
  or with a TLS context (``brokerClientTlsEnabled``) over their ``https://`` one
  (``webServicePortTls``) only; an owner without a URL of that kind is 503, never
  asked over the other kind.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp import web

from quasar.cluster.coordinator_topics import assign_partition
from quasar.cluster.member import ClusterMember
from quasar.errors import AdminError, ServiceNotReady, error_for_http_status

__all__ = [
    "PEER_ANSWER_BYTES_MAX",
    "PEER_REDIRECTS_MAX",
    "PEER_REQUESTS_IN_FLIGHT_MAX",
    "PEER_REQUEST_TIMEOUT_S",
    "CoordinatorOwners",
    "OWNERS_KEY",
    "coordinator_owners",
]

log = logging.getLogger(__name__)

# As pulsar-admin's default read timeout (the client's REQUEST_TIMEOUT_S).
PEER_REQUEST_TIMEOUT_S = 30.0
# Requests one gathering answer has in flight at once (the coordinators are few:
# 16 unless initialize-cluster-metadata chose otherwise).
PEER_REQUESTS_IN_FLIGHT_MAX = 16
# An owner that moved is followed this many times before the answer is 503.
PEER_REDIRECTS_MAX = 3
# Far above any one coordinator's answer; a larger one is refused, not buffered.
PEER_ANSWER_BYTES_MAX = 64 * 1024 * 1024

T = TypeVar("T")


class CoordinatorOwners:
    """Asks each coordinator's owner, for the routes over every coordinator."""

    def __init__(
        self,
        member: ClusterMember,
        headers: Mapping[str, str],
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``headers``: this member's own credentials for the other members
        (``Authorization``), empty without authentication; ``tls``: the context of
        ``https://`` requests to them (``None``: plain ``http://``)."""
        self._member = member
        self._tls = tls
        self._scheme = "https" if tls is not None else "http"
        self._headers = {"Accept": "application/json", **headers}
        self._session: aiohttp.ClientSession | None = None
        self._in_flight = asyncio.Semaphore(PEER_REQUESTS_IN_FLIGHT_MAX)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def broker_service_urls(self, tc_id: int) -> tuple[str | None, str | None]:
        """The binary URLs (plain, TLS) of coordinator ``tc_id``'s owner, as a LOOKUP
        of its assign partition answers them (which may assign the bundle). One
        lookup gives both, so they name the same owner."""
        data = self._member.lookup(assign_partition(tc_id), False, "").data
        return data.broker_url, data.broker_url_tls

    async def gather(
        self,
        count: int,
        local: Callable[[int], Awaitable[T]],
        path: Callable[[int], str],
        shape: type,
    ) -> list[T | BaseException]:
        """Each of the ``count`` coordinators' answers, in id order: ``local(i)``
        where this member serves coordinator ``i``, else the JSON answer (of type
        ``shape``) of GET ``path(i)`` (a path and query) on its owner. An answer
        that failed is its exception (see the module docstring), so a caller can
        fail the whole answer or mark one coordinator."""
        return list(await asyncio.gather(
            *(self._one(i, local, path, shape) for i in range(count)),
            return_exceptions=True,
        ))

    async def _one(
        self,
        tc_id: int,
        local: Callable[[int], Awaitable[T]],
        path: Callable[[int], str],
        shape: type,
    ) -> T:
        # Not authoritative: an unowned coordinator goes to the load manager's choice.
        owner = self._member.admin_target(
            assign_partition(tc_id), False, secure=self._tls is not None
        )
        if owner is None:
            return await local(tc_id)
        answer = await self._get(tc_id, owner.rstrip("/") + path(tc_id))
        if not isinstance(answer, shape):
            raise AdminError(
                f"coordinator {tc_id}: its owner {owner} answered a "
                f"{type(answer).__name__}, not a {shape.__name__}",
                http_status=502,
            )
        return answer  # type: ignore[return-value]

    async def _get(self, tc_id: int, url: str) -> Any:
        for _ in range(PEER_REDIRECTS_MAX + 1):
            status, location, raw = await self._exchange(tc_id, url)
            if status in (307, 308) and location is not None:
                url = self._member_location(tc_id, urljoin(url, location))
                continue
            if status in (401, 403):
                raise AdminError(
                    f"coordinator {tc_id}: its owner {_origin(url)} refused this "
                    f"member's credentials ({status}): brokerClientAuthenticationParameters "
                    "must name a super-user of every member",
                    http_status=500,
                )
            if status >= 300:
                raise error_for_http_status(
                    status if status >= 400 else 502,
                    f"coordinator {tc_id} on {_origin(url)}: {_reason(raw, status)}",
                )
            try:
                return json.loads(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                raise AdminError(
                    f"coordinator {tc_id}: its owner {_origin(url)} answered no JSON: "
                    f"{exc}",
                    http_status=502,
                ) from None
        raise ServiceNotReady(
            f"coordinator {tc_id}: more than {PEER_REDIRECTS_MAX} redirects between "
            "its owners"
        )

    async def _exchange(self, tc_id: int, url: str) -> tuple[int, str | None, bytes]:
        if urlsplit(url).scheme != self._scheme:
            port = "webServicePortTls" if self._tls is not None else "webServicePort"
            raise ServiceNotReady(
                f"coordinator {tc_id}: its owner {_origin(url)} has no {self._scheme}:// "
                f"web service ({port}), over which members ask each other"
            )
        async with self._in_flight:
            try:
                async with self._open().get(
                    url, headers=self._headers, allow_redirects=False
                ) as resp:
                    raw = bytearray()
                    async for chunk in resp.content.iter_chunked(64 * 1024):
                        raw += chunk
                        if len(raw) > PEER_ANSWER_BYTES_MAX:
                            raise AdminError(
                                f"coordinator {tc_id}: its owner {_origin(url)} answered "
                                f"more than {PEER_ANSWER_BYTES_MAX} bytes",
                                http_status=502,
                            )
                    return resp.status, resp.headers.get("Location"), bytes(raw)
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                # The 503 answer says it; a client polling must not fill the log.
                log.debug("coordinator %d: owner %s unreachable: %r",
                          tc_id, _origin(url), exc)
                raise ServiceNotReady(
                    f"coordinator {tc_id}: its owner {_origin(url)} cannot be reached: "
                    f"{exc or type(exc).__name__}"
                ) from None

    def _member_location(self, tc_id: int, location: str) -> str:
        """``location`` if it is on a live member's web URL (an owner's redirect
        anywhere else is refused: this member's credentials go along)."""
        live = {
            _origin(url)
            for b in self._member.registry.live_brokers()
            for url in (b.urls.http_url, b.urls.http_url_tls)
            if url and urlsplit(url).scheme == self._scheme
        }
        if _origin(location) not in live:
            log.warning("coordinator %d: redirect to %s, which is no live member",
                        tc_id, _origin(location))
            raise ServiceNotReady(
                f"coordinator {tc_id}: redirected to {_origin(location)}, which is no "
                "live member"
            )
        return location

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = None
            if self._tls is not None:
                connector = aiohttp.TCPConnector(ssl=self._tls)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=PEER_REQUEST_TIMEOUT_S),
            )
        return self._session


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _reason(raw: bytes, status: int) -> str:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("reason"), str):
        return str(body["reason"])[:1000]
    return f"HTTP {status}"


OWNERS_KEY = web.AppKey("quasar.admin.txn_owners", CoordinatorOwners)


def coordinator_owners(request: web.Request) -> CoordinatorOwners | None:
    """The member's ``CoordinatorOwners`` (``None`` on a standalone broker)."""
    return request.app.get(OWNERS_KEY)
