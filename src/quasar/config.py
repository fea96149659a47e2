"""The broker's configuration: one tree of frozen dataclasses, parsed in one place.

Every setting has a *key*, Pulsar's ``broker.conf`` name (``journalMaxGroupWaitMSec``),
used by files, environment variables and ``to_properties()`` so an operator's Pulsar
knowledge carries over, and a Python *name*, the key in snake_case
(``journal_max_group_wait_msec``: an underscore before each capital that follows a
lower-case letter or digit, then lower case). A setting Pulsar does not have gets a key
in Pulsar's style and a comment saying it is quasar's own.

Settings are grouped into sections (``config.broker``, ``config.transaction``, ...);
each subsystem receives only its own section as a constructor argument, and nothing
reads settings from module-level state. The composition root may also read any setting
flat by its name (``config.journal_max_group_wait_msec``). The two batched-write
sections share one class, whose fields are named after the key suffix
(``config.transaction.transaction_log_batched_write.max_records``; flat:
``config.transaction_log_batched_write_max_records``).

Sources, later ones winning::

    defaults  <  --config FILE  <  QUASAR_<key> environment variables  <  overrides

* The file is Java-properties style: ``key=value`` (or ``key: value``), ``#``/``!``
  comments, blank lines. An empty value keeps the default, as in Pulsar's
  ``broker.conf`` where ``advertisedAddress=`` means "not set". An unknown key is
  logged as a warning (so a real ``broker.conf`` can be used as is); a line that is
  not a setting is an error.
* Environment variables are ``QUASAR_<key>`` (``QUASAR_brokerServicePort=6651``) or
  the upper-snake form (``QUASAR_BROKER_SERVICE_PORT``): underscores and case are
  ignored when matching, and the exact form wins if both are set. Other ``QUASAR_*``
  variables are ignored.
* Overrides (from the command line or code) must name known keys.

Values are converted from the field's type: ``int``, ``float``, ``bool`` (``true`` /
``false``, any case), ``str``, and ``tuple[...]`` from a comma-separated list. A bad
value raises ``ValueError`` naming the key and where the value came from.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from quasar.storage.api import ManagedLedgerConfig, RetentionPolicy

__all__ = [
    "BatchedWriteConfig",
    "BrokerConfig",
    "DispatchConfig",
    "JournalConfig",
    "ManagedLedgerSettings",
    "PolicyDefaults",
    "ServiceConfiguration",
    "TransactionConfig",
    "config_keys",
    "snake_case",
]

log = logging.getLogger(__name__)

ENV_PREFIX = "QUASAR_"

# A check returns None when the value is acceptable, else what was expected.
Check = Callable[[Any], str | None]


def _at_least(minimum: int | float) -> Check:
    def check(value: Any) -> str | None:
        return None if value >= minimum else f"a number >= {minimum}"

    return check


def _one_of(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in choices else "one of " + ", ".join(choices)

    return check


def _non_empty(value: Any) -> str | None:
    return None if value else "a non-empty string"


_PORT_RANGE = "a port number 0..65535 (0 picks a free port)"


def _port(value: Any) -> str | None:
    return None if 0 <= value <= 65535 else _PORT_RANGE


def _setting(default: Any, key: str, check: Check | None = None) -> Any:
    """A leaf setting: its default, its ``broker.conf`` key and an optional check."""
    return field(default=default, metadata={"key": key, "check": check})


def _section(cls: type, prefix: str = "") -> Any:
    """A nested section; ``prefix`` is prepended to the keys of its settings."""
    return field(default_factory=cls, metadata={"section": True, "prefix": prefix})


class _Section:
    """Base of every section: re-checks values when a section is built directly."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            check = f.metadata.get("check")
            if check is None:
                continue
            expected = check(getattr(self, f.name))
            if expected is not None:
                raise ValueError(
                    f"invalid value for {f.metadata['key']} ({f.name}): "
                    f"{getattr(self, f.name)!r}; expected {expected}"
                )


# --------------------------------------------------------------------------------------
# Sections. Every default carries a comment naming its source.


@dataclass(frozen=True)
class BrokerConfig(_Section):
    """Identity, listeners, data directory and per-connection limits."""

    # Pulsar standalone's cluster name.
    cluster_name: str = _setting("standalone", "clusterName", _non_empty)
    # Pulsar default (broker.conf brokerServicePort).
    broker_service_port: int = _setting(6650, "brokerServicePort", _port)
    # Pulsar default (broker.conf webServicePort).
    web_service_port: int = _setting(8080, "webServicePort", _port)
    # Pulsar default: listen on every interface.
    bind_address: str = _setting("0.0.0.0", "bindAddress", _non_empty)
    # Pulsar's default is the host's FQDN; quasar runs as a standalone broker whose
    # clients are usually on the same host, so it advertises loopback. Set it to a
    # reachable name when clients connect from elsewhere.
    advertised_address: str = _setting("127.0.0.1", "advertisedAddress", _non_empty)
    # quasar's own: root of ledgers, cursors and the metadata database.
    data_dir: str = _setting("./data", "dataDir", _non_empty)
    # Pulsar default 5 MiB (broker.conf maxMessageSize); also advertised in CONNECTED.
    max_message_size: int = _setting(5_242_880, "maxMessageSize", _at_least(1))
    # Pulsar default (broker.conf keepAliveIntervalSeconds).
    keep_alive_interval_seconds: int = _setting(
        30, "keepAliveIntervalSeconds", _at_least(1)
    )
    # Pulsar default (broker.conf maxPendingPublishRequestsPerConnection).
    max_pending_publish_requests_per_connection: int = _setting(
        1000, "maxPendingPublishRequestsPerConnection", _at_least(1)
    )
    # Pulsar default (broker.conf brokerShutdownTimeoutMs).
    broker_shutdown_timeout_ms: int = _setting(
        60_000, "brokerShutdownTimeoutMs", _at_least(0)
    )
    # Pulsar default: no super-users (broker.conf superUserRoles, comma-separated).
    super_user_roles: tuple[str, ...] = _setting((), "superUserRoles")

    @property
    def data_path(self) -> Path:
        """``data_dir`` as a path."""
        return Path(self.data_dir)


@dataclass(frozen=True)
class PolicyDefaults(_Section):
    """Broker-wide defaults for namespace policies (a namespace may override them)."""

    # Pulsar default (broker.conf allowAutoTopicCreation).
    allow_auto_topic_creation: bool = _setting(True, "allowAutoTopicCreation")
    # Pulsar default (broker.conf allowAutoTopicCreationType).
    allow_auto_topic_creation_type: str = _setting(
        "non-partitioned",
        "allowAutoTopicCreationType",
        _one_of("non-partitioned", "partitioned"),
    )
    # Pulsar default (broker.conf defaultNumPartitions).
    default_num_partitions: int = _setting(1, "defaultNumPartitions", _at_least(1))
    # Pulsar default (broker.conf brokerDeduplicationEnabled).
    broker_deduplication_enabled: bool = _setting(False, "brokerDeduplicationEnabled")
    # Pulsar default (broker.conf brokerDeduplicationMaxNumberOfProducers).
    broker_deduplication_max_number_of_producers: int = _setting(
        10_000, "brokerDeduplicationMaxNumberOfProducers", _at_least(1)
    )
    # Pulsar default 0: consumed data is deleted at once; -1 = keep forever.
    default_retention_time_in_minutes: int = _setting(
        0, "defaultRetentionTimeInMinutes", _at_least(-1)
    )
    # Pulsar default 0; -1 = no size limit.
    default_retention_size_in_mb: int = _setting(
        0, "defaultRetentionSizeInMB", _at_least(-1)
    )


@dataclass(frozen=True)
class DispatchConfig(_Section):
    """Limits on what the dispatchers hand out before acknowledgements come back."""

    # Pulsar default (broker.conf maxUnackedMessagesPerConsumer); 0 = unlimited.
    max_unacked_messages_per_consumer: int = _setting(
        50_000, "maxUnackedMessagesPerConsumer", _at_least(0)
    )
    # Pulsar default (broker.conf maxUnackedMessagesPerSubscription); 0 = unlimited.
    max_unacked_messages_per_subscription: int = _setting(
        200_000, "maxUnackedMessagesPerSubscription", _at_least(0)
    )


@dataclass(frozen=True)
class ManagedLedgerSettings(_Section):
    """Ledger rollover, the entry cache and cursor persistence."""

    # Pulsar default (broker.conf managedLedgerMaxEntriesPerLedger).
    managed_ledger_max_entries_per_ledger: int = _setting(
        50_000, "managedLedgerMaxEntriesPerLedger", _at_least(1)
    )
    # Pulsar default (broker.conf managedLedgerMinLedgerRolloverTimeMinutes).
    managed_ledger_min_ledger_rollover_time_minutes: int = _setting(
        10, "managedLedgerMinLedgerRolloverTimeMinutes", _at_least(0)
    )
    # Pulsar default (broker.conf managedLedgerMaxLedgerRolloverTimeMinutes).
    managed_ledger_max_ledger_rollover_time_minutes: int = _setting(
        240, "managedLedgerMaxLedgerRolloverTimeMinutes", _at_least(1)
    )
    # Pulsar default (broker.conf managedLedgerMaxSizePerLedgerMbytes).
    managed_ledger_max_size_per_ledger_mbytes: int = _setting(
        2048, "managedLedgerMaxSizePerLedgerMbytes", _at_least(1)
    )
    # quasar's choice: 64 MB suits one process on a developer machine. Pulsar's
    # default is 1/5 of the JVM's direct memory, which has no Python counterpart.
    managed_ledger_cache_size_mb: int = _setting(
        64, "managedLedgerCacheSizeMB", _at_least(0)
    )
    # Pulsar default (broker.conf managedLedgerDefaultMarkDeleteRateLimit): cursor
    # persists per second for ordinary acks; 0 = persist on every ack.
    managed_ledger_default_mark_delete_rate_limit: float = _setting(
        1.0, "managedLedgerDefaultMarkDeleteRateLimit", _at_least(0.0)
    )
    # Pulsar default (broker.conf managedLedgerMaxUnackedRangesToPersist).
    managed_ledger_max_unacked_ranges_to_persist: int = _setting(
        10_000, "managedLedgerMaxUnackedRangesToPersist", _at_least(1)
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if (
            self.managed_ledger_min_ledger_rollover_time_minutes
            > self.managed_ledger_max_ledger_rollover_time_minutes
        ):
            raise ValueError(
                "managedLedgerMinLedgerRolloverTimeMinutes must not exceed "
                "managedLedgerMaxLedgerRolloverTimeMinutes"
            )

    @property
    def cursor_persist_interval_ms(self) -> int:
        """The mark-delete rate limit as the interval the storage layer uses."""
        rate = self.managed_ledger_default_mark_delete_rate_limit
        return 0 if rate <= 0 else round(1000 / rate)


@dataclass(frozen=True)
class JournalConfig(_Section):
    """Group commit of the embedded ledger storage (BookKeeper's journal settings)."""

    # BookKeeper default (bk_server.conf journalSyncData): fsync before acknowledging.
    journal_sync_data: bool = _setting(True, "journalSyncData")
    # 1 ms as in the OpenMessaging benchmark's Pulsar deployment (BookKeeper's own
    # default is 2 ms): the longest a write waits for others to share its fsync.
    journal_max_group_wait_msec: int = _setting(
        1, "journalMaxGroupWaitMSec", _at_least(0)
    )
    # BookKeeper default (bk_server.conf journalBufferedWritesThreshold): flush a
    # group once this many bytes are pending.
    journal_buffered_writes_threshold: int = _setting(
        524_288, "journalBufferedWritesThreshold", _at_least(1)
    )


@dataclass(frozen=True)
class BatchedWriteConfig(_Section):
    """PIP-160 batching of transaction-log or pending-ack records into one entry.

    Used twice under different key prefixes (``transactionLogBatchedWrite*`` and
    ``transactionPendingAckBatchedWrite*``); the keys below are suffixes.
    """

    # Pulsar default (PIP-160): off.
    enabled: bool = _setting(False, "Enabled")
    # Pulsar default (PIP-160).
    max_records: int = _setting(512, "MaxRecords", _at_least(1))
    # Pulsar default (PIP-160): 4 MiB.
    max_size: int = _setting(4_194_304, "MaxSize", _at_least(1))
    # Pulsar default (PIP-160).
    max_delay_in_millis: int = _setting(1, "MaxDelayInMillis", _at_least(0))


@dataclass(frozen=True)
class TransactionConfig(_Section):
    """Transaction coordinator, transaction buffer and pending-ack settings."""

    # Pulsar's default is false; quasar is a transactional broker, so it is on.
    transaction_coordinator_enabled: bool = _setting(
        True, "transactionCoordinatorEnabled"
    )
    # quasar's own key: the partitions the coordinator-assign topic gets when it is
    # created. 1 is what Pulsar's standalone creates (PulsarStandalone); a cluster set
    # up with initialize-transaction-coordinator-metadata gets 16 by default. An
    # existing assign topic keeps its count.
    transaction_coordinator_count: int = _setting(
        1, "transactionCoordinatorCount", _at_least(1)
    )
    # Pulsar default (broker.conf transactionBufferSnapshotMaxTransactionCount).
    transaction_buffer_snapshot_max_transaction_count: int = _setting(
        1000, "transactionBufferSnapshotMaxTransactionCount", _at_least(1)
    )
    # Pulsar default (broker.conf transactionBufferSnapshotMinTimeInMillis).
    transaction_buffer_snapshot_min_time_in_millis: int = _setting(
        5000, "transactionBufferSnapshotMinTimeInMillis", _at_least(1)
    )
    # Pulsar default (broker.conf maxActiveTransactionsPerCoordinator): 0 = unlimited.
    max_active_transactions_per_coordinator: int = _setting(
        0, "maxActiveTransactionsPerCoordinator", _at_least(0)
    )
    # quasar's own key; Pulsar's coordinator retries an end every 1000 ms (hard-coded).
    transaction_end_retry_interval_ms: int = _setting(
        1000, "transactionEndRetryIntervalMs", _at_least(1)
    )
    # PIP-255 (issue #19744) proposes 0 (feature off). quasar turns it on because its
    # Spark sink relies on idempotent commit; issue 4 sets 64 terminated transactions
    # per client name (a few hundred bytes each in memory). 0 = off.
    transaction_meta_persist_count: int = _setting(
        64, "transactionMetaPersistCount", _at_least(0)
    )
    # PIP-255 (issue #19744) default: terminated-transaction metadata kept 72 hours.
    transaction_meta_persist_time_in_hour: int = _setting(
        72, "transactionMetaPersistTimeInHour", _at_least(1)
    )
    # PIP-255 (issue #19744) default: how often expired entries are dropped.
    transaction_meta_expire_check_interval_in_second: int = _setting(
        300, "transactionMetaExpireCheckIntervalInSecond", _at_least(1)
    )
    transaction_log_batched_write: BatchedWriteConfig = _section(
        BatchedWriteConfig, "transactionLogBatchedWrite"
    )
    transaction_pending_ack_batched_write: BatchedWriteConfig = _section(
        BatchedWriteConfig, "transactionPendingAckBatchedWrite"
    )


@dataclass(frozen=True)
class ServiceConfiguration(_Section):
    """The whole configuration; build it with ``ServiceConfiguration.load``."""

    broker: BrokerConfig = _section(BrokerConfig)
    policies: PolicyDefaults = _section(PolicyDefaults)
    dispatch: DispatchConfig = _section(DispatchConfig)
    managed_ledger: ManagedLedgerSettings = _section(ManagedLedgerSettings)
    journal: JournalConfig = _section(JournalConfig)
    transaction: TransactionConfig = _section(TransactionConfig)

    @classmethod
    def load(
        cls,
        config_file: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> ServiceConfiguration:
        """Build the effective configuration from every source.

        Args:
            config_file: a Java-properties file, or ``None``.
            env: environment variables; ``None`` means ``os.environ``. Pass ``{}``
                to ignore the environment.
            overrides: ``{key: value}`` with Pulsar key names; values may be typed
                (``6651``) or strings (``"6651"``).

        Raises:
            ValueError: a bad value (naming the key and its source), a malformed
                line in the file, or an unknown key in ``overrides``.
            OSError: the file cannot be read.
        """
        values: dict[str, Any] = {}
        if config_file is not None:
            values.update(_read_properties_file(Path(config_file)))
        values.update(_read_env(os.environ if env is None else env))
        for key, value in (overrides or {}).items():
            if key not in config_keys():
                raise ValueError(f"unknown configuration key in overrides: {key}")
            values[key] = _convert(key, value, "override")
        return _build(cls, "", values)

    def items(self) -> Iterator[tuple[str, Any]]:
        """``(key, value)`` for every setting, in declaration order."""
        for key, spec in config_keys().items():
            yield key, spec.get(self)

    def value_of(self, key: str) -> Any:
        """The value of one setting by its Pulsar key.

        Raises:
            KeyError: unknown key.
        """
        return config_keys()[key].get(self)

    def to_properties(self) -> str:
        """The effective configuration as a properties file (loadable again)."""
        lines: list[str] = []
        section = ""
        for key, spec in config_keys().items():
            if spec.path[0] != section:
                section = spec.path[0]
                lines.append(("\n" if lines else "") + f"# [{section}]")
            lines.append(f"{key}={_format(spec.get(self))}")
        return "\n".join(lines) + "\n"

    def __getattr__(self, name: str) -> Any:
        # Only called for names that are not real attributes: resolve a flat setting
        # name (the snake_case of its key) to its value inside a section.
        spec = _flat_names().get(name)
        if spec is None:
            raise AttributeError(f"{type(self).__name__} has no setting {name!r}")
        return spec.get(self)

    def managed_ledger_config(self) -> ManagedLedgerConfig:
        """Per-topic ledger settings, with the broker-wide default retention."""
        ml = self.managed_ledger
        return ManagedLedgerConfig(
            max_entries_per_ledger=ml.managed_ledger_max_entries_per_ledger,
            max_size_per_ledger_mb=ml.managed_ledger_max_size_per_ledger_mbytes,
            max_ledger_rollover_time_minutes=ml.managed_ledger_max_ledger_rollover_time_minutes,
            min_ledger_rollover_time_minutes=ml.managed_ledger_min_ledger_rollover_time_minutes,
            retention=RetentionPolicy(
                retention_time_minutes=self.policies.default_retention_time_in_minutes,
                retention_size_mb=self.policies.default_retention_size_in_mb,
            ),
            cursor_persist_interval_ms=ml.cursor_persist_interval_ms,
        )


# --------------------------------------------------------------------------------------
# The key catalogue: built once from the dataclass fields.


@dataclass(frozen=True)
class KeySpec:
    """Where one key lives in the tree and how its value is typed and checked."""

    key: str
    path: tuple[str, ...]  # attribute names from ServiceConfiguration down
    type: Any
    default: Any
    check: Check | None

    def get(self, config: ServiceConfiguration) -> Any:
        obj: Any = config
        for name in self.path:
            obj = getattr(obj, name)
        return obj


@cache
def config_keys() -> Mapping[str, KeySpec]:
    """Every configuration key, in declaration order (read-only)."""
    specs: dict[str, KeySpec] = {}
    _collect(ServiceConfiguration, "", (), specs)
    return types.MappingProxyType(specs)


def snake_case(key: str) -> str:
    """A key's Python name: ``journalMaxGroupWaitMSec`` -> ``journal_max_group_wait_msec``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


@cache
def _flat_names() -> dict[str, KeySpec]:
    return {snake_case(key): spec for key, spec in config_keys().items()}


@cache
def _normalized_keys() -> dict[str, str]:
    # Upper case without underscores: QUASAR_BROKER_SERVICE_PORT and
    # QUASAR_brokerServicePort both normalise to BROKERSERVICEPORT.
    return {key.upper(): key for key in config_keys()}


def _collect(
    cls: type, prefix: str, path: tuple[str, ...], out: dict[str, KeySpec]
) -> None:
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("section"):
            _collect(
                hints[f.name], prefix + f.metadata["prefix"], path + (f.name,), out
            )
            continue
        key = prefix + f.metadata["key"]
        # A newly added key that collides with an old one would silently shadow it.
        assert key not in out, f"duplicate configuration key {key}"
        out[key] = KeySpec(
            key, path + (f.name,), hints[f.name], f.default, f.metadata["check"]
        )


def _build(cls: type, prefix: str, values: Mapping[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("section"):
            sub = typing.get_type_hints(cls)[f.name]
            kwargs[f.name] = _build(sub, prefix + f.metadata["prefix"], values)
        elif prefix + f.metadata["key"] in values:
            kwargs[f.name] = values[prefix + f.metadata["key"]]
    return cls(**kwargs)


# --------------------------------------------------------------------------------------
# Sources.


_LINE = re.compile(r"^\s*([^=:\s]+)\s*[=:]\s?(.*)$")


def _read_properties_file(path: Path) -> dict[str, Any]:
    values: dict[str, Any] = {}
    unknown: list[str] = []
    text = path.read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        match = _LINE.match(line)
        if match is None:
            raise ValueError(f"{path}:{number}: expected 'key=value', got {stripped!r}")
        key, raw = match.group(1), match.group(2).strip()
        if key not in config_keys():
            unknown.append(key)
            continue
        if raw == "":
            continue  # as in broker.conf: an empty value means "use the default"
        values[key] = _convert(key, raw, f"{path}:{number}")
    if unknown:
        log.warning(
            "ignoring unknown configuration keys in %s: %s", path, ", ".join(unknown)
        )
    return values


def _read_env(env: Mapping[str, str]) -> dict[str, Any]:
    exact: dict[str, Any] = {}
    loose: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        suffix = name[len(ENV_PREFIX) :]
        source = f"environment variable {name}"
        if suffix in config_keys():
            exact[suffix] = _convert(suffix, raw, source)
            continue
        key = _normalized_keys().get(suffix.replace("_", "").upper())
        if key is None:
            log.debug("ignoring %s: not a configuration key", name)
            continue
        loose[key] = _convert(key, raw, source)
    return {**loose, **exact}


# --------------------------------------------------------------------------------------
# Conversion.


def _convert(key: str, raw: Any, source: str) -> Any:
    """Convert ``raw`` to the type of ``key``'s field and run its check."""
    spec = config_keys()[key]
    try:
        value = _to_type(spec.type, raw)
        expected = spec.check(value) if spec.check is not None else None
    except (TypeError, ValueError) as exc:
        expected = str(exc)
    if expected is not None:
        raise ValueError(
            f"invalid value for {key} (from {source}): {raw!r}; expected {expected}"
        )
    return value


def _to_type(tp: Any, raw: Any) -> Any:
    if typing.get_origin(tp) is tuple:
        (item_type, _) = typing.get_args(tp)
        if isinstance(raw, str):
            parts: list[Any] = [p.strip() for p in raw.split(",") if p.strip()]
        elif isinstance(raw, (list, tuple)):
            parts = list(raw)
        else:
            raise ValueError("a comma-separated list")
        return tuple(_to_type(item_type, p) for p in parts)
    if tp is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise ValueError("true or false")
    if tp is int:
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise ValueError("an integer")
        try:
            return int(raw)
        except ValueError:
            raise ValueError("an integer") from None
    if tp is float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            raise ValueError("a number")
        try:
            return float(raw)
        except ValueError:
            raise ValueError("a number") from None
    if tp is str:
        if not isinstance(raw, str):
            raise ValueError("a string")
        return raw.strip()
    raise AssertionError(f"unsupported configuration type {tp!r}")


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(_format(v) for v in value)
    return str(value)
