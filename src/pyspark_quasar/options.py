"""The data source's options, parsed and checked once (Spark lower-cases option keys).

Every option is documented in ``docs/spark.md``. Parsing raises ``ValueError`` with the
option's name, so a misconfigured query fails when it is defined, not in a task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

from pyspark_quasar.positions import EARLIEST, LATEST, Bound, parse_user_position

EXACTLY_ONCE = "exactly_once"
AT_LEAST_ONCE = "at_least_once"
DEFAULT_TXN_TIMEOUT_MS = 3_600_000  # 1 h: must exceed batch duration + restart time
DEFAULT_POLL_TIMEOUT_MS = 120_000


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    if value is None:
        value = options.get(name)
    return None if value is None else str(value)


def _int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"option {name} must be positive, got {value}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name} must be true or false, got {raw!r}")


TLS_SCHEME = "pulsar+ssl"
CLIENT_OPTION_PREFIX = "pulsar.client."
# The pulsar.client.* options the connector takes: Pulsar's ClientConfigurationData
# names, as the pulsar-spark connector passes them through.
AUTH_PLUGIN = "pulsar.client.authPluginClassName"
AUTH_PARAMS = "pulsar.client.authParams"
TLS_TRUST_CERTS = "pulsar.client.tlsTrustCertsFilePath"
TLS_ALLOW_INSECURE = "pulsar.client.tlsAllowInsecureConnection"
TLS_HOSTNAME_VERIFICATION = "pulsar.client.tlsHostnameVerificationEnable"
TLS_CERTIFICATE = "pulsar.client.tlsCertificateFilePath"
TLS_KEY = "pulsar.client.tlsKeyFilePath"
CLIENT_OPTIONS = (
    AUTH_PLUGIN,
    AUTH_PARAMS,
    TLS_TRUST_CERTS,
    TLS_ALLOW_INSECURE,
    TLS_HOSTNAME_VERIFICATION,
    TLS_CERTIFICATE,
    TLS_KEY,
)


def admin_url_for(service_url: str) -> str:
    """Where standalone serves the admin API for the first host of ``service.url``:
    ``http://<host>:8080``, or ``https://<host>:8443`` for ``pulsar+ssl://``."""
    parsed = urlparse(service_url.split(",")[0].strip())
    host = parsed.hostname or "127.0.0.1"
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    if parsed.scheme == TLS_SCHEME:
        return f"https://{host}:8443"
    return f"http://{host}:8080"


@dataclass(frozen=True)
class ClientSecurity:
    """Credentials and TLS settings of every client and admin call of a query.

    Plain strings, so that Spark pickles them to the executors, which build the
    credentials where they connect (a ``file:`` token is read there, on each use).
    ``auth_params`` holds secrets: it is left out of the repr. The plugin and its
    params are checked by :func:`pyspark_quasar.security.check_security`, which
    needs the client package; this module does not import it.
    """

    auth_plugin: str | None = None
    auth_params: str | None = field(default=None, repr=False)
    tls_trust_certs_file_path: str | None = None
    tls_allow_insecure_connection: bool = False
    tls_hostname_verification_enable: bool = False
    tls_certificate_file_path: str | None = None
    tls_key_file_path: str | None = None

    @property
    def has_tls_options(self) -> bool:
        return (
            self.tls_trust_certs_file_path is not None
            or self.tls_allow_insecure_connection
            or self.tls_hostname_verification_enable
            or self.tls_certificate_file_path is not None
            or self.tls_key_file_path is not None
        )

    @staticmethod
    def parse(options: Mapping[str, str]) -> ClientSecurity:
        """The ``pulsar.client.*`` options.

        Raises:
            ValueError: a ``pulsar.client.*`` or ``pulsar.admin.*`` option the
                connector does not know, ``authParams`` without a plugin, or a
                boolean that is not true or false.
        """
        known = {name.lower() for name in CLIENT_OPTIONS}
        for key in options:
            lower = str(key).lower()
            if lower.startswith(CLIENT_OPTION_PREFIX) and lower not in known:
                raise ValueError(
                    f"option {key} is not supported by the quasar connector; the "
                    f"pulsar.client.* options it takes are {', '.join(CLIENT_OPTIONS)}"
                )
            if lower.startswith("pulsar.admin."):
                raise ValueError(
                    f"option {key} is not supported: the admin API is called with "
                    "the pulsar.client.* credentials and TLS settings"
                )
        plugin = _get(options, AUTH_PLUGIN)
        params = _get(options, AUTH_PARAMS)
        if params is not None and not plugin:
            raise ValueError(f"option {AUTH_PARAMS} needs {AUTH_PLUGIN}")
        return ClientSecurity(
            auth_plugin=plugin or None,
            auth_params=params,
            tls_trust_certs_file_path=_get(options, TLS_TRUST_CERTS) or None,
            tls_allow_insecure_connection=_bool(options, TLS_ALLOW_INSECURE, False),
            tls_hostname_verification_enable=_bool(
                options, TLS_HOSTNAME_VERIFICATION, False
            ),
            tls_certificate_file_path=_get(options, TLS_CERTIFICATE) or None,
            tls_key_file_path=_get(options, TLS_KEY) or None,
        )


@dataclass(frozen=True)
class ConnectionOptions:
    service_url: str
    admin_url: str
    operation_timeout_s: int = 30
    security: ClientSecurity = field(default_factory=ClientSecurity)

    @property
    def service_tls(self) -> bool:
        """Whether the binary protocol runs over TLS (``pulsar+ssl://``)."""
        return urlparse(self.service_url).scheme == TLS_SCHEME

    @property
    def admin_tls(self) -> bool:
        """Whether the admin API is called over HTTPS."""
        return urlparse(self.admin_url).scheme == "https"

    @staticmethod
    def parse(options: Mapping[str, str]) -> ConnectionOptions:
        service_url = _get(options, "service.url")
        if not service_url:
            raise ValueError(
                "option service.url is required (pulsar://host:6650 or "
                "pulsar+ssl://host:6651)"
            )
        scheme = urlparse(service_url.split(",")[0].strip()).scheme
        if scheme not in ("pulsar", TLS_SCHEME):
            raise ValueError(
                f"option service.url must be pulsar://host:port or "
                f"pulsar+ssl://host:port, got {service_url!r}"
            )
        admin_url = _get(options, "admin.url") or admin_url_for(service_url)
        if urlparse(admin_url).scheme not in ("http", "https"):
            raise ValueError(
                f"option admin.url must be an http:// or https:// URL, got {admin_url!r}"
            )
        timeout = _int(options, "client.operationTimeoutSeconds", 30)
        assert timeout is not None
        conn = ConnectionOptions(
            service_url, admin_url.rstrip("/"), timeout, ClientSecurity.parse(options)
        )
        if conn.security.has_tls_options and not (conn.service_tls or conn.admin_tls):
            raise ValueError(
                "pulsar.client.tls* options are given, but service.url is not "
                "pulsar+ssl:// and admin.url is not https://: nothing would use them"
            )
        return conn


# A partition's user-given position: a Bound, or "earliest"/"latest" to resolve.
UserPosition = Bound | str


@dataclass(frozen=True)
class SourceOptions:
    conn: ConnectionOptions
    topics: tuple[str, ...] = ()
    topics_pattern: str | None = None
    starting: UserPosition | dict[str, dict[str, UserPosition]] = LATEST
    ending: UserPosition | dict[str, dict[str, UserPosition]] = LATEST
    starting_timestamp_ms: int | None = None
    fail_on_data_loss: bool = True
    max_records_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    receiver_queue_size: int = 2000
    arrow_batch_rows: int = 4096

    @staticmethod
    def parse(options: Mapping[str, str], streaming: bool) -> SourceOptions:
        conn = ConnectionOptions.parse(options)
        given = [n for n in ("topic", "topics", "topicsPattern") if _get(options, n)]
        if len(given) != 1:
            raise ValueError(
                "exactly one of the options topic, topics, topicsPattern is required"
                + (f" (got {', '.join(given)})" if given else "")
            )
        topics: tuple[str, ...] = ()
        pattern = None
        if given[0] == "topicsPattern":
            pattern = _get(options, "topicsPattern")
            assert pattern is not None
            re.compile(pattern)
        else:
            raw = _get(options, given[0]) or ""
            topics = tuple(t.strip() for t in raw.split(",") if t.strip())
            if given[0] == "topic" and len(topics) != 1:
                raise ValueError("option topic takes one topic; use topics for a list")
        default_start = LATEST if streaming else EARLIEST
        starting = _positions(options, "startingOffsets", default_start, inclusive=True)
        ending = _positions(options, "endingOffsets", LATEST, inclusive=False)
        if streaming and _get(options, "endingOffsets") is not None:
            raise ValueError("option endingOffsets is for batch queries only")
        if ending == EARLIEST:
            raise ValueError("endingOffsets cannot be earliest")
        ts_raw = _get(options, "startingTimestamp")
        ts = None
        if ts_raw is not None:
            try:
                ts = int(ts_raw)
            except ValueError:
                raise ValueError(
                    f"option startingTimestamp must be ms since the epoch, got {ts_raw!r}"
                ) from None
            if _get(options, "startingOffsets") is not None:
                raise ValueError("give startingOffsets or startingTimestamp, not both")
        return SourceOptions(
            conn=conn,
            topics=topics,
            topics_pattern=pattern,
            starting=starting,
            ending=ending,
            starting_timestamp_ms=ts,
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            max_records_per_trigger=_int(options, "maxRecordsPerTrigger", None),
            max_bytes_per_trigger=_int(options, "maxBytesPerTrigger", None),
            poll_timeout_ms=_int(options, "pollTimeoutMs", DEFAULT_POLL_TIMEOUT_MS)
            or DEFAULT_POLL_TIMEOUT_MS,
            receiver_queue_size=_int(options, "reader.receiverQueueSize", 2000) or 2000,
            arrow_batch_rows=_int(options, "arrowBatchRows", 4096) or 4096,
        )


def _positions(
    options: Mapping[str, str], name: str, default: str, inclusive: bool
) -> UserPosition | dict[str, dict[str, UserPosition]]:
    """``earliest`` | ``latest`` | JSON ``{"topic": {"<partition>": position}}``."""
    raw = _get(options, name)
    if raw is None:
        return default
    text = raw.strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    try:
        parsed = json.loads(text)
    except ValueError:
        raise ValueError(
            f"option {name} must be earliest, latest or JSON, got {raw!r}"
        ) from None
    if not isinstance(parsed, dict):
        raise ValueError(f"option {name}: JSON must be an object of topics")
    out: dict[str, dict[str, UserPosition]] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            parts = {"-1": parts}  # a non-partitioned topic: {"topic": "12:3"}
        try:
            out[str(topic)] = {
                str(p): parse_user_position(v, inclusive) for p, v in parts.items()
            }
        except ValueError as exc:
            raise ValueError(f"option {name}, topic {topic}: {exc}") from None
    return out


@dataclass(frozen=True)
class SinkOptions:
    conn: ConnectionOptions
    topic: str | None
    delivery_guarantee: str = EXACTLY_ONCE
    txn_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS
    state_location: str | None = None
    sink_id: str | None = None
    batching_max_messages: int = 1000
    batching_max_bytes: int = 131072
    max_pending_messages: int = 5000
    commit_parallelism: int = 8
    producer_settings: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def parse(options: Mapping[str, str]) -> SinkOptions:
        conn = ConnectionOptions.parse(options)
        guarantee = (_get(options, "deliveryGuarantee") or EXACTLY_ONCE).lower()
        if guarantee not in (EXACTLY_ONCE, AT_LEAST_ONCE):
            raise ValueError(
                f"option deliveryGuarantee must be {EXACTLY_ONCE} or {AT_LEAST_ONCE}, "
                f"got {guarantee!r}"
            )
        state = _get(options, "txnStateLocation")
        if state is None:
            checkpoint = _get(options, "checkpointLocation")
            if checkpoint:
                state = checkpoint.rstrip("/") + "/_quasar_sink"
        return SinkOptions(
            conn=conn,
            topic=_get(options, "topic"),
            delivery_guarantee=guarantee,
            txn_timeout_ms=_int(options, "txn.timeoutMs", DEFAULT_TXN_TIMEOUT_MS)
            or DEFAULT_TXN_TIMEOUT_MS,
            state_location=_local_path(state) if state else None,
            sink_id=_get(options, "sinkId"),
            batching_max_messages=_int(options, "producer.batchingMaxMessages", 1000)
            or 1000,
            batching_max_bytes=_int(options, "producer.batchingMaxBytes", 131072)
            or 131072,
            max_pending_messages=_int(options, "producer.maxPendingMessages", 5000)
            or 5000,
            commit_parallelism=_int(options, "commitParallelism", 8) or 8,
        )


def _local_path(location: str) -> str:
    """The sink's state directory as a local path (``file:`` URIs accepted).

    Raises:
        ValueError: a non-local URI (hdfs:, s3a:, ...): the decision record needs an
            atomic rename on a POSIX file system.
    """
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else location
    raise ValueError(
        f"txnStateLocation must be a local or shared POSIX path, got {location!r}"
    )
