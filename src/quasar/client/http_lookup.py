"""Topic discovery over HTTP, for ``http://`` and ``https://`` service URLs.

With such a URL the pulsar client (C++ ``HTTPLookupService``) asks the broker's web
service where things are instead of sending binary LOOKUP commands:

* ``GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}[?listenerName=]``:
  the owner broker, whose ``brokerUrl`` (``brokerUrlTls`` over https) the binary
  connection then goes to;
* ``GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions
  ?checkAllowAutoCreation=true``: ``{"partitions": N}``;
* ``GET /admin/v2/namespaces/{tenant}/{namespace}/topics?mode=``: the namespace's
  topics, for pattern subscriptions.

Every request goes through the admin client (one per host of the URL, picked round
robin as the pulsar client's service name resolver does), so it carries the client's
authentication headers and, over https, its TLS context (client certificate
included). An HTTP error answer becomes the client error a caller branches on:

* 401 → ``AuthenticationError``; 403 → ``AuthorizationError``;
* 404 → ``TopicNotFound`` (no such topic, namespace or listener);
* 412 → ``InvalidTopicName``;
* 5xx → ``LookupError``, retryable; so are ``ConnectError`` and ``Timeout`` of the
  request itself, which the operation retries until its timeout;
* any other status → ``LookupError``, not retryable.

The web service is a peer like any other: an answer of the wrong shape raises
``InvalidLookupAnswer`` (a ``LookupError``, not retryable) rather than being guessed
at.
"""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import quote, urlsplit

from quasar.client.admin import AdminClient
from quasar.client.config import ClientConfig
from quasar.client.exceptions import InvalidUrl
from quasar.client.exceptions import LookupError as PulsarLookupError
from quasar.client.lookup import LookupService
from quasar.errors import (
    AdminError,
    AuthenticationError,
    AuthorizationError,
    InvalidTopicName,
    QuasarError,
    TopicNotFound,
)
from quasar.protocol import TopicName
from quasar.protocol.namespace_name import parse_namespace

__all__ = [
    "HTTP_SCHEMES",
    "HttpLookupService",
    "InvalidLookupAnswer",
    "http_base_urls",
    "is_http_url",
]

HTTP_SCHEMES = ("http", "https")
# The pulsar client's names of CommandGetTopicsOfNamespace.Mode, by wire value.
_MODE_NAMES = {0: "PERSISTENT", 1: "NON_PERSISTENT", 2: "ALL"}


class InvalidLookupAnswer(PulsarLookupError):
    """The web service answered 200 with something other than what was asked for
    (not JSON, a missing or mistyped field): asking again would get the same."""

    retryable = False


def is_http_url(url: str) -> bool:
    """Whether ``url`` is an ``http://`` or ``https://`` service URL."""
    return urlsplit(url).scheme in HTTP_SCHEMES


def http_base_urls(url: str) -> list[str]:
    """``http[s]://host[:port][,host2[:port2]...][/]`` as one base URL per host.

    Raises:
        InvalidUrl: not such a URL (no host, a path, a query, or an empty host).
    """
    parts = urlsplit(url)
    if parts.scheme not in HTTP_SCHEMES or not parts.netloc:
        raise InvalidUrl(f"unsupported service URL {url!r} (need http://host:port)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidUrl(
            f"service URL {url!r} has a path or query: give only http[s]://host:port"
        )
    hosts = [h.strip() for h in parts.netloc.split(",")]
    if not all(hosts):
        raise InvalidUrl(f"empty host in service URL {url!r}")
    return [f"{parts.scheme}://{host}" for host in hosts]


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _error(status_error: AdminError, what: str) -> QuasarError:
    """The client error for an HTTP error answer to the request for ``what``."""
    status = status_error.http_status
    reason = f"{what}: HTTP {status}: {status_error}"
    if status == 401:
        return AuthenticationError(reason)
    if status == 403:
        return AuthorizationError(reason)
    if status == 404:
        return TopicNotFound(reason)
    if status == 412:
        return InvalidTopicName(reason)
    err = PulsarLookupError(reason)
    # A server error may pass (a restarting broker); a client error will not.
    err.retryable = status >= 500
    return err


class HttpLookupService(LookupService):
    """``LookupService``'s interface over the broker's web service (see the module
    docstring); chosen by ``Client`` for an ``http://`` or ``https://`` URL.

    It derives from ``LookupService`` so that producers, consumers and the
    transaction coordinator client take either; it overrides every request.
    """

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        ssl_context = config.ssl_context() if config.use_tls else None
        self._admins = [
            AdminClient(
                base,
                timeout_s=config.operation_timeout_s,
                authentication=config.authentication,
                ssl_context=ssl_context,
            )
            for base in http_base_urls(config.service_url)
        ]
        self._next_admin = itertools.cycle(self._admins)

    async def close(self) -> None:
        """Close the HTTP sessions."""
        for admin in self._admins:
            await admin.close()

    async def _get(self, path: str, what: str) -> Any:
        try:
            return await next(self._next_admin).get_json(path)
        except AdminError as exc:
            if not exc.remote:  # an answer that is not JSON
                raise InvalidLookupAnswer(f"{what}: {exc}") from exc
            raise _error(exc, what) from exc

    async def partitioned_metadata(self, topic: str) -> int:
        """Number of partitions of ``topic`` (0 for a non-partitioned topic).

        Raises:
            ConnectError, Timeout, LookupError (retryable); TopicNotFound,
            AuthenticationError, AuthorizationError; LookupError for a bad answer.
        """
        name = TopicName.parse(topic)
        path = (
            f"/admin/v2/{name.domain}/{_q(name.tenant)}/{_q(name.namespace)}/"
            f"{_q(name.local_name)}/partitions?checkAllowAutoCreation=true"
        )
        what = f"partitioned metadata of {name.full}"
        body = await self._get(path, what)
        partitions = body.get("partitions") if isinstance(body, dict) else None
        if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 0:
            raise InvalidLookupAnswer(f"{what}: unexpected answer {body!r:.200}")
        return partitions

    async def lookup(self, topic: str) -> str:
        """The binary URL of the broker that owns ``topic``: the answer's
        ``brokerUrl``, or ``brokerUrlTls`` when the service URL is https.

        Raises:
            As :meth:`partitioned_metadata`; LookupError when the answer has no URL
            of the kind needed.
        """
        name = TopicName.parse(topic)
        path = (
            f"/lookup/v2/topic/{name.domain}/{_q(name.tenant)}/{_q(name.namespace)}/"
            f"{_q(name.local_name)}"
        )
        if self.config.listener_name:
            path += f"?listenerName={_q(self.config.listener_name)}"
        what = f"lookup of {name.full}"
        body = await self._get(path, what)
        field = "brokerUrlTls" if self.config.use_tls else "brokerUrl"
        url = body.get(field) if isinstance(body, dict) else None
        if not isinstance(url, str) or not url:
            raise InvalidLookupAnswer(f"{what}: the answer has no {field}: {body!r:.200}")
        return url

    async def topics_of_namespace(self, namespace: str, mode: int) -> list[str]:
        """Topic names of a namespace with ``-partition-N`` stripped, de-duplicated.

        Raises:
            As :meth:`partitioned_metadata`; LookupError when the answer is not a
            list of topic names.
        """
        tenant, ns = parse_namespace(namespace)
        path = (
            f"/admin/v2/namespaces/{_q(tenant)}/{_q(ns)}/topics"
            f"?mode={_MODE_NAMES.get(mode, 'PERSISTENT')}"
        )
        what = f"topics of namespace {tenant}/{ns}"
        body = await self._get(path, what)
        if not isinstance(body, list) or not all(isinstance(t, str) for t in body):
            raise InvalidLookupAnswer(f"{what}: unexpected answer {body!r:.200}")
        seen: dict[str, None] = {}
        try:
            for name in body:
                # The broker lists each partition; a subscription wants the topic.
                seen.setdefault(TopicName.parse(name).base.full, None)
        except InvalidTopicName as exc:
            raise InvalidLookupAnswer(f"{what}: {exc}") from exc
        return list(seen)
