"""Client-wide settings shared by connections, lookups, producers and consumers."""

from __future__ import annotations

import itertools
import ssl
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from quasar.client.authentication import Authentication
from quasar.client.exceptions import InvalidUrl
from quasar.client.memory_limit import DEFAULT_MEMORY_LIMIT_BYTES, MemoryLimit
from quasar.client.tls import ClientTlsOptions
from quasar.protocol import DEFAULT_MAX_MESSAGE_SIZE, FRAME_PADDING

try:  # The distribution may not be installed (running from a source tree).
    from importlib.metadata import version as _dist_version

    CLIENT_VERSION = f"quasar-{_dist_version('quasar-broker')}"
except Exception:  # pragma: no cover - depends on the environment
    CLIENT_VERSION = "quasar-0.1.0"


# Long enough to ride out a broker restart, short enough that an application is told.
DEFAULT_TRANSACTION_END_TIMEOUT_MS = 60_000.0
# Pulsar standalone's admin ports: the admin URL when none is given (https with a
# pulsar+ssl:// service URL).
DEFAULT_ADMIN_PORT = 8080
DEFAULT_ADMIN_PORT_TLS = 8443
# The binary protocol's conventional ports, when a service URL names none.
DEFAULT_BROKER_PORT = 6650
DEFAULT_BROKER_PORT_TLS = 6651
TLS_SCHEME = "pulsar+ssl"
# The largest message a producer sends until CONNECTED tells the broker's
# max_message_size: the broker default less the room its frame limit keeps for the
# command and metadata, so that such a message is never refused as too big a frame.
ASSUMED_MAX_MESSAGE_SIZE = DEFAULT_MAX_MESSAGE_SIZE - FRAME_PADDING


def new_client_name() -> str:
    """A random client name (one per client instance unless the application names it)."""
    return f"quasar-{uuid.uuid4().hex}"


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
    max_frame_bytes: int = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING
    client_version: str = CLIENT_VERSION
    listener_name: str = ""
    # Transactions: an END_TXN without a definite answer is asked again until it gets
    # one, for at most this long per commit()/abort() call (None: no bound); then
    # TransactionOutcomeUnknown. See quasar.client.transaction.
    transaction_end_timeout_ms: float | None = DEFAULT_TRANSACTION_END_TIMEOUT_MS
    # Deprecated alias of transaction_end_timeout_ms (the name before PIP-255); when
    # set it wins, so configurations written for it keep their meaning.
    transaction_end_retry_timeout_ms: float | None = None
    # Sent on NEW_TXN and END_TXN (PIP-255): the coordinator preserves the outcomes of
    # this name's recent transactions, so a repeated END_TXN learns what happened.
    client_name: str = field(default_factory=lambda: new_client_name())
    # Where commit()/abort() record a transaction before END_TXN (None: no journal).
    transaction_journal_dir: str | None = None
    # The broker's admin REST API (get_client_transactions); None: derived from
    # service_url (see admin_url_for).
    admin_url: str | None = None
    # Bytes of messages awaiting receipts, summed over the client's producers (0: no
    # bound); see quasar.client.memory_limit.
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES
    # Credentials for CONNECT, refresh challenges and the admin API (None: none).
    authentication: Authentication | None = None
    # How pulsar+ssl:// connections and an https:// admin URL verify the broker.
    tls: ClientTlsOptions = field(default_factory=ClientTlsOptions)
    memory: MemoryLimit = field(init=False, repr=False)
    _ssl_context: ssl.SSLContext | None = field(default=None, init=False, repr=False)
    _ids: itertools.count[int] = field(default_factory=itertools.count, repr=False)
    _producer_ids: itertools.count[int] = field(
        default_factory=itertools.count, repr=False
    )
    _consumer_ids: itertools.count[int] = field(
        default_factory=itertools.count, repr=False
    )

    def __post_init__(self) -> None:
        self.memory = MemoryLimit(self.memory_limit_bytes)

    @property
    def operation_timeout_s(self) -> float:
        return float(self.operation_timeout_seconds)

    @property
    def end_timeout_ms(self) -> float | None:
        """The bound of one commit()/abort() call (the deprecated alias wins if set)."""
        if self.transaction_end_retry_timeout_ms is not None:
            return self.transaction_end_retry_timeout_ms
        return self.transaction_end_timeout_ms

    @property
    def use_tls(self) -> bool:
        """Whether the service URL is ``pulsar+ssl://`` or ``https://``: lookups then
        answer with the broker's TLS URL."""
        return is_tls_url(self.service_url)

    def ssl_context(self) -> ssl.SSLContext:
        """The context of every TLS connection of this client (built once).

        Raises:
            InvalidConfiguration: a TLS file cannot be used.
        """
        if self._ssl_context is None:
            self._ssl_context = self.tls.context()
        return self._ssl_context

    def next_request_id(self) -> int:
        """Client-wide request id (lookups and requests share one counter)."""
        return next(self._ids)

    def next_producer_id(self) -> int:
        return next(self._producer_ids)

    def next_consumer_id(self) -> int:
        return next(self._consumer_ids)


def is_tls_url(url: str) -> bool:
    """Whether ``url`` is a ``pulsar+ssl://`` URL, or an ``https://`` service URL
    (whose lookups answer with the brokers' TLS URLs)."""
    return urlsplit(url).scheme in (TLS_SCHEME, "https")


def parse_service_url(url: str) -> list[tuple[str, int]]:
    """``pulsar://host[:port][,host2[:port2]...]`` (or ``pulsar+ssl://``, whose
    default port is 6651) as a list of (host, port).

    Raises:
        InvalidUrl: neither a ``pulsar://`` nor a ``pulsar+ssl://`` URL.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("pulsar", TLS_SCHEME) or not parts.netloc:
        raise InvalidUrl(
            f"unsupported service URL {url!r} "
            "(need pulsar://host:port or pulsar+ssl://host:port)"
        )
    default_port = (
        DEFAULT_BROKER_PORT_TLS if parts.scheme == TLS_SCHEME else DEFAULT_BROKER_PORT
    )
    hosts: list[tuple[str, int]] = []
    for item in parts.netloc.split(","):
        host, _, port = (
            item.rpartition(":") if ":" in item.strip("[]") else (item, "", "")
        )
        if not host:
            host, port = item, ""
        host = host.strip("[]")
        try:
            hosts.append((host, int(port) if port else default_port))
        except ValueError as exc:
            raise InvalidUrl(f"bad port in service URL {url!r}") from exc
    return hosts


def admin_url_for(service_url: str) -> str:
    """``http://<first host of service_url>:8080``: Pulsar standalone's admin address
    (``https://...:8443`` for a ``pulsar+ssl://`` service URL); the first host of an
    ``http://`` or ``https://`` service URL, which is the web service itself.

    Raises:
        InvalidUrl: ``service_url`` is not ``pulsar://``, ``pulsar+ssl://``,
            ``http://`` or ``https://``.
    """
    parts = urlsplit(service_url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return f"{parts.scheme}://{parts.netloc.split(',')[0].strip()}"
    host, _ = parse_service_url(service_url)[0]
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    if is_tls_url(service_url):
        return f"https://{host}:{DEFAULT_ADMIN_PORT_TLS}"
    return f"http://{host}:{DEFAULT_ADMIN_PORT}"
