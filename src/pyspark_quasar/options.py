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


def admin_url_for(service_url: str) -> str:
    """``http://<host of service.url>:8080``, where standalone serves the admin API."""
    host = urlparse(service_url.split(",")[0]).hostname or "127.0.0.1"
    return f"http://{host}:8080"


@dataclass(frozen=True)
class ConnectionOptions:
    service_url: str
    admin_url: str
    operation_timeout_s: int = 30

    @staticmethod
    def parse(options: Mapping[str, str]) -> ConnectionOptions:
        service_url = _get(options, "service.url")
        if not service_url:
            raise ValueError("option service.url is required (pulsar://host:6650)")
        admin_url = _get(options, "admin.url") or admin_url_for(service_url)
        timeout = _int(options, "client.operationTimeoutSeconds", 30)
        assert timeout is not None
        return ConnectionOptions(service_url, admin_url.rstrip("/"), timeout)


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
