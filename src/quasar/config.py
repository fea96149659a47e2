"""The broker's configuration: one tree of frozen dataclasses, parsed in one place.

Every setting has a *key*, Pulsar's ``broker.conf`` name (``journalMaxGroupWaitMSec``),
used by files, environment variables and ``to_properties()`` so an operator's Pulsar
knowledge carries over, and a Python *name*, the key in snake_case
(``journal_max_group_wait_msec``: an underscore before each capital that follows a
lower-case letter or digit, then lower case; inside a section with a key prefix, the
name is that of the key's suffix). A setting Pulsar does not have gets a key in
Pulsar's style and a comment saying it is quasar's own.

Settings are grouped into sections, and a setting is read through its section
(``config.journal.journal_sync_data``): there is one way to read it. A subsystem
below this module defines its section beside its code and receives that section as a
constructor argument; nothing reads settings from module-level state:

* ``config.managed_ledger`` and ``config.journal``: ``quasar.storage.config``;
* ``config.metadata_store``: ``quasar.storage.metadata.config`` (where metadata lives);
* ``config.transaction``: ``quasar.transaction.config``, which composes the
  coordinator, transaction-buffer and batched-log sections of its packages;
* ``config.token_authentication``: here, read by ``quasar.auth.tokens``;
* ``config.broker``, ``config.policies`` and ``config.dispatch``: here, since the
  broker sits above this module. ``BrokerService`` receives the whole
  ``ServiceConfiguration``, as Pulsar's does, and hands each subsystem its part.

A section may carry a key prefix for the settings inside it: the two batched-write
sections share one class whose fields are named after the key suffix
(``config.transaction.transaction_log_batched_write.max_records`` is
``transactionLogBatchedWriteMaxRecords``). How a section declares its settings, and
the tunables that have no key, are described in ``quasar.config_schema``.

Sources, later ones winning::

    defaults  <  --config FILE  <  QUASAR_<key> environment variables  <  overrides

* The file is Java-properties style: ``key=value`` (or ``key: value``), ``#``/``!``
  comments, blank lines. An empty value keeps the default, as in Pulsar's
  ``broker.conf`` where ``advertisedAddress=`` means "not set"; for a setting that
  may be absent (the listener ports, typed ``int | None``) empty means "off", so
  ``brokerServicePort=`` turns the plaintext port off. An unknown key is
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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from quasar.config_schema import (
    Check,
    Section,
    at_least,
    non_empty,
    one_of,
    port,
    section,
    setting,
)
from quasar.protocol.advertised_listeners import (
    AdvertisedListener,
    parse_advertised_listeners,
)
from quasar.resources.bundles import RANGE_EQUALLY_DIVIDE, SPLIT_ALGORITHMS
from quasar.resources.models import SCHEMA_COMPATIBILITY_STRATEGIES
from quasar.resources.partitions import JAVA_INT_MAX
from quasar.storage.api import ManagedLedgerConfig, RetentionPolicy
from quasar.storage.config import JournalConfig, ManagedLedgerSettings
from quasar.storage.metadata.config import MetadataStoreConfig
from quasar.transaction.batched_log.config import BatchedWriteConfig
from quasar.transaction.config import TransactionConfig

__all__ = [
    "KEYS_WITHOUT_EFFECT",
    "AuthenticationConfig",
    "AuthorizationConfig",
    "BatchedWriteConfig",
    "BrokerConfig",
    "LoadBalancerConfig",
    "DelayedDeliveryConfig",
    "DispatchConfig",
    "JournalConfig",
    "ManagedLedgerSettings",
    "PolicyDefaults",
    "ServiceConfiguration",
    "TLS_PROTOCOLS",
    "TlsConfig",
    "TokenAuthenticationConfig",
    "TopicListConfig",
    "TransactionConfig",
    "config_keys",
    "snake_case",
]

log = logging.getLogger(__name__)

ENV_PREFIX = "QUASAR_"

# Keys accepted so that a Pulsar broker.conf loads unchanged, for features quasar
# does not have yet. A value other than the default is logged at load, so it is never
# dropped silently; a key leaves this table when a subsystem starts to read it.
KEYS_WITHOUT_EFFECT: Mapping[str, str] = types.MappingProxyType(
    {
        "brokerShutdownTimeoutMs": "shutdown waits for topics to close, unbounded",
        "maxUnackedMessagesPerSubscription": (
            "only maxUnackedMessagesPerConsumer bounds dispatch"
        ),
    }
)

# --------------------------------------------------------------------------------------
# The broker's sections. Every default carries a comment naming its source.


# Pulsar's tlsProtocols names; Python's ssl module sets a minimum and a maximum
# version, so a list is applied as the range from its oldest to its newest entry.
TLS_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")


def optional_port(value: Any) -> str | None:
    """Accept a TCP port, or ``None`` (an empty value): the listener is off."""
    return None if value is None else port(value)


def tls_protocol_names(value: Any) -> str | None:
    """Accept a list of Pulsar's TLS protocol names."""
    bad = [name for name in value if name not in TLS_PROTOCOLS]
    return None if not bad else "a comma-separated list of " + ", ".join(TLS_PROTOCOLS)


def pem_files_only(value: Any) -> str | None:
    """Refuse the key-store form of TLS settings, which quasar does not read."""
    return None if not value else (
        "false: quasar reads PEM files only (brokerClientTrustCertsFilePath, "
        "brokerClientCertificateFilePath, brokerClientKeyFilePath)"
    )


def advertised_listeners(value: Any) -> str | None:
    """Accept Pulsar's ``advertisedListeners`` list."""
    try:
        parse_advertised_listeners(value)
    except ValueError as exc:
        return f"name:scheme://host:port entries ({exc})"
    return None


@dataclass(frozen=True)
class BrokerConfig(Section):
    """Identity, listeners, data directory and per-connection limits."""

    # Pulsar standalone's cluster name.
    cluster_name: str = setting("standalone", "clusterName", non_empty)
    # Pulsar default (broker.conf brokerServicePort); empty turns the plaintext
    # binary listener off (a TLS-only broker).
    broker_service_port: int | None = setting(6650, "brokerServicePort", optional_port)
    # Pulsar default (broker.conf webServicePort); empty turns plain HTTP off.
    web_service_port: int | None = setting(8080, "webServicePort", optional_port)
    # Pulsar default: no TLS listener (6651 is the conventional value); the
    # certificate and key are in the ``tls`` section.
    broker_service_port_tls: int | None = setting(
        None, "brokerServicePortTls", optional_port
    )
    # Pulsar default: no HTTPS listener (8443 is the conventional value).
    web_service_port_tls: int | None = setting(None, "webServicePortTls", optional_port)
    # quasar's choice: loopback. Pulsar listens on every interface (0.0.0.0); a broker
    # reachable from the network before anyone configured authentication is an open
    # door, so reaching beyond this host takes an explicit bindAddress.
    bind_address: str = setting("127.0.0.1", "bindAddress", non_empty)
    # Pulsar's default is the host's FQDN; quasar runs as a standalone broker whose
    # clients are usually on the same host, so it advertises loopback. Set it to a
    # reachable name when clients connect from elsewhere.
    advertised_address: str = setting("127.0.0.1", "advertisedAddress", non_empty)
    # Pulsar default: none (broker.conf advertisedListeners): the broker's names on
    # other networks, ``name:pulsar://host:port,name:pulsar+ssl://host:port,...``
    # (quasar.protocol.advertised_listeners). A lookup naming a listener is answered
    # with its URLs.
    advertised_listeners: str = setting("", "advertisedListeners", advertised_listeners)
    # Pulsar default: the first listener of advertisedListeners (broker.conf
    # internalListenerName); a lookup naming no listener is answered with its URLs.
    internal_listener_name: str = setting("", "internalListenerName")
    # quasar's own: root of ledgers, cursors and the metadata database.
    data_dir: str = setting("./data", "dataDir", non_empty)
    # Pulsar default 5 MiB (broker.conf maxMessageSize); also advertised in CONNECTED.
    max_message_size: int = setting(5_242_880, "maxMessageSize", at_least(1))
    # Pulsar default since 3.2 (broker.conf topicCompactionRetainNullKey, PIP-318):
    # compaction drops messages without a key; true keeps them in the compacted view.
    topic_compaction_retain_null_key: bool = setting(False, "topicCompactionRetainNullKey")
    # Pulsar default (broker.conf keepAliveIntervalSeconds).
    keep_alive_interval_seconds: int = setting(
        30, "keepAliveIntervalSeconds", at_least(1)
    )
    # Pulsar default (broker.conf maxPendingPublishRequestsPerConnection).
    max_pending_publish_requests_per_connection: int = setting(
        1000, "maxPendingPublishRequestsPerConnection", at_least(1)
    )
    # Pulsar default (broker.conf brokerMaxConnections); 0 = unlimited. A connection
    # over it gets ERROR(NotAllowedError) and is closed at accept.
    broker_max_connections: int = setting(0, "brokerMaxConnections", at_least(0))
    # Pulsar default (broker.conf brokerMaxConnectionsPerIp); 0 = unlimited.
    broker_max_connections_per_ip: int = setting(
        0, "brokerMaxConnectionsPerIp", at_least(0)
    )
    # Pulsar default (broker.conf maxProducersPerTopic); 0 = unlimited.
    max_producers_per_topic: int = setting(0, "maxProducersPerTopic", at_least(0))
    # Pulsar default (broker.conf maxConsumersPerTopic); 0 = unlimited.
    max_consumers_per_topic: int = setting(0, "maxConsumersPerTopic", at_least(0))
    # Pulsar default (broker.conf maxConsumersPerSubscription); 0 = unlimited.
    max_consumers_per_subscription: int = setting(
        0, "maxConsumersPerSubscription", at_least(0)
    )
    # quasar's own (Pulsar has no per-connection bound); 0 = unlimited. Each producer
    # costs the broker memory, so one connection may not create them without end.
    max_producers_per_connection: int = setting(
        10_000, "maxProducersPerConnection", at_least(0)
    )
    # quasar's own, as maxProducersPerConnection, for consumers.
    max_consumers_per_connection: int = setting(
        10_000, "maxConsumersPerConnection", at_least(0)
    )
    # Pulsar default (broker.conf pulsarChannelWriteBufferHighWaterMark): once this
    # many bytes wait in a connection's write buffer, dispatch to its consumers stops
    # until the buffer drains below the low-water mark.
    pulsar_channel_write_buffer_high_water_mark: int = setting(
        64 * 1024, "pulsarChannelWriteBufferHighWaterMark", at_least(1)
    )
    # Pulsar default (broker.conf pulsarChannelWriteBufferLowWaterMark).
    pulsar_channel_write_buffer_low_water_mark: int = setting(
        32 * 1024, "pulsarChannelWriteBufferLowWaterMark", at_least(0)
    )
    # Pulsar's key, whose default false lets a client that sends requests and never
    # reads the answers (receipts, PONGs, errors) grow the broker's write buffer
    # without end. quasar stops reading such a connection while its write buffer is
    # above the high-water mark, until it drains below the low-water mark.
    pulsar_channel_pause_receiving_requests_if_unwritable: bool = setting(
        True, "pulsarChannelPauseReceivingRequestsIfUnwritable"
    )
    # quasar's own: a frame whose first bytes arrived must be complete within this
    # time, or the connection is closed. Long enough for a maxMessageSize frame on a
    # slow link (5 MiB at 1 Mbit/s takes 42 s); short enough that a client dripping
    # bytes cannot hold a frame buffer for ever.
    incomplete_frame_timeout_seconds: int = setting(
        60, "incompleteFrameTimeoutSeconds", at_least(1)
    )
    # quasar's own: bytes of incomplete frames all connections together may hold.
    # Over it, a connection whose incomplete frame grows past 64 KiB is closed.
    max_incomplete_frames_size_in_mb: int = setting(
        256, "maxIncompleteFramesSizeInMB", at_least(1)
    )
    # Pulsar default (broker.conf enableNonPersistentTopics): serve non-persistent://
    # topics; when false, producing, subscribing and lookups of their partitions
    # are refused with NotAllowedError, as Pulsar refuses them.
    enable_non_persistent_topics: bool = setting(True, "enableNonPersistentTopics")
    # Pulsar default (broker.conf brokerShutdownTimeoutMs).
    broker_shutdown_timeout_ms: int = setting(
        60_000, "brokerShutdownTimeoutMs", at_least(0)
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        listeners = parse_advertised_listeners(self.advertised_listeners)
        name = self.internal_listener_name
        if name and name not in listeners:
            # Pulsar's message when advertisedListeners is set; quasar also refuses
            # the name alone, which would otherwise name nothing.
            raise ValueError(
                "the `advertisedListeners` configure do not contain "
                f"`internalListenerName` entry ({name})"
            )

    @property
    def listeners(self) -> dict[str, AdvertisedListener]:
        """The advertised listeners by name (empty: none configured)."""
        return parse_advertised_listeners(self.advertised_listeners)

    @property
    def internal_listener(self) -> AdvertisedListener | None:
        """The listener a lookup naming none answers with (None: no listeners, the
        URLs built from advertisedAddress answer)."""
        listeners = self.listeners
        if not listeners:
            return None
        return listeners[self.internal_listener_name or next(iter(listeners))]

    @property
    def data_path(self) -> Path:
        """``data_dir`` as a path."""
        return Path(self.data_dir)

    @property
    def broker_service_url(self) -> str | None:
        """The plaintext binary-protocol URL clients are given in lookups, if on."""
        if self.broker_service_port is None:
            return None
        return f"pulsar://{self.advertised_address}:{self.broker_service_port}"

    @property
    def broker_service_url_tls(self) -> str | None:
        """The TLS binary-protocol URL clients are given in lookups, if on."""
        if self.broker_service_port_tls is None:
            return None
        return f"pulsar+ssl://{self.advertised_address}:{self.broker_service_port_tls}"

    @property
    def web_service_url(self) -> str | None:
        """The admin REST API's plain-HTTP URL, if on."""
        if self.web_service_port is None:
            return None
        return f"http://{self.advertised_address}:{self.web_service_port}"

    @property
    def web_service_url_tls(self) -> str | None:
        """The admin REST API's HTTPS URL, if on."""
        if self.web_service_port_tls is None:
            return None
        return f"https://{self.advertised_address}:{self.web_service_port_tls}"


@dataclass(frozen=True)
class TlsConfig(Section):
    """Certificates and rules of the TLS listeners (``brokerServicePortTls`` and
    ``webServicePortTls`` in the broker section turn them on)."""

    # Pulsar default: none; required when a TLS port is set (PEM certificate chain).
    tls_certificate_file_path: str = setting("", "tlsCertificateFilePath")
    # Pulsar default: none; required when a TLS port is set (PEM private key).
    tls_key_file_path: str = setting("", "tlsKeyFilePath")
    # Pulsar default: none, which trusts the system's CAs for client certificates.
    tls_trust_certs_file_path: str = setting("", "tlsTrustCertsFilePath")
    # Pulsar default: an untrusted client certificate fails the handshake; true
    # accepts such clients without asking for a certificate at all, and (as Pulsar's
    # broker client) lets a member with brokerClientTlsEnabled accept any
    # certificate from the other members.
    tls_allow_insecure_connection: bool = setting(False, "tlsAllowInsecureConnection")
    # Pulsar default: a client certificate is optional (but checked when sent).
    tls_require_trusted_client_cert_on_connect: bool = setting(
        False, "tlsRequireTrustedClientCertOnConnect"
    )
    # Pulsar default: empty, the TLS library's defaults.
    tls_protocols: tuple[str, ...] = setting((), "tlsProtocols", tls_protocol_names)
    # Pulsar default: empty, the TLS library's defaults. Names are OpenSSL's
    # (ECDHE-RSA-AES128-GCM-SHA256); they restrict TLS 1.2 and older only.
    tls_ciphers: tuple[str, ...] = setting((), "tlsCiphers")
    # Pulsar default (broker.conf tlsCertRefreshCheckDurationSec); 0 = at every new
    # connection.
    tls_cert_refresh_check_duration_sec: int = setting(
        300, "tlsCertRefreshCheckDurationSec", at_least(0)
    )
    # Pulsar default (broker.conf brokerClientTlsEnabled): a cluster member reaches
    # the others at their pulsar+ssl:// and https:// URLs instead of the plaintext
    # ones (ends of transactions, the transaction admin routes it gathers).
    broker_client_tls_enabled: bool = setting(False, "brokerClientTlsEnabled")
    # Pulsar default: none; the CA certificates (PEM) the other members'
    # certificates must chain to. quasar requires it with brokerClientTlsEnabled.
    broker_client_trust_certs_file_path: str = setting(
        "", "brokerClientTrustCertsFilePath"
    )
    # Pulsar default: none; the certificate (PEM) a member presents to the others,
    # for members with tlsRequireTrustedClientCertOnConnect=true.
    broker_client_certificate_file_path: str = setting(
        "", "brokerClientCertificateFilePath"
    )
    # Pulsar default: none; the unencrypted private key (PEM) of that certificate.
    broker_client_key_file_path: str = setting("", "brokerClientKeyFilePath")
    # Pulsar default: empty, the TLS library's defaults; the TLS versions a member
    # offers the others (as tlsProtocols for the listeners).
    broker_client_tls_protocols: tuple[str, ...] = setting(
        (), "brokerClientTlsProtocols", tls_protocol_names
    )
    # Pulsar default: empty, the TLS library's defaults. Names are OpenSSL's
    # (ECDHE-RSA-AES128-GCM-SHA256); they restrict TLS 1.2 and older only.
    broker_client_tls_ciphers: tuple[str, ...] = setting((), "brokerClientTlsCiphers")
    # Pulsar default (broker.conf brokerClientTlsEnabledWithKeyStore); quasar reads
    # PEM files only, so true is refused rather than ignored.
    broker_client_tls_enabled_with_key_store: bool = setting(
        False, "brokerClientTlsEnabledWithKeyStore", pem_files_only
    )
    # Pulsar default (ServiceConfiguration tlsHostnameVerificationEnabled): a member
    # checks the chain of another member's certificate but not that it names the
    # host it connects to; true checks that too.
    tls_hostname_verification_enabled: bool = setting(
        False, "tlsHostnameVerificationEnabled"
    )


def partition_count(minimum: int) -> Check:
    """Accept a partition count from ``minimum`` up to a Java int, Pulsar's type."""

    def check(value: Any) -> str | None:
        ok = minimum <= value <= JAVA_INT_MAX
        return None if ok else f"an integer >= {minimum} and <= {JAVA_INT_MAX}"

    return check


@dataclass(frozen=True)
class PolicyDefaults(Section):
    """Broker-wide defaults for namespace policies (a namespace may override them)."""

    # Pulsar default (broker.conf allowAutoTopicCreation).
    allow_auto_topic_creation: bool = setting(True, "allowAutoTopicCreation")
    # Pulsar default (broker.conf allowAutoTopicCreationType).
    allow_auto_topic_creation_type: str = setting(
        "non-partitioned",
        "allowAutoTopicCreationType",
        one_of("non-partitioned", "partitioned"),
    )
    # Pulsar default (broker.conf defaultNumPartitions).
    default_num_partitions: int = setting(
        1, "defaultNumPartitions", partition_count(minimum=1)
    )
    # Pulsar's key (broker.conf maxNumPartitionsPerPartitionedTopic); 0 = unlimited, as
    # in Pulsar. quasar's default is 10,000 where Pulsar's is 0: every namespace
    # listing names every partition, so an unbounded count lets one admin request
    # make every later listing unboundedly large. 10,000 is above any partition count
    # one standalone broker can serve (each partition in use is a managed ledger of
    # its own) and keeps one topic's partition names near half a megabyte.
    max_num_partitions_per_partitioned_topic: int = setting(
        10_000, "maxNumPartitionsPerPartitionedTopic", partition_count(minimum=0)
    )
    # Pulsar default (broker.conf brokerDeduplicationEnabled).
    broker_deduplication_enabled: bool = setting(False, "brokerDeduplicationEnabled")
    # Pulsar default (broker.conf brokerDeduplicationMaxNumberOfProducers).
    broker_deduplication_max_number_of_producers: int = setting(
        10_000, "brokerDeduplicationMaxNumberOfProducers", at_least(1)
    )
    # Pulsar default 0: consumed data is deleted at once; -1 = keep forever.
    default_retention_time_in_minutes: int = setting(
        0, "defaultRetentionTimeInMinutes", at_least(-1)
    )
    # Pulsar default 0; -1 = no size limit.
    default_retention_size_in_mb: int = setting(
        0, "defaultRetentionSizeInMB", at_least(-1)
    )
    # Pulsar default (broker.conf ttlDurationDefaultSeconds): message TTL of a namespace
    # without its own; 0 = messages never expire.
    ttl_duration_default_seconds: int = setting(
        0, "ttlDurationDefaultSeconds", at_least(0)
    )
    # Pulsar default (broker.conf messageExpiryCheckIntervalInMinutes).
    message_expiry_check_interval_in_minutes: int = setting(
        5, "messageExpiryCheckIntervalInMinutes", at_least(1)
    )
    # quasar's own: when above 0, the expiry check runs every this many seconds instead
    # (Pulsar's key counts whole minutes; tests and small deployments want less).
    message_expiry_check_interval_in_seconds: int = setting(
        0, "messageExpiryCheckIntervalInSeconds", at_least(0)
    )
    # Pulsar default (broker.conf backlogQuotaDefaultLimitBytes); -1 = no size quota.
    backlog_quota_default_limit_bytes: int = setting(
        -1, "backlogQuotaDefaultLimitBytes", at_least(-1)
    )
    # Pulsar default (broker.conf backlogQuotaDefaultLimitSecond); -1 = no age quota.
    backlog_quota_default_limit_second: int = setting(
        -1, "backlogQuotaDefaultLimitSecond", at_least(-1)
    )
    # Pulsar default (broker.conf backlogQuotaDefaultRetentionPolicy).
    backlog_quota_default_retention_policy: str = setting(
        "producer_request_hold",
        "backlogQuotaDefaultRetentionPolicy",
        one_of("producer_request_hold", "producer_exception", "consumer_backlog_eviction"),
    )
    # Pulsar default (broker.conf backlogQuotaCheckEnabled).
    backlog_quota_check_enabled: bool = setting(True, "backlogQuotaCheckEnabled")
    # Pulsar default (broker.conf backlogQuotaCheckIntervalInSeconds).
    backlog_quota_check_interval_in_seconds: int = setting(
        60, "backlogQuotaCheckIntervalInSeconds", at_least(1)
    )
    # Pulsar default (broker.conf schemaCompatibilityStrategy): the strategy of a
    # namespace whose schema_compatibility_strategy is UNDEFINED.
    schema_compatibility_strategy: str = setting(
        "FULL",
        "schemaCompatibilityStrategy",
        one_of(*(s for s in SCHEMA_COMPATIBILITY_STRATEGIES if s != "UNDEFINED")),
    )
    # Pulsar default (broker.conf isAllowAutoUpdateSchemaEnabled).
    is_allow_auto_update_schema_enabled: bool = setting(
        True, "isAllowAutoUpdateSchemaEnabled"
    )
    # Pulsar default (broker.conf isSchemaValidationEnforced).
    is_schema_validation_enforced: bool = setting(False, "isSchemaValidationEnforced")
    # quasar's bound on one topic's schema history (deletions included): every
    # version is kept and rewritten with the history, so a client registering
    # ever-new schemas cannot grow one topic's metadata without limit.
    max_schema_versions_per_topic: int = setting(
        1000, "maxSchemaVersionsPerTopic", at_least(1)
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        bound = self.max_num_partitions_per_partitioned_topic
        if 0 < bound < self.default_num_partitions:
            # Auto-created partitioned topics get defaultNumPartitions partitions; a
            # default above the bound would refuse every one of them.
            raise ValueError(
                f"defaultNumPartitions={self.default_num_partitions} exceeds "
                f"maxNumPartitionsPerPartitionedTopic={bound}"
            )


def _consistent_hashing_only(value: Any) -> str | None:
    return None if value is True else (
        "true (the hash-range splitting selector of Pulsar is not supported)"
    )


@dataclass(frozen=True)
class DispatchConfig(Section):
    """Limits on what the dispatchers hand out before acknowledgements come back."""

    # Pulsar default (broker.conf maxUnackedMessagesPerConsumer); 0 = unlimited.
    max_unacked_messages_per_consumer: int = setting(
        50_000, "maxUnackedMessagesPerConsumer", at_least(0)
    )
    # Pulsar default (broker.conf maxUnackedMessagesPerSubscription); 0 = unlimited.
    max_unacked_messages_per_subscription: int = setting(
        200_000, "maxUnackedMessagesPerSubscription", at_least(0)
    )
    # Pulsar default (broker.conf dispatcherMaxReadBatchSize): entries one read of a
    # dispatcher asks storage for at most. Dynamic.
    dispatcher_max_read_batch_size: int = setting(
        100, "dispatcherMaxReadBatchSize", at_least(1)
    )
    # Pulsar default 5 MiB (broker.conf dispatcherMaxReadSizeBytes): about how many
    # bytes one read asks for, from the topic's average entry size. Dynamic.
    dispatcher_max_read_size_bytes: int = setting(
        5 * 1024 * 1024, "dispatcherMaxReadSizeBytes", at_least(1)
    )
    # Pulsar default: Key_Shared AUTO_SPLIT subscriptions place consumers on a
    # consistent-hash ring. Pulsar's other AUTO_SPLIT selector (splitting hash ranges
    # in halves) is not implemented, so only true is accepted.
    subscription_key_shared_use_consistent_hashing: bool = setting(
        True, "subscriptionKeySharedUseConsistentHashing", _consistent_hashing_only
    )
    # Pulsar default: points each consumer puts on that ring.
    subscription_key_shared_consistent_hashing_replica_points: int = setting(
        100, "subscriptionKeySharedConsistentHashingReplicaPoints", at_least(1)
    )


# Pulsar's delayed-delivery tracker factories: quasar has the in-memory index only.
IN_MEMORY_DELAYED_DELIVERY_TRACKER = (
    "org.apache.pulsar.broker.delayed.InMemoryDelayedDeliveryTrackerFactory"
)


def in_memory_tracker_factory(value: Any) -> str | None:
    """Accept Pulsar's in-memory tracker factory only: the bucket tracker keeps its
    index in snapshot ledgers, which quasar does not write (it rebuilds the in-memory
    index from the topic when a subscription loads)."""
    if value == IN_MEMORY_DELAYED_DELIVERY_TRACKER:
        return None
    return (
        f"{IN_MEMORY_DELAYED_DELIVERY_TRACKER} (the only tracker quasar has; the "
        "bucket tracker's snapshot ledgers are not supported)"
    )


def no_max_delay(value: Any) -> str | None:
    """Refuse PIP-315's bound on the delay a producer may ask for (not implemented:
    a value other than 0 would let producers believe it is enforced)."""
    if value == 0:
        return None
    return "0 (no limit): a maximum delivery delay is not supported"


@dataclass(frozen=True)
class DelayedDeliveryConfig(Section):
    """Delayed message delivery (``deliver_at`` / ``deliver_after``) on Shared and
    Key_Shared subscriptions (``quasar.broker.delayed_delivery``)."""

    # Pulsar default (broker.conf delayedDeliveryEnabled): false delivers delayed
    # messages at once.
    delayed_delivery_enabled: bool = setting(True, "delayedDeliveryEnabled")
    # Pulsar default (broker.conf delayedDeliveryTickTimeMillis): the timer that
    # releases due messages fires at most once per tick.
    delayed_delivery_tick_time_millis: int = setting(
        1000, "delayedDeliveryTickTimeMillis", at_least(1)
    )
    # Pulsar default (broker.conf isDelayedDeliveryDeliverAtTimeStrict): false lets a
    # message go up to one tick before its time.
    is_delayed_delivery_deliver_at_time_strict: bool = setting(
        False, "isDelayedDeliveryDeliverAtTimeStrict"
    )
    # Pulsar default (broker.conf delayedDeliveryTrackerFactoryClassName).
    delayed_delivery_tracker_factory_class_name: str = setting(
        IN_MEMORY_DELAYED_DELIVERY_TRACKER,
        "delayedDeliveryTrackerFactoryClassName",
        in_memory_tracker_factory,
    )
    # Pulsar default (broker.conf delayedDeliveryFixedDelayDetectionLookahead): with
    # this many messages indexed, all of one fixed delay, reading pauses until the
    # first is due; 0 = never.
    delayed_delivery_fixed_delay_detection_lookahead: int = setting(
        50_000, "delayedDeliveryFixedDelayDetectionLookahead", at_least(0)
    )
    # Pulsar default (broker.conf delayedDeliveryMaxDelayInMillis, PIP-315); only 0.
    delayed_delivery_max_delay_in_millis: int = setting(
        0, "delayedDeliveryMaxDelayInMillis", no_max_delay
    )
    # quasar's own: messages one subscription's delayed index holds at most. Pulsar's
    # in-memory index is unbounded; here reading new entries pauses at the bound
    # until indexed messages fall due.
    delayed_delivery_max_indexed_messages_per_subscription: int = setting(
        100_000, "delayedDeliveryMaxIndexedMessagesPerSubscription", at_least(1)
    )


# Settings whose value may be a secret itself (a key inline as base64 or a data: URL).
# Output shows them masked, unless the value is a file: URL, which names where the
# secret is, not the secret.
SECRET_KEYS = frozenset({"tokenSecretKey", "brokerClientAuthenticationParameters"})
MASKED_SECRET = "********"


def masked(key: str, value: str) -> str:
    """``value`` as output may show it: secrets masked, file: URLs in clear."""
    if key in SECRET_KEYS and value and not value.startswith("file:"):
        return MASKED_SECRET
    return value


@dataclass(frozen=True, repr=False)
class TokenAuthenticationConfig(Section):
    """The keys and claims of token authentication (Pulsar's token provider).

    A key value is a ``data:`` URL, a ``file:`` URL, a file path or base64
    (``quasar.auth.token_keys``).
    """

    # Pulsar default: unset (broker.conf tokenSecretKey); the HMAC key. It wins over
    # tokenPublicKey when both are set.
    token_secret_key: str = setting("", "tokenSecretKey")
    # Pulsar default: unset (broker.conf tokenPublicKey); DER X.509 public key.
    token_public_key: str = setting("", "tokenPublicKey")
    # Pulsar default (AuthenticationProviderToken): RS256.
    token_public_alg: str = setting(
        "RS256",
        "tokenPublicAlg",
        one_of(
            "RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
            "ES256", "ES384", "ES512",
        ),
    )
    # Pulsar default (broker.conf tokenAuthClaim): the role is the subject.
    token_auth_claim: str = setting("sub", "tokenAuthClaim", non_empty)
    # Pulsar default: unset; when set, tokens must carry tokenAudience in it.
    token_audience_claim: str = setting("", "tokenAudienceClaim")
    # Pulsar default: unset; the audience this broker stands for.
    token_audience: str = setting("", "tokenAudience")

    def __repr__(self) -> str:
        # A frozen dataclass repr would print the secret key into any log line
        # that shows the configuration.
        fields = ", ".join(
            f"{f.name}={masked(f.metadata['key'], getattr(self, f.name))!r}"
            for f in dataclasses.fields(self)
        )
        return f"{type(self).__name__}({fields})"


@dataclass(frozen=True, repr=False)
class AuthenticationConfig(Section):
    """Who may connect: the authentication providers and the anonymous role
    (``quasar.auth`` builds its ``AuthenticationService`` from this section)."""

    # Pulsar default (broker.conf authenticationEnabled).
    authentication_enabled: bool = setting(False, "authenticationEnabled")
    # Pulsar's provider class names, comma-separated (broker.conf
    # authenticationProviders); an unknown name stops the broker at start-up.
    authentication_providers: tuple[str, ...] = setting((), "authenticationProviders")
    # Pulsar default: no anonymous role (broker.conf anonymousUserRole).
    anonymous_user_role: str = setting("", "anonymousUserRole")
    # Pulsar's basic provider's htpasswd file: data:/file: URL, path or base64 content.
    basic_auth_conf: str = setting("", "basicAuthConf")
    # Pulsar default (broker.conf authenticationRefreshCheckSeconds).
    authentication_refresh_check_seconds: int = setting(
        60, "authenticationRefreshCheckSeconds", at_least(1)
    )
    # Pulsar default (broker.conf authenticateMetricsEndpoint): /metrics is open.
    authenticate_metrics_endpoint: bool = setting(False, "authenticateMetricsEndpoint")
    # Pulsar's keys for the broker's own client: how a cluster member authenticates
    # to the others (ends of transactions). Unset: it connects without credentials.
    broker_client_authentication_plugin: str = setting("", "brokerClientAuthenticationPlugin")
    # Pulsar default: unset; for the token plugin "token:<jwt>" or "file:<path>", for
    # the TLS plugin "tlsCertFile:<path>,tlsKeyFile:<path>".
    broker_client_authentication_parameters: str = setting(
        "", "brokerClientAuthenticationParameters"
    )

    def __repr__(self) -> str:
        # The broker's own token must not reach a log line showing the configuration.
        fields = ", ".join(
            f"{f.name}={masked(f.metadata['key'], str(getattr(self, f.name)))!r}"
            if f.metadata["key"] in SECRET_KEYS else f"{f.name}={getattr(self, f.name)!r}"
            for f in dataclasses.fields(self)
        )
        return f"{type(self).__name__}({fields})"


# The one authorization provider quasar has: Pulsar's default, whose rules it follows.
PULSAR_AUTHORIZATION_PROVIDER = (
    "org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider"
)


@dataclass(frozen=True)
class AuthorizationConfig(Section):
    """What an authenticated role may do (``quasar.auth.authorization`` builds its
    ``AuthorizationService`` from this section)."""

    # Pulsar default (broker.conf authorizationEnabled).
    authorization_enabled: bool = setting(False, "authorizationEnabled")
    # Pulsar default (broker.conf authorizationProvider); no other provider exists here.
    authorization_provider: str = setting(
        PULSAR_AUTHORIZATION_PROVIDER,
        "authorizationProvider",
        one_of(PULSAR_AUTHORIZATION_PROVIDER),
    )
    # Pulsar default: no super-users (broker.conf superUserRoles, comma-separated).
    super_user_roles: tuple[str, ...] = setting((), "superUserRoles")
    # Pulsar default (broker.conf authorizationAllowWildcardsMatching): grants to
    # "prefix*", "*suffix" or "*" roles match by pattern only when this is on.
    authorization_allow_wildcards_matching: bool = setting(
        False, "authorizationAllowWildcardsMatching"
    )


@dataclass(frozen=True)
class TopicListConfig(Section):
    """Pattern subscriptions: GET_TOPICS_OF_NAMESPACE filtering and WATCH_TOPIC_LIST."""

    # Pulsar default (broker.conf enableBrokerSideSubscriptionPatternEvaluation).
    enable_broker_side_subscription_pattern_evaluation: bool = setting(
        True, "enableBrokerSideSubscriptionPatternEvaluation"
    )
    # Pulsar default (broker.conf subscriptionPatternMaxLength).
    subscription_pattern_max_length: int = setting(
        50, "subscriptionPatternMaxLength", at_least(1)
    )
    # Pulsar default (broker.conf enableBrokerTopicListWatcher); the watcher is
    # offered only to clients whose CONNECT says they support it.
    enable_broker_topic_list_watcher: bool = setting(True, "enableBrokerTopicListWatcher")
    # quasar's own: Pulsar does not bound them; each holds its namespace's matching
    # topics, so a client could otherwise hold memory without limit.
    max_topic_list_watchers_per_connection: int = setting(
        100, "maxTopicListWatchersPerConnection", at_least(1)
    )


@dataclass(frozen=True)
class MetricsConfig(Section):
    """What ``GET /metrics`` exports and how often the rates behind it and behind
    the topic stats are refreshed (``quasar.broker.stats_updater``,
    ``quasar.broker.metrics_topics``)."""

    # Pulsar default (broker.conf statsUpdateFrequencyInSecs): rates are per second
    # over this period, and the storage buckets hold the last period.
    stats_update_frequency_in_secs: int = setting(
        60, "statsUpdateFrequencyInSecs", at_least(1)
    )
    # Pulsar default (broker.conf exposeTopicLevelMetricsInPrometheus); false sums
    # the topic series per namespace.
    expose_topic_level_metrics_in_prometheus: bool = setting(
        True, "exposeTopicLevelMetricsInPrometheus"
    )
    # Pulsar default (broker.conf exposeConsumerLevelMetricsInPrometheus).
    expose_consumer_level_metrics_in_prometheus: bool = setting(
        False, "exposeConsumerLevelMetricsInPrometheus"
    )
    # Pulsar default (broker.conf exposeProducerLevelMetricsInPrometheus).
    expose_producer_level_metrics_in_prometheus: bool = setting(
        False, "exposeProducerLevelMetricsInPrometheus"
    )
    # Pulsar default (broker.conf splitTopicAndPartitionLabelInPrometheus); true
    # labels a partition with its base topic name and ``partition``.
    split_topic_and_partition_label_in_prometheus: bool = setting(
        False, "splitTopicAndPartitionLabelInPrometheus"
    )


@dataclass(frozen=True)
class LoadBalancerConfig(Section):
    """Namespace bundles and the load manager of a cluster (``quasar broker``,
    ``docs/cluster.md``)."""

    # Pulsar default (broker.conf defaultNumberOfNamespaceBundles): the bundles a
    # namespace created without a ``bundles`` policy is divided into.
    default_number_of_namespace_bundles: int = setting(
        4, "defaultNumberOfNamespaceBundles", at_least(1)
    )
    # Pulsar default (broker.conf loadBalancerNamespaceMaximumBundles): the most
    # bundles one namespace may have; it bounds what a broker owns per namespace.
    load_balancer_namespace_maximum_bundles: int = setting(
        128, "loadBalancerNamespaceMaximumBundles", at_least(1)
    )
    # Pulsar default (broker.conf loadBalancerReportUpdateMinIntervalMillis): how often
    # a cluster member rewrites its load report under /loadbalance/brokers.
    load_balancer_report_update_min_interval_millis: int = setting(
        5000, "loadBalancerReportUpdateMinIntervalMillis", at_least(100)
    )
    # Pulsar default (broker.conf loadBalancerAutoBundleSplitEnabled): a member splits
    # a bundle it owns that exceeds one of the four thresholds below, checked on
    # every load report.
    load_balancer_auto_bundle_split_enabled: bool = setting(
        True, "loadBalancerAutoBundleSplitEnabled"
    )
    # Pulsar default (broker.conf loadBalancerAutoUnloadSplitBundlesEnabled): the two
    # halves of an automatic split are unloaded, so the load manager may place them
    # on other members.
    load_balancer_auto_unload_split_bundles_enabled: bool = setting(
        True, "loadBalancerAutoUnloadSplitBundlesEnabled"
    )
    # Pulsar default (broker.conf loadBalancerNamespaceBundleMaxTopics): topics loaded.
    load_balancer_namespace_bundle_max_topics: int = setting(
        1000, "loadBalancerNamespaceBundleMaxTopics", at_least(1)
    )
    # Pulsar default (broker.conf loadBalancerNamespaceBundleMaxSessions): producers
    # and consumers of the bundle's topics.
    load_balancer_namespace_bundle_max_sessions: int = setting(
        1000, "loadBalancerNamespaceBundleMaxSessions", at_least(1)
    )
    # Pulsar default (broker.conf loadBalancerNamespaceBundleMaxMsgRate): messages in
    # plus out per second.
    load_balancer_namespace_bundle_max_msg_rate: int = setting(
        30000, "loadBalancerNamespaceBundleMaxMsgRate", at_least(1)
    )
    # Pulsar default (broker.conf loadBalancerNamespaceBundleMaxBandwidthMbytes): MB
    # in plus out per second.
    load_balancer_namespace_bundle_max_bandwidth_mbytes: int = setting(
        100, "loadBalancerNamespaceBundleMaxBandwidthMbytes", at_least(1)
    )
    # Pulsar default (broker.conf defaultNamespaceBundleSplitAlgorithm): how an
    # automatic split, and an admin split naming no algorithm, cut a bundle.
    default_namespace_bundle_split_algorithm: str = setting(
        RANGE_EQUALLY_DIVIDE, "defaultNamespaceBundleSplitAlgorithm",
        one_of(*SPLIT_ALGORITHMS),
    )
    # Pulsar default (broker.conf loadBalancerSheddingEnabled): the most loaded member
    # unloads a bundle when its load is well above the average
    # (``quasar.cluster.load_shedding``).
    load_balancer_shedding_enabled: bool = setting(True, "loadBalancerSheddingEnabled")
    # Pulsar default (broker.conf loadBalancerSheddingIntervalMinutes): how often.
    load_balancer_shedding_interval_minutes: int = setting(
        1, "loadBalancerSheddingIntervalMinutes", at_least(1)
    )
    # Pulsar default (broker.conf loadBalancerSheddingGracePeriodMinutes): a bundle a
    # member acquired or shed this recently is not shed by it.
    load_balancer_shedding_grace_period_minutes: int = setting(
        30, "loadBalancerSheddingGracePeriodMinutes", at_least(0)
    )
    # Pulsar default (broker.conf loadBalancerBrokerThresholdShedderPercentage): how
    # far above the average load, in percent, a member sheds.
    load_balancer_broker_threshold_shedder_percentage: int = setting(
        10, "loadBalancerBrokerThresholdShedderPercentage", at_least(0)
    )
    # Pulsar default (broker.conf loadBalancerBundleUnloadMinThroughputThreshold): MB
    # per second below which shedding moves nothing.
    load_balancer_bundle_unload_min_throughput_threshold: float = setting(
        10.0, "loadBalancerBundleUnloadMinThroughputThreshold", at_least(0)
    )


@dataclass(frozen=True)
class ServiceConfiguration(Section):
    """The whole configuration; build it with ``ServiceConfiguration.load``."""

    broker: BrokerConfig = section(BrokerConfig)
    policies: PolicyDefaults = section(PolicyDefaults)
    dispatch: DispatchConfig = section(DispatchConfig)
    delayed_delivery: DelayedDeliveryConfig = section(DelayedDeliveryConfig)
    authentication: AuthenticationConfig = section(AuthenticationConfig)
    authorization: AuthorizationConfig = section(AuthorizationConfig)
    managed_ledger: ManagedLedgerSettings = section(ManagedLedgerSettings)
    journal: JournalConfig = section(JournalConfig)
    transaction: TransactionConfig = section(TransactionConfig)
    token_authentication: TokenAuthenticationConfig = section(
        TokenAuthenticationConfig
    )
    tls: TlsConfig = section(TlsConfig)
    metrics: MetricsConfig = section(MetricsConfig)
    topic_list: TopicListConfig = section(TopicListConfig)
    metadata_store: MetadataStoreConfig = section(MetadataStoreConfig)
    load_balancer: LoadBalancerConfig = section(LoadBalancerConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        broker, tls = self.broker, self.tls
        tls_ports = [
            key
            for key, value in (
                ("brokerServicePortTls", broker.broker_service_port_tls),
                ("webServicePortTls", broker.web_service_port_tls),
            )
            if value is not None
        ]
        if tls_ports and not (tls.tls_certificate_file_path and tls.tls_key_file_path):
            raise ValueError(
                f"{' and '.join(tls_ports)} set: tlsCertificateFilePath and "
                "tlsKeyFilePath must name the PEM certificate and private key"
            )
        if (
            self.authorization.authorization_enabled
            and not self.authentication.authentication_enabled
        ):
            # Pulsar starts, then refuses every client: without authentication no
            # connection has a role to authorize.
            raise ValueError(
                "authorizationEnabled=true needs authenticationEnabled=true: "
                "without authentication no client has a role to authorize"
            )
        if broker.broker_service_port is None and broker.broker_service_port_tls is None:
            raise ValueError(
                "brokerServicePort and brokerServicePortTls are both empty: "
                "the broker would have no binary listener"
            )

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
        built: ServiceConfiguration = _build(cls, "", values)
        _warn_about_keys_without_effect(built)
        return built

    def items(self) -> Iterator[tuple[str, Any]]:
        """``(key, value)`` for every setting, in declaration order."""
        for key, spec in config_keys().items():
            yield key, spec.get(self)

    def to_properties(self) -> str:
        """The effective configuration as a properties file (loadable again, except
        that secret values are masked: see ``SECRET_KEYS``)."""
        lines: list[str] = []
        current = ""
        for key, spec in config_keys().items():
            if spec.path[0] != current:
                current = spec.path[0]
                lines.append(("\n" if lines else "") + f"# [{current}]")
            lines.append(f"{key}={masked(key, _format(spec.get(self)))}")
        return "\n".join(lines) + "\n"

    def with_values(self, values: Mapping[str, Any]) -> ServiceConfiguration:
        """This configuration with ``values`` (``{key: value}``, typed or strings)
        in place of the current ones, every check run again. The run-time
        configuration changes of the brokers admin API build the effective
        configuration with it, so a changed value is held to the same rules as one
        read from a file.

        Raises:
            ValueError: an unknown key or a bad value (naming the key).
        """
        current = {key: spec.get(self) for key, spec in config_keys().items()}
        for key, value in values.items():
            if key not in config_keys():
                raise ValueError(f"unknown configuration key: {key}")
            current[key] = _convert(key, value, "dynamic configuration")
        built: ServiceConfiguration = _build(type(self), "", current)
        return built

    def text_values(self) -> dict[str, str]:
        """Every setting as ``broker.conf`` writes it, secret values masked (see
        ``SECRET_KEYS``)."""
        return {
            key: masked(key, _format(spec.get(self)))
            for key, spec in config_keys().items()
        }

    def managed_ledger_config(self) -> ManagedLedgerConfig:
        """Per-topic ledger settings, with the broker-wide default retention."""
        return self.managed_ledger.ledger_config(
            RetentionPolicy(
                retention_time_minutes=self.policies.default_retention_time_in_minutes,
                retention_size_mb=self.policies.default_retention_size_in_mb,
            )
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
        if f.metadata["key"] is None:
            continue  # a tunable: not part of broker.conf
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
        elif f.metadata["key"] is not None and prefix + f.metadata["key"] in values:
            kwargs[f.name] = values[prefix + f.metadata["key"]]
    return cls(**kwargs)


def _warn_about_keys_without_effect(config: ServiceConfiguration) -> None:
    for key, reason in KEYS_WITHOUT_EFFECT.items():
        spec = config_keys()[key]
        value = spec.get(config)
        if value != spec.default:
            log.warning("%s=%s has no effect: %s", key, _format(value), reason)


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
        if raw == "" and not _is_optional(config_keys()[key].type):
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


def _is_optional(tp: Any) -> bool:
    """Whether the field is ``X | None``: there an empty value means "off"."""
    return typing.get_origin(tp) in (types.UnionType, typing.Union) and type(
        None
    ) in typing.get_args(tp)


def _to_type(tp: Any, raw: Any) -> Any:
    if _is_optional(tp):
        if raw is None or (isinstance(raw, str) and raw.strip() == ""):
            return None
        (item_type,) = [t for t in typing.get_args(tp) if t is not type(None)]
        return _to_type(item_type, raw)
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
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(_format(v) for v in value)
    return str(value)
