"""An asyncio client for the admin REST API (Pulsar's ``/admin/v2`` and ``/admin/v3``).

One client for every caller: ``quasar admin`` (the command line runs it with
``asyncio.run``), ``quasar perf`` (it creates partitioned topics), the Spark connector
(topic listings and ledger lists) and ``Client.get_client_transactions``::

    async with AdminClient("http://127.0.0.1:8080") as admin:
        await admin.create_partitioned_topic("public/default/orders", 4)
        print(await admin.topics("public/default"))

Blocking code calls :func:`call_admin`, which runs the calls on a fresh event loop.
Topic arguments may be full names (``persistent://t/ns/x``) or Pulsar's short forms
(``t/ns/x``, ``x`` for ``public/default/x``).

Every request is bounded by ``timeout_s`` (connecting, sending and reading the whole
answer). Redirects (307 from a cluster member to the broker that owns the topic or
transaction coordinator) are followed with the same method, body and credentials,
at most ``MAX_REDIRECTS``, never from ``https://`` to ``http://``. What a request
raises:

* ``ConnectError``: the admin server could not be reached (refused, reset, no route);
* ``Timeout``: no complete answer within ``timeout_s``;
* for an HTTP error answer, the admin error of ``quasar.errors`` for its status
  (``ResourceNotFoundError`` for 404, ``ConflictError`` for 409, ...; see
  ``error_for_http_status``), carrying the server's ``reason``; ``remote`` is true;
* ``InvalidAdminResponse``: an answer that is not what was asked for (not JSON).

Bad names raise before anything is sent: ``InvalidResourceError`` for a tenant or
namespace, ``InvalidTopicName`` for a topic.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote, urljoin, urlsplit

import aiohttp

from quasar.client.authentication import Authentication
from quasar.client.client_transactions import (
    ClientTransactions,
    parse_client_transactions,
)
from quasar.errors import (
    ConnectError,
    InvalidAdminResponse,
    InvalidResourceError,
    Timeout,
    error_for_http_status,
)
from quasar.protocol.namespace_name import PERSISTENT, parse_namespace, parse_topic

__all__ = [
    "DEFAULT_ADMIN_URL",
    "REQUEST_TIMEOUT_S",
    "AdminClient",
    "call_admin",
]

DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"

# Stats of a large topic are the slowest admin answer; 30 s matches pulsar-admin's
# default read timeout.
REQUEST_TIMEOUT_S = 30.0

# Redirects one request follows (aiohttp's own default bound).
MAX_REDIRECTS = 10
_REDIRECTS = (301, 302, 303, 307, 308)

CLIENT_TRANSACTIONS_PATH = "/admin/v3/transactions/clientTransactions/"

_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
_NO_BODY = object()

T = TypeVar("T")


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _redirect_target(url: str, location: str) -> str:
    """Where a redirect from ``url`` leads; never from https:// down to http://,
    which would send the credentials in the clear.

    Raises:
        InvalidAdminResponse: a redirect from https:// to http://.
    """
    target = urljoin(url, location)
    if urlsplit(url).scheme == "https" and urlsplit(target).scheme != "https":
        raise InvalidAdminResponse(f"refused redirect from {url} to {target}: not https")
    return target


def _force(force: bool) -> str:
    return "?force=true" if force else ""


class AdminClient:
    """Calls the admin REST API at ``base_url``; each method returns the decoded answer.

    The HTTP session opens on the first request, in the running event loop, and
    closes with :meth:`close` (or ``async with``): use one client within one loop.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_ADMIN_URL,
        timeout_s: float = REQUEST_TIMEOUT_S,
        authentication: Authentication | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``authentication``: credentials sent as the ``Authorization`` header of
        every request (read again for each, so a token supplier's new token is used).
        ``ssl_context`` verifies an ``https://`` server (for example the one of
        ``ClientTlsOptions.context()``); None: the system's CAs.
        """
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.ssl_context = ssl_context
        self._session: aiohttp.ClientSession | None = None
        self.authentication = authentication

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP session. Idempotent; a later request opens a new one."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                connector=aiohttp.TCPConnector(
                    ssl=self.ssl_context if self.ssl_context is not None else True
                ),
            )
        return self._session

    async def request(self, method: str, path: str, body: Any = _NO_BODY) -> Any:
        """Send one request; return the JSON answer, its text, or ``None`` if empty.

        ``body`` (any JSON value) is sent as JSON when given.

        Raises:
            ConnectError, Timeout, InvalidAdminResponse, or the admin error for the
            answer's HTTP status (see the module docstring).
        """
        raw, content_type = await self._send(method, path, body)
        if not raw:
            return None
        if content_type == "application/json":
            return _decode_json(method, path, raw)
        return raw.decode(errors="replace")

    async def get_json(self, path: str) -> Any:
        """GET ``path`` and decode its JSON answer, whatever its content type says.

        Raises:
            As :meth:`request`; ``InvalidAdminResponse`` when the body is not JSON.
        """
        raw, _ = await self._send("GET", path, _NO_BODY)
        return _decode_json("GET", path, raw)

    async def get_message(self, path: str) -> tuple[bytes, dict[str, str]]:
        """GET ``path``, an answer that is a message: its raw body and its headers
        (peek, examine and get-by-id answer the payload with ``X-Pulsar-*`` headers).

        Raises:
            As :meth:`request`.
        """
        raw, _, headers = await self._exchange("GET", path, _NO_BODY)
        return raw, headers

    async def _send(self, method: str, path: str, body: Any) -> tuple[bytes, str]:
        raw, content_type, _ = await self._exchange(method, path, body)
        return raw, content_type

    async def _exchange(
        self, method: str, path: str, body: Any
    ) -> tuple[bytes, str, dict[str, str]]:
        url = self.base_url + path
        data = None if body is _NO_BODY else json.dumps(body).encode()
        try:
            for _ in range(MAX_REDIRECTS + 1):
                headers = dict(_HEADERS)
                if self.authentication is not None:
                    headers.update(self.authentication.http_headers())
                # Redirects are followed here, not by aiohttp: it drops the
                # credentials on a redirect to another host, which is how a cluster
                # sends a request to the broker that owns its topic or coordinator.
                async with self._open_session().request(
                    method, url, data=data, headers=headers, allow_redirects=False
                ) as resp:
                    raw = await resp.read()
                    location = resp.headers.get("Location")
                    # 307 and 308 keep the method and body; 301, 302 and 303 are
                    # followed for GET only: turning a write into a GET, as browsers
                    # do, would report a change that never happened.
                    if resp.status in (307, 308) or (
                        resp.status in _REDIRECTS and method == "GET"
                    ):
                        if not location:
                            raise InvalidAdminResponse(
                                f"{method} {url}: {resp.status} without a Location"
                            )
                        url = _redirect_target(url, location)
                        continue
                    if resp.status >= 300:  # a redirect not to follow is an error too
                        raise error_for_http_status(
                            resp.status, _reason(raw, resp.reason or "")
                        )
                    return raw, resp.content_type, dict(resp.headers)
        except TimeoutError as exc:
            raise Timeout(
                f"{method} {url}: no answer within {self.timeout_s}s"
            ) from exc
        except aiohttp.InvalidURL as exc:
            raise ValueError(f"not a valid admin URL: {self.base_url!r}") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise ConnectError(f"cannot reach {self.base_url}: {exc}") from exc
        raise InvalidAdminResponse(f"{method} {path}: more than {MAX_REDIRECTS} redirects")

    # Paths -------------------------------------------------------------------------

    @staticmethod
    def namespace_path(namespace: str) -> str:
        """``/admin/v2/namespaces/<tenant>/<namespace>``.

        Raises:
            InvalidResourceError: not a valid ``tenant/namespace``.
        """
        tenant, ns = parse_namespace(namespace)
        return f"/admin/v2/namespaces/{_q(tenant)}/{_q(ns)}"

    @staticmethod
    def topic_path(topic: str) -> str:
        """``/admin/v2/persistent/<tenant>/<namespace>/<topic>``.

        Raises:
            InvalidTopicName: not a valid topic name.
            InvalidResourceError: not a persistent topic.
        """
        parts = parse_topic(topic)
        if parts.domain != PERSISTENT:
            raise InvalidResourceError(f"only persistent topics are supported: {topic}")
        return (
            f"/admin/v2/persistent/{_q(parts.tenant)}/{_q(parts.namespace)}"
            f"/{_q(parts.local_name)}"
        )

    # Tenants -----------------------------------------------------------------------

    async def tenants(self) -> list[str]:
        return await self.request("GET", "/admin/v2/tenants")  # type: ignore[no-any-return]

    async def create_tenant(
        self,
        tenant: str,
        admin_roles: list[str] | None = None,
        allowed_clusters: list[str] | None = None,
    ) -> None:
        body: dict[str, Any] = {"adminRoles": admin_roles or []}
        if allowed_clusters:
            body["allowedClusters"] = allowed_clusters
        await self.request("PUT", f"/admin/v2/tenants/{_q(tenant)}", body)

    async def delete_tenant(self, tenant: str) -> None:
        await self.request("DELETE", f"/admin/v2/tenants/{_q(tenant)}")

    # Namespaces --------------------------------------------------------------------

    async def namespaces(self, tenant: str) -> list[str]:
        return await self.request("GET", f"/admin/v2/namespaces/{_q(tenant)}")  # type: ignore[no-any-return]

    async def create_namespace(self, namespace: str) -> None:
        await self.request("PUT", self.namespace_path(namespace))

    async def delete_namespace(self, namespace: str, force: bool = False) -> None:
        await self.request("DELETE", self.namespace_path(namespace) + _force(force))

    # Topics ------------------------------------------------------------------------

    async def topics(self, namespace: str) -> list[str]:
        """Full names of the namespace's persistent topics and partitions."""
        tenant, ns = parse_namespace(namespace)
        return await self.get_json(f"/admin/v2/persistent/{_q(tenant)}/{_q(ns)}")  # type: ignore[no-any-return]

    async def create_topic(self, topic: str) -> None:
        await self.request("PUT", self.topic_path(topic))

    async def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        await self.request("PUT", self.topic_path(topic) + "/partitions", partitions)

    async def partitioned_metadata(self, topic: str) -> dict[str, Any]:
        """``{"partitions": N}`` (0 for a non-partitioned topic)."""
        return await self.get_json(self.topic_path(topic) + "/partitions")  # type: ignore[no-any-return]

    async def delete_topic(self, topic: str, force: bool = False) -> None:
        await self.request("DELETE", self.topic_path(topic) + _force(force))

    async def delete_partitioned_topic(self, topic: str, force: bool = False) -> None:
        await self.request("DELETE", self.topic_path(topic) + "/partitions" + _force(force))

    async def stats(self, topic: str) -> dict[str, Any]:
        return await self.get_json(self.topic_path(topic) + "/stats")  # type: ignore[no-any-return]

    async def internal_stats(self, topic: str) -> dict[str, Any]:
        """The managed ledger's state: ``ledgers`` (id, entries, size), ``cursors``."""
        return await self.get_json(self.topic_path(topic) + "/internalStats")  # type: ignore[no-any-return]

    async def subscriptions(self, topic: str) -> list[str]:
        return await self.get_json(self.topic_path(topic) + "/subscriptions")  # type: ignore[no-any-return]

    # Transactions ------------------------------------------------------------------

    async def client_transactions(self, client_name: str) -> ClientTransactions:
        """The open and preserved terminated transactions of ``client_name``.

        Raises:
            As :meth:`request`; ``InvalidAdminResponse`` for an answer that does not
            have the documented shape.
        """
        body = await self.get_json(CLIENT_TRANSACTIONS_PATH + _q(client_name))
        return parse_client_transactions(body, client_name)


def call_admin(
    base_url: str,
    call: Callable[[AdminClient], Awaitable[T]],
    timeout_s: float = REQUEST_TIMEOUT_S,
    ssl_context: ssl.SSLContext | None = None,
    authentication: Authentication | None = None,
) -> T:
    """Run ``call(admin)`` from blocking code: on a fresh event loop, with a client
    (and HTTP session) that is closed afterwards. ``ssl_context`` and
    ``authentication`` are :class:`AdminClient`'s.

    Must not be called from a thread running an event loop (await the client there).

    Raises:
        Whatever ``call`` raises (see the module docstring).
    """

    async def run() -> T:
        async with AdminClient(
            base_url, timeout_s, authentication=authentication, ssl_context=ssl_context
        ) as admin:
            return await call(admin)

    return asyncio.run(run())


def _decode_json(method: str, path: str, raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise InvalidAdminResponse(f"{method} {path}: the answer is not JSON: {exc}") from exc


def _reason(raw: bytes, status_reason: str) -> str:
    """The server's explanation of an error answer: the ``reason`` of a JSON body
    ``{"reason": ...}`` (Pulsar's shape), else the body's text, else the status line's
    reason phrase."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace").strip() or status_reason
    reason = body.get("reason") if isinstance(body, dict) else None
    if isinstance(reason, str):
        return reason
    return raw.decode(errors="replace")
