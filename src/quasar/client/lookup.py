"""Topic discovery over the binary protocol: partitions, owner broker, namespace topics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from quasar.client.backoff import Backoff
from quasar.client.config import ClientConfig
from quasar.client.connection import ConnectionPool, make_command
from quasar.client.exceptions import LookupError as PulsarLookupError
from quasar.errors import QuasarError, Timeout, error_for_code
from quasar.protocol import TopicName, pb

log = logging.getLogger(__name__)
T = pb.BaseCommand
R = TypeVar("R")

class TooManyRedirects(PulsarLookupError):
    """More than ``max_lookup_redirects`` Redirect answers: a loop, not worth retrying."""

    retryable = False


class LookupService:
    """Asks the service URL's broker (and follows redirects) where topics live."""

    def __init__(self, config: ClientConfig, pool: ConnectionPool) -> None:
        self.config = config
        self.pool = pool

    async def close(self) -> None:
        """Nothing to close: the connections belong to the pool."""

    async def _request(self, url: str, type_: int, field: str, **fields: Any) -> Any:
        conn = await self.pool.get(url)
        rid = self.config.next_request_id()
        cmd = make_command(type_, field, request_id=rid, **fields)
        return await conn.request(cmd, rid)

    async def partitioned_metadata(self, topic: str) -> int:
        """Number of partitions of ``topic`` (0 for a non-partitioned topic).

        Raises:
            ConnectError, Timeout, BrokerError: the request failed.
        """
        resp = await self._request(
            self.config.service_url,
            T.PARTITIONED_METADATA,
            "partitionMetadata",
            topic=topic,
        )
        return int(resp.partitionMetadataResponse.partitions)

    async def lookup(self, topic: str) -> str:
        """The URL of the broker that owns ``topic`` (``pulsar+ssl://`` when the
        service URL is).

        Follows Redirect answers (at most ``max_lookup_redirects``), sending
        ``authoritative`` as the redirect said.

        Raises:
            LookupError: too many redirects or an answer without a URL.
            BrokerError: the broker answered Failed with an error code.
        """
        url = self.config.service_url
        authoritative = False
        for _ in range(self.config.max_lookup_redirects + 1):
            resp = await self._request(
                url,
                T.LOOKUP,
                "lookupTopic",
                topic=topic,
                authoritative=authoritative,
                advertised_listener_name=self.config.listener_name,
            )
            r = resp.lookupTopicResponse
            if not r.HasField("response") or r.response == r.Failed:
                if r.HasField("error"):
                    raise error_for_code(
                        r.error, r.message or f"lookup of {topic} failed"
                    )
                raise PulsarLookupError(f"lookup of {topic} failed: {r.message}")
            # A client on pulsar+ssl:// stays on TLS: it follows the TLS URL.
            broker_url = (
                r.brokerServiceUrlTls if self.config.use_tls else r.brokerServiceUrl
            )
            if not broker_url:
                raise PulsarLookupError(
                    f"lookup of {topic} returned no broker URL"
                    + (" for TLS (brokerServiceUrlTls)" if self.config.use_tls else "")
                )
            if r.response == r.Connect:
                # proxy_through_service_url: the broker is reached through the service URL.
                return (
                    self.config.service_url
                    if r.proxy_through_service_url
                    else broker_url
                )
            url = broker_url
            authoritative = r.authoritative
        raise TooManyRedirects(f"too many lookup redirects for {topic}")

    async def topics_of_namespace(self, namespace: str, mode: int) -> list[str]:
        """Topic names of a namespace with ``-partition-N`` stripped, de-duplicated."""
        resp = await self._request(
            self.config.service_url,
            T.GET_TOPICS_OF_NAMESPACE,
            "getTopicsOfNamespace",
            namespace=namespace,
            mode=mode,
        )
        seen: dict[str, None] = {}
        for name in resp.getTopicsOfNamespaceResponse.topics:
            # The broker lists each partition; a subscription wants the topic.
            seen.setdefault(TopicName.parse(name).base.full, None)
        return list(seen)


def is_retryable(exc: BaseException) -> bool:
    """Whether creating a producer/consumer should be tried again after ``exc``."""
    return isinstance(exc, QuasarError) and exc.retryable


async def retry_until(
    operation: Callable[[], Awaitable[R]],
    timeout_s: float,
    backoff: Backoff,
    what: str,
) -> R:
    """Run ``operation`` until it succeeds, a non-retryable error, or ``timeout_s``.

    Retryable errors (connect failures, ServiceNotReady, timeouts of one request) are
    retried with ``backoff``, as the C++ client does while creating a producer or
    consumer.

    Raises:
        The last error, or Timeout when the deadline passes first.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            return await operation()
        except QuasarError as exc:
            if not is_retryable(exc):
                raise
            delay = backoff.next_delay_ms() / 1000.0
            if loop.time() + delay >= deadline:
                if isinstance(exc, Timeout):
                    raise
                raise Timeout(f"{what} did not succeed in {timeout_s}s: {exc}") from exc
            log.debug("%s failed (%s), retrying in %.3fs", what, exc, delay)
            await asyncio.sleep(delay)
