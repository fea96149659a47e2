"""Client-wide settings shared by connections, lookups, producers and consumers."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from quasar.client.exceptions import InvalidUrl

try:  # The distribution may not be installed (running from a source tree).
    from importlib.metadata import version as _dist_version

    CLIENT_VERSION = f"quasar-{_dist_version('quasar-broker')}"
except Exception:  # pragma: no cover - depends on the environment
    CLIENT_VERSION = "quasar-0.1.0"


@dataclass
class ClientConfig:
    """Timeouts and limits; the defaults are the `pulsar` client's."""

    service_url: str
    operation_timeout_seconds: float = 30.0
    connection_timeout_ms: float = 10_000.0
    keep_alive_interval_seconds: float = 30.0
    # Reconnect backoff of producers and consumers (100 ms doubling, capped).
    initial_backoff_ms: float = 100.0
    max_backoff_ms: float = 60_000.0
    # Ack grouping: acks are flushed after this delay or when this many are queued.
    ack_group_time_ms: float = 100.0
    ack_group_max_ids: int = 1000
    max_lookup_redirects: int = 20
    # Largest frame accepted from the broker before CONNECTED says otherwise.
    max_frame_bytes: int = 5 * 1024 * 1024 + 10 * 1024
    client_version: str = CLIENT_VERSION
    listener_name: str = ""
    # Transactions: an END_TXN without a definite answer is asked again until it gets
    # one; this bounds how long (None: no bound, as docs/ARCHITECTURE.md §6 wants).
    transaction_end_retry_timeout_ms: float | None = None
    _ids: itertools.count[int] = field(default_factory=itertools.count, repr=False)
    _producer_ids: itertools.count[int] = field(
        default_factory=itertools.count, repr=False
    )
    _consumer_ids: itertools.count[int] = field(
        default_factory=itertools.count, repr=False
    )

    @property
    def operation_timeout_s(self) -> float:
        return float(self.operation_timeout_seconds)

    def next_request_id(self) -> int:
        """Client-wide request id (lookups and requests share one counter)."""
        return next(self._ids)

    def next_producer_id(self) -> int:
        return next(self._producer_ids)

    def next_consumer_id(self) -> int:
        return next(self._consumer_ids)


def parse_service_url(url: str) -> list[tuple[str, int]]:
    """``pulsar://host[:port][,host2[:port2]...]`` as a list of (host, port).

    Raises:
        InvalidUrl: not a ``pulsar://`` URL (TLS is not supported by this client).
    """
    parts = urlsplit(url)
    if parts.scheme != "pulsar" or not parts.netloc:
        raise InvalidUrl(f"unsupported service URL {url!r} (need pulsar://host:port)")
    hosts: list[tuple[str, int]] = []
    for item in parts.netloc.split(","):
        host, _, port = (
            item.rpartition(":") if ":" in item.strip("[]") else (item, "", "")
        )
        if not host:
            host, port = item, ""
        host = host.strip("[]")
        try:
            hosts.append((host, int(port) if port else 6650))
        except ValueError as exc:
            raise InvalidUrl(f"bad port in service URL {url!r}") from exc
    return hosts
