"""ServiceConfiguration: defaults, sources, precedence, conversion and errors."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest

from quasar.broker.service import BrokerService
from quasar.config import (
    KEYS_WITHOUT_EFFECT,
    BatchedWriteConfig,
    BrokerConfig,
    ManagedLedgerSettings,
    ServiceConfiguration,
    TransactionConfig,
    config_keys,
    snake_case,
)
from quasar.server.standalone import Standalone
from quasar.storage import MemoryManagedLedgerFactory
from quasar.storage.api import ManagedLedgerConfig
from quasar.storage.metadata.memory import MemoryMetadataStore
from quasar.transaction.buffer import TransactionBufferConfig
from quasar.transaction.coordinator import CoordinatorConfig
from quasar.transaction.pending_ack import PendingAckConfig

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"

# Pulsar's broker.conf defaults (and quasar's own choices, marked) that the brief and
# docs promise.
EXPECTED_DEFAULTS = {
    "clusterName": "standalone",
    "brokerServicePort": 6650,
    "webServicePort": 8080,
    "bindAddress": "127.0.0.1",
    "advertisedAddress": "127.0.0.1",  # quasar
    "advertisedListeners": "",
    "internalListenerName": "",
    "dataDir": "./data",  # quasar
    "maxMessageSize": 5242880,
    "topicCompactionRetainNullKey": False,
    "allowAutoTopicCreation": True,
    "allowAutoTopicCreationType": "non-partitioned",
    "defaultNumPartitions": 1,
    "maxNumPartitionsPerPartitionedTopic": 10000,
    "brokerDeduplicationEnabled": False,
    "brokerDeduplicationMaxNumberOfProducers": 10000,
    "defaultRetentionTimeInMinutes": 0,
    "defaultRetentionSizeInMB": 0,
    "ttlDurationDefaultSeconds": 0,
    "messageExpiryCheckIntervalInMinutes": 5,
    "messageExpiryCheckIntervalInSeconds": 0,  # quasar's key
    "backlogQuotaDefaultLimitBytes": -1,
    "backlogQuotaDefaultLimitSecond": -1,
    "backlogQuotaDefaultRetentionPolicy": "producer_request_hold",
    "backlogQuotaCheckEnabled": True,
    "backlogQuotaCheckIntervalInSeconds": 60,
    "schemaCompatibilityStrategy": "FULL",
    "isAllowAutoUpdateSchemaEnabled": True,
    "isSchemaValidationEnforced": False,
    "maxSchemaVersionsPerTopic": 1000,  # quasar's key
    "managedLedgerMaxEntriesPerLedger": 50000,
    "managedLedgerMinLedgerRolloverTimeMinutes": 10,
    "managedLedgerMaxLedgerRolloverTimeMinutes": 240,
    "managedLedgerMaxSizePerLedgerMbytes": 2048,
    "managedLedgerCacheSizeMB": 64,  # quasar
    "managedLedgerDefaultMarkDeleteRateLimit": 1.0,
    "managedLedgerMaxUnackedRangesToPersist": 10000,
    "managedLedgerMaxBatchDeletedIndexToPersist": 10000,
    "managedLedgerMaxBatchDeletedIndexBytesToPersist": 1048576,  # quasar
    "journalSyncData": True,
    "journalMaxGroupWaitMSec": 1,
    "journalBufferedWritesThreshold": 524288,
    "keepAliveIntervalSeconds": 30,
    "maxPendingPublishRequestsPerConnection": 1000,
    "brokerMaxConnections": 0,
    "brokerMaxConnectionsPerIp": 0,
    "maxProducersPerTopic": 0,
    "maxConsumersPerTopic": 0,
    "maxConsumersPerSubscription": 0,
    "maxProducersPerConnection": 10000,  # quasar
    "maxConsumersPerConnection": 10000,  # quasar
    "pulsarChannelWriteBufferHighWaterMark": 65536,
    "pulsarChannelWriteBufferLowWaterMark": 32768,
    "pulsarChannelPauseReceivingRequestsIfUnwritable": True,  # quasar (Pulsar: false)
    "incompleteFrameTimeoutSeconds": 60,  # quasar
    "maxIncompleteFramesSizeInMB": 256,  # quasar
    "maxUnackedMessagesPerConsumer": 50000,
    "maxUnackedMessagesPerSubscription": 200000,
    "dispatcherMaxReadBatchSize": 100,
    "dispatcherMaxReadSizeBytes": 5 * 1024 * 1024,
    "subscriptionKeySharedUseConsistentHashing": True,
    "subscriptionKeySharedConsistentHashingReplicaPoints": 100,
    "authenticationEnabled": False,
    "authenticationProviders": (),
    "anonymousUserRole": "",
    "basicAuthConf": "",
    "authenticationRefreshCheckSeconds": 60,
    "authenticateMetricsEndpoint": False,
    "brokerClientAuthenticationPlugin": "",
    "brokerClientAuthenticationParameters": "",
    "authorizationEnabled": False,
    "authorizationProvider": (
        "org.apache.pulsar.broker.authorization.PulsarAuthorizationProvider"
    ),
    "authorizationAllowWildcardsMatching": False,
    "enableNonPersistentTopics": True,
    "brokerShutdownTimeoutMs": 60000,
    "delayedDeliveryEnabled": True,
    "delayedDeliveryTickTimeMillis": 1000,
    "isDelayedDeliveryDeliverAtTimeStrict": False,
    "delayedDeliveryTrackerFactoryClassName": (
        "org.apache.pulsar.broker.delayed.InMemoryDelayedDeliveryTrackerFactory"
    ),
    "delayedDeliveryFixedDelayDetectionLookahead": 50_000,
    "delayedDeliveryMaxDelayInMillis": 0,
    "delayedDeliveryMaxIndexedMessagesPerSubscription": 100_000,  # quasar's key
    "transactionCoordinatorEnabled": True,  # quasar (Pulsar: false)
    "transactionCoordinatorCount": 1,
    "transactionBufferSnapshotMaxTransactionCount": 1000,
    "transactionBufferSnapshotMinTimeInMillis": 5000,
    "maxActiveTransactionsPerCoordinator": 10_000,  # quasar (Pulsar: 0, unlimited)
    "maxActiveTransactionsPerConnection": 1000,  # quasar's key
    "transactionMaxTimeoutMillis": 86_400_000,  # quasar's key
    "transactionEndRetryIntervalMs": 1000,
    "transactionMetaPersistCount": 64,  # quasar (PIP-255: 0)
    "transactionMetaPersistTimeInHour": 72,
    "transactionMetaExpireCheckIntervalInSecond": 300,
    "transactionLogBatchedWriteEnabled": False,
    "transactionLogBatchedWriteMaxRecords": 512,
    "transactionLogBatchedWriteMaxSize": 4194304,
    "transactionLogBatchedWriteMaxDelayInMillis": 1,
    "transactionPendingAckBatchedWriteEnabled": False,
    "transactionPendingAckBatchedWriteMaxRecords": 512,
    "transactionPendingAckBatchedWriteMaxSize": 4194304,
    "transactionPendingAckBatchedWriteMaxDelayInMillis": 1,
    "superUserRoles": (),
    "tokenSecretKey": "",
    "tokenPublicKey": "",
    "tokenPublicAlg": "RS256",
    "tokenAuthClaim": "sub",
    "tokenAudienceClaim": "",
    "tokenAudience": "",
    "brokerServicePortTls": None,
    "webServicePortTls": None,
    "tlsCertificateFilePath": "",
    "tlsKeyFilePath": "",
    "tlsTrustCertsFilePath": "",
    "tlsAllowInsecureConnection": False,
    "tlsRequireTrustedClientCertOnConnect": False,
    "tlsProtocols": (),
    "tlsCiphers": (),
    "tlsCertRefreshCheckDurationSec": 300,
    "brokerClientTlsEnabled": False,
    "brokerClientTrustCertsFilePath": "",
    "brokerClientCertificateFilePath": "",
    "brokerClientKeyFilePath": "",
    "brokerClientTlsProtocols": (),
    "brokerClientTlsCiphers": (),
    "brokerClientTlsEnabledWithKeyStore": False,
    "tlsHostnameVerificationEnabled": False,
    "statsUpdateFrequencyInSecs": 60,
    "exposeTopicLevelMetricsInPrometheus": True,
    "exposeConsumerLevelMetricsInPrometheus": False,
    "exposeProducerLevelMetricsInPrometheus": False,
    "splitTopicAndPartitionLabelInPrometheus": False,
    "enableBrokerSideSubscriptionPatternEvaluation": True,
    "subscriptionPatternMaxLength": 50,
    "enableBrokerTopicListWatcher": True,
    "maxTopicListWatchersPerConnection": 100,  # quasar's key
    "metadataStoreUrl": "",
    "configurationMetadataStoreUrl": "",
    "zookeeperServers": "",
    "configurationStoreServers": "",
    "metadataStoreSessionTimeoutMillis": 30000,
    "metadataStoreOperationTimeoutSeconds": 30,
    "zooKeeperSessionTimeoutMillis": -1,
    "zooKeeperOperationTimeoutSeconds": -1,
    "defaultNumberOfNamespaceBundles": 4,
    "loadBalancerNamespaceMaximumBundles": 128,
    "loadBalancerReportUpdateMinIntervalMillis": 5000,
    "loadBalancerAutoBundleSplitEnabled": True,
    "loadBalancerAutoUnloadSplitBundlesEnabled": True,
    "loadBalancerNamespaceBundleMaxTopics": 1000,
    "loadBalancerNamespaceBundleMaxSessions": 1000,
    "loadBalancerNamespaceBundleMaxMsgRate": 30000,
    "loadBalancerNamespaceBundleMaxBandwidthMbytes": 100,
    "defaultNamespaceBundleSplitAlgorithm": "range_equally_divide",
    "loadBalancerSheddingEnabled": True,
    "loadBalancerSheddingIntervalMinutes": 1,
    "loadBalancerSheddingGracePeriodMinutes": 30,
    "loadBalancerBrokerThresholdShedderPercentage": 10,
    "loadBalancerBundleUnloadMinThroughputThreshold": 10.0,
}


def load(**kwargs: object) -> ServiceConfiguration:
    kwargs.setdefault("env", {})
    return ServiceConfiguration.load(**kwargs)  # type: ignore[arg-type]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broker.conf"
    path.write_text(text)
    return path


def test_defaults() -> None:
    config = load()
    assert dict(config.items()) == EXPECTED_DEFAULTS
    assert config == ServiceConfiguration()


def test_a_setting_is_read_through_its_section() -> None:
    config = load()
    assert config.broker.broker_service_port == 6650
    assert config.journal.journal_max_group_wait_msec == 1
    assert config.transaction.transaction_log_batched_write == BatchedWriteConfig()
    assert config.transaction.transaction_pending_ack_batched_write.max_size == 4194304
    assert config.transaction.coordinator.transaction_end_retry_interval_ms == 1000
    assert config.transaction.buffer.snapshot_min_time_in_millis == 5000
    # One way to read a setting: there is no flat alias on the root.
    assert not hasattr(config, "broker_service_port")


def test_the_subsystems_sections_compose_the_configuration() -> None:
    transaction = load().transaction
    assert isinstance(transaction, TransactionConfig)
    assert transaction.coordinator == CoordinatorConfig()
    assert transaction.buffer == TransactionBufferConfig()


def test_every_field_is_named_after_its_key() -> None:
    """A field's name is its key (or, in a section with a key prefix, the key's
    suffix) in snake_case, so a key found in broker.conf greps to its field."""
    for key, spec in config_keys().items():
        prefixed = "BatchedWrite" in key or key.startswith("transactionBuffer")
        if prefixed:
            assert snake_case(key).endswith(spec.path[-1]), key
        else:
            assert spec.path[-1] == snake_case(key), key


def test_the_key_tree() -> None:
    """Where the keys of the transaction subsystems' sections sit."""
    paths = {key: spec.path for key, spec in config_keys().items()}
    assert paths["transactionBufferSnapshotMinTimeInMillis"] == (
        "transaction", "buffer", "snapshot_min_time_in_millis",
    )
    assert paths["maxActiveTransactionsPerCoordinator"] == (
        "transaction", "coordinator", "max_active_transactions_per_coordinator",
    )
    assert paths["transactionLogBatchedWriteMaxDelayInMillis"] == (
        "transaction", "transaction_log_batched_write", "max_delay_in_millis",
    )


def test_tunables_have_no_key() -> None:
    """Limits without a broker.conf key stay out of files, environment and output."""
    names = {spec.path[-1] for spec in config_keys().values()}
    assert "replay_read_entries" not in names
    assert "verify_client_entries" not in names
    assert "preserver_flush_timeout_ms" not in names
    with pytest.raises(ValueError, match="unknown configuration key"):
        load(overrides={"replayReadEntries": 5})


def test_snake_case() -> None:
    assert snake_case("journalMaxGroupWaitMSec") == "journal_max_group_wait_msec"
    assert snake_case("defaultRetentionSizeInMB") == "default_retention_size_in_mb"
    assert snake_case("managedLedgerMaxSizePerLedgerMbytes") == (
        "managed_ledger_max_size_per_ledger_mbytes"
    )


def test_config_is_frozen() -> None:
    config = load()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.broker = BrokerConfig()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.broker.cluster_name = "x"  # type: ignore[misc]


# --------------------------------------------------------------------------------------
# Files.


def test_file_parsing(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
# a comment
! another comment
clusterName = prod
brokerServicePort=6651
webServicePort: 8081
allowAutoTopicCreation=FALSE
managedLedgerDefaultMarkDeleteRateLimit=2.5
superUserRoles=admin, ops ,
transactionLogBatchedWriteEnabled=true
transactionLogBatchedWriteMaxRecords=64

advertisedAddress=
""",
    )
    config = load(config_file=path)
    assert config.broker.cluster_name == "prod"
    assert config.broker.broker_service_port == 6651
    assert config.broker.web_service_port == 8081
    assert config.policies.allow_auto_topic_creation is False
    assert config.managed_ledger.managed_ledger_default_mark_delete_rate_limit == 2.5
    assert config.managed_ledger.cursor_persist_interval_ms == 400
    assert config.authorization.super_user_roles == ("admin", "ops")
    assert config.transaction.transaction_log_batched_write == BatchedWriteConfig(
        enabled=True, max_records=64
    )
    assert (
        config.transaction.transaction_pending_ack_batched_write == BatchedWriteConfig()
    )
    # An empty value keeps the default, as in broker.conf.
    assert config.broker.advertised_address == "127.0.0.1"


def test_unknown_file_keys_are_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(
        tmp_path, "bookkeeperClientTimeoutInSeconds=30\nbrokerServicePort=7000\nfoo=1\n"
    )
    with caplog.at_level(logging.WARNING, logger="quasar.config"):
        config = load(config_file=path)
    assert config.broker.broker_service_port == 7000
    assert "bookkeeperClientTimeoutInSeconds, foo" in caplog.text


def test_malformed_line(tmp_path: Path) -> None:
    path = write(tmp_path, "brokerServicePort=1\njust some words\n")
    with pytest.raises(ValueError, match=r"broker.conf:2: expected 'key=value'"):
        load(config_file=path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        load(config_file=tmp_path / "absent.conf")


@pytest.mark.parametrize(
    "line,expected",
    [
        ("brokerServicePort=abc", "an integer"),
        ("brokerServicePort=70000", "port number"),
        ("brokerServicePort=1.5", "an integer"),
        ("journalSyncData=yes", "true or false"),
        ("managedLedgerDefaultMarkDeleteRateLimit=fast", "a number"),
        ("managedLedgerDefaultMarkDeleteRateLimit=-1", ">= 0"),
        ("allowAutoTopicCreationType=sharded", "non-partitioned, partitioned"),
        ("defaultNumPartitions=0", ">= 1"),
        ("defaultNumPartitions=2147483648", "<= 2147483647"),
        ("maxNumPartitionsPerPartitionedTopic=-1", ">= 0"),
        ("defaultRetentionTimeInMinutes=-2", ">= -1"),
        ("transactionPendingAckBatchedWriteMaxRecords=0", ">= 1"),
    ],
)
def test_bad_values_name_key_and_source(
    tmp_path: Path, line: str, expected: str
) -> None:
    path = write(tmp_path, f"# header\n{line}\n")
    key = line.split("=")[0]
    with pytest.raises(ValueError) as info:
        load(config_file=path)
    message = str(info.value)
    assert key in message
    assert f"{path}:2" in message
    assert expected in message


def test_cross_field_check(tmp_path: Path) -> None:
    path = write(tmp_path, "managedLedgerMinLedgerRolloverTimeMinutes=300\n")
    with pytest.raises(ValueError, match="managedLedgerMinLedgerRolloverTimeMinutes"):
        load(config_file=path)


def test_default_num_partitions_within_the_partition_bound() -> None:
    # Auto-created partitioned topics get defaultNumPartitions partitions: a default
    # above the bound is refused at load, not at every lookup.
    with pytest.raises(ValueError, match="exceeds maxNumPartitionsPerPartitionedTopic"):
        load(overrides={"defaultNumPartitions": 100_000_000})
    with pytest.raises(ValueError, match="exceeds maxNumPartitionsPerPartitionedTopic=8"):
        load(overrides={"defaultNumPartitions": 9, "maxNumPartitionsPerPartitionedTopic": 8})
    # 0 is Pulsar's "unlimited": only a Java int bounds the default then.
    unbounded = load(
        overrides={"defaultNumPartitions": 100_000, "maxNumPartitionsPerPartitionedTopic": 0}
    )
    assert unbounded.policies.default_num_partitions == 100_000


# --------------------------------------------------------------------------------------
# Environment and overrides.


def test_env_overrides_file(tmp_path: Path) -> None:
    path = write(tmp_path, "brokerServicePort=6651\nwebServicePort=8081\n")
    config = load(config_file=path, env={"QUASAR_brokerServicePort": "6652"})
    assert config.broker.broker_service_port == 6652
    assert config.broker.web_service_port == 8081


def test_env_upper_snake_form() -> None:
    env = {
        "QUASAR_BROKER_SERVICE_PORT": "7001",
        "QUASAR_JOURNAL_MAX_GROUP_WAIT_MSEC": "5",
        "QUASAR_DEFAULT_RETENTION_SIZE_IN_MB": "-1",
        "QUASAR_DEFAULT_RETENTION_TIME_IN_MINUTES": "-1",
        "QUASAR_TRANSACTION_LOG_BATCHED_WRITE_ENABLED": "true",
    }
    config = load(env=env)
    assert config.broker.broker_service_port == 7001
    assert config.journal.journal_max_group_wait_msec == 5
    assert config.policies.default_retention_size_in_mb == -1
    assert config.transaction.transaction_log_batched_write.enabled is True


def test_env_exact_form_wins_over_upper_snake() -> None:
    env = {"QUASAR_BROKER_SERVICE_PORT": "7001", "QUASAR_brokerServicePort": "7002"}
    assert load(env=env).broker.broker_service_port == 7002


def test_unrelated_env_is_ignored() -> None:
    env = {"QUASAR_LOG_COLOR": "x", "brokerServicePort": "1", "PATH": "/bin"}
    assert load(env=env) == ServiceConfiguration()


def test_bad_env_value_names_the_variable() -> None:
    with pytest.raises(ValueError, match="QUASAR_WEB_SERVICE_PORT") as info:
        load(env={"QUASAR_WEB_SERVICE_PORT": "http"})
    assert "webServicePort" in str(info.value)


def test_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUASAR_clusterName", "from-env")
    assert ServiceConfiguration.load().broker.cluster_name == "from-env"


def test_overrides_win_over_everything(tmp_path: Path) -> None:
    path = write(tmp_path, "brokerServicePort=6651\n")
    config = load(
        config_file=path,
        env={"QUASAR_brokerServicePort": "6652"},
        overrides={
            "brokerServicePort": 6653,
            "dataDir": "/var/q",
            "journalSyncData": "false",
        },
    )
    assert config.broker.broker_service_port == 6653
    assert config.broker.data_path == Path("/var/q")
    assert config.journal.journal_sync_data is False


def test_override_errors() -> None:
    with pytest.raises(
        ValueError, match="unknown configuration key in overrides: nope"
    ):
        load(overrides={"nope": 1})
    with pytest.raises(ValueError, match="brokerServicePort"):
        load(overrides={"brokerServicePort": True})
    with pytest.raises(ValueError, match="clusterName"):
        load(overrides={"clusterName": 5})


def test_direct_construction_is_checked() -> None:
    with pytest.raises(ValueError, match="brokerServicePort"):
        BrokerConfig(broker_service_port=-1)
    with pytest.raises(ValueError, match="managedLedgerMinLedgerRolloverTimeMinutes"):
        ManagedLedgerSettings(managed_ledger_min_ledger_rollover_time_minutes=500)
    with pytest.raises(ValueError, match="maxActiveTransactionsPerCoordinator"):
        CoordinatorConfig(max_active_transactions_per_coordinator=-1)
    with pytest.raises(ValueError, match="transactionMaxTimeoutMillis"):
        CoordinatorConfig(transaction_max_timeout_millis=-1)
    with pytest.raises(ValueError, match=r"SnapshotMinTimeInMillis"):
        TransactionBufferConfig(snapshot_min_time_in_millis=0)
    # A tunable is checked too; the error names its field.
    with pytest.raises(ValueError, match="snapshot_segment_size_bytes"):
        TransactionBufferConfig(snapshot_segment_size_bytes=10)
    with pytest.raises(ValueError, match="MaxRecords"):
        BatchedWriteConfig(max_records=0)


# --------------------------------------------------------------------------------------
# Output and derived values.


def test_to_properties_round_trips(tmp_path: Path) -> None:
    config = load(
        overrides={
            "clusterName": "c1",
            "superUserRoles": "a,b",
            "managedLedgerDefaultMarkDeleteRateLimit": 0.5,
            "transactionPendingAckBatchedWriteEnabled": True,
        }
    )
    text = config.to_properties()
    assert "clusterName=c1\n" in text
    assert "superUserRoles=a,b\n" in text
    assert "transactionPendingAckBatchedWriteEnabled=true\n" in text
    assert load(config_file=write(tmp_path, text)) == config


def test_managed_ledger_config() -> None:
    config = load(
        overrides={
            "managedLedgerMaxEntriesPerLedger": 10,
            "defaultRetentionTimeInMinutes": 5,
            "defaultRetentionSizeInMB": 6,
            "managedLedgerDefaultMarkDeleteRateLimit": 0,
            "managedLedgerMaxUnackedRangesToPersist": 7,
            "managedLedgerMaxBatchDeletedIndexToPersist": 8,
            "managedLedgerMaxBatchDeletedIndexBytesToPersist": 4096,
        }
    )
    ml = config.managed_ledger_config()
    assert ml.max_entries_per_ledger == 10
    assert (ml.retention.retention_time_minutes, ml.retention.retention_size_mb) == (
        5,
        6,
    )
    assert ml.cursor_persist_interval_ms == 0
    assert ml.max_unacked_ranges_to_persist == 7
    assert ml.max_batch_deleted_index_to_persist == 8
    assert ml.max_batch_deleted_index_bytes_to_persist == 4096


def test_the_storage_defaults_agree_with_the_configuration() -> None:
    """Storage tests build ManagedLedgerConfig() directly; it must match what the
    broker derives from the default configuration."""
    assert ServiceConfiguration().managed_ledger_config() == ManagedLedgerConfig()


def test_every_key_is_documented_with_its_default() -> None:
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", DOCS.read_text(), flags=re.M)
    documented = {key: default.strip().strip("`") for key, default in rows}
    assert set(documented) == set(config_keys())
    printed = dict(
        line.split("=", 1)
        for line in ServiceConfiguration().to_properties().splitlines()
        if "=" in line
    )
    for key, value in printed.items():
        assert documented[key] == (value or "(empty)"), key


# --------------------------------------------------------------------------------------
# Effective defaults: what each subsystem receives when the standalone broker starts
# with no configuration, and what the subsystem classes default to when tests build
# them directly. A changed value here is a changed default for operators: it needs
# a changelog entry and docs/configuration.md to follow.

EFFECTIVE_DEFAULTS: dict[str, object] = {
    "broker.cluster_name": "standalone",
    "broker.advertised_address": "127.0.0.1",
    "broker.broker_service_port": 6650,
    "broker.web_service_port": 8080,
    "broker.max_message_size": 5242880,
    "broker.allow_auto_topic_creation": True,
    "broker.allow_auto_topic_creation_type": "non-partitioned",
    "broker.default_num_partitions": 1,
    "resources.max_partitions": 10_000,
    "broker.broker_deduplication_enabled": False,
    "broker.max_unacked_messages_per_consumer": 50000,
    "broker.entry_info_cache_entries": 65536,
    "broker.broker_service_url": "pulsar://127.0.0.1:6650",
    "broker.web_service_url": "http://127.0.0.1:8080",
    "ledger.max_entries_per_ledger": 50000,
    "ledger.max_size_per_ledger_mb": 2048,
    "ledger.max_ledger_rollover_time_minutes": 240,
    "ledger.min_ledger_rollover_time_minutes": 10,
    "ledger.retention_time_minutes": 0,
    "ledger.retention_size_mb": 0,
    "ledger.cursor_persist_interval_ms": 1000,
    "ledger.max_unacked_ranges_to_persist": 10000,
    "txn.coordinator_count": 1,
    "coordinator.max_active_transactions": 10_000,
    "coordinator.max_timeout_ms": 86_400_000,
    "coordinator.end_retry_interval_ms": 1000,
    "coordinator.replay_read_entries": 100,
    "coordinator.meta_persist_count": 64,
    "coordinator.meta_persist_time_hours": 72,
    "coordinator.meta_expire_check_interval_s": 300,
    "coordinator.preserver_flush_timeout_ms": 10000,
    "buffer.snapshot_max_transaction_count": 1000,
    "buffer.snapshot_min_time_ms": 5000,
    "buffer.snapshot_segment_size_bytes": 262144,
    "buffer.max_ongoing_transactions": 100000,
    "buffer.max_aborted_transactions": 1000000,
    "buffer.max_ended_transactions": 50000,
    "buffer.replay_read_entries": 100,
    # The topic checks each published entry itself, so the broker turns this off.
    "buffer.verify_client_entries": False,
    "log_batched_write.enabled": False,
    "log_batched_write.max_records": 512,
    "log_batched_write.max_size_bytes": 4194304,
    "log_batched_write.max_delay_ms": 1,
    "pending_ack_batched_write.enabled": False,
    "pending_ack_batched_write.max_records": 512,
    "pending_ack_batched_write.max_size_bytes": 4194304,
    "pending_ack_batched_write.max_delay_ms": 1,
    "pending_ack.max_ongoing_transactions": 10000,
    "pending_ack.max_pending_positions": 500000,
    "pending_ack.max_waiting_requests": 2000,
    "pending_ack.max_ended_transactions": 10000,
    "pending_ack.replay_read_entries": 100,
    "pending_ack.cursor_flush_retry_interval_ms": 1000,
    "pending_ack.commit_flush_beside_record": True,
}


def _effective_settings(service: BrokerService) -> dict[str, object]:
    """The settings the broker's subsystems hold, under the names of the table above."""
    out: dict[str, object] = {}
    config = service.config
    for name in (
        "cluster_name", "advertised_address", "broker_service_port", "web_service_port",
        "max_message_size", "broker_service_url", "web_service_url",
    ):
        out[f"broker.{name}"] = getattr(config.broker, name)
    for name in (
        "allow_auto_topic_creation", "allow_auto_topic_creation_type",
        "default_num_partitions", "broker_deduplication_enabled",
    ):
        out[f"broker.{name}"] = getattr(config.policies, name)
    out["resources.max_partitions"] = service.resources.partitioned_topics.max_partitions
    out["broker.max_unacked_messages_per_consumer"] = (
        config.dispatch.max_unacked_messages_per_consumer
    )
    out["broker.entry_info_cache_entries"] = service.entry_infos._max
    ledger = service._ledger_config("public/default")
    for name in (
        "max_entries_per_ledger", "max_size_per_ledger_mb",
        "max_ledger_rollover_time_minutes", "min_ledger_rollover_time_minutes",
        "cursor_persist_interval_ms", "max_unacked_ranges_to_persist",
    ):
        out[f"ledger.{name}"] = getattr(ledger, name)
    out["ledger.retention_time_minutes"] = ledger.retention.retention_time_minutes
    out["ledger.retention_size_mb"] = ledger.retention.retention_size_mb
    txns = service.transactions
    assert txns is not None
    out["txn.coordinator_count"] = txns.coordinator_count
    out.update(_coordinator_values(txns.registry._config))
    out.update(_buffer_values(txns._buffer_config))
    out.update(_batched_values("log_batched_write", txns.batched_logs.coordinator.settings))
    out.update(
        _batched_values("pending_ack_batched_write", txns.batched_logs.pending_ack.settings)
    )
    out.update(_pending_ack_values(txns.config.pending_ack))
    return out


def _pending_ack_values(c: PendingAckConfig) -> dict[str, object]:
    names = (
        "max_ongoing_transactions", "max_pending_positions", "max_waiting_requests",
        "max_ended_transactions", "replay_read_entries",
        "cursor_flush_retry_interval_ms", "commit_flush_beside_record",
    )
    return {f"pending_ack.{name}": getattr(c, name) for name in names}


def _coordinator_values(c: CoordinatorConfig) -> dict[str, object]:
    return {
        "coordinator.max_active_transactions": c.max_active_transactions_per_coordinator,
        "coordinator.max_timeout_ms": c.transaction_max_timeout_millis,
        "coordinator.end_retry_interval_ms": c.transaction_end_retry_interval_ms,
        "coordinator.replay_read_entries": c.replay_read_entries,
        "coordinator.meta_persist_count": c.transaction_meta_persist_count,
        "coordinator.meta_persist_time_hours": c.transaction_meta_persist_time_in_hour,
        "coordinator.meta_expire_check_interval_s": (
            c.transaction_meta_expire_check_interval_in_second
        ),
        "coordinator.preserver_flush_timeout_ms": c.preserver_flush_timeout_ms,
    }


def _buffer_values(c: TransactionBufferConfig) -> dict[str, object]:
    out: dict[str, object] = {
        "buffer.snapshot_min_time_ms": c.snapshot_min_time_in_millis,
    }
    names = (
        "snapshot_max_transaction_count",
        "snapshot_segment_size_bytes", "max_ongoing_transactions",
        "max_aborted_transactions", "max_ended_transactions", "replay_read_entries",
        "verify_client_entries",
    )
    out.update({f"buffer.{name}": getattr(c, name) for name in names})
    return out


def _batched_values(prefix: str, c: BatchedWriteConfig) -> dict[str, object]:
    return {
        f"{prefix}.enabled": c.enabled,
        f"{prefix}.max_records": c.max_records,
        f"{prefix}.max_size_bytes": c.max_size,
        f"{prefix}.max_delay_ms": c.max_delay_in_millis,
    }


async def test_effective_defaults_of_the_standalone_broker() -> None:
    standalone = Standalone(load())
    standalone.service = BrokerService(
        standalone.config, MemoryManagedLedgerFactory(), MemoryMetadataStore()
    )
    standalone._create_system_namespaces()
    standalone._start_transactions()
    try:
        assert _effective_settings(standalone.service) == EFFECTIVE_DEFAULTS
    finally:
        await standalone.service.close()


def test_subsystem_classes_default_to_the_configuration_defaults() -> None:
    """Tests build the subsystems' settings directly; they get the same defaults, but
    the transaction buffer checks client entries itself (no topic in front of it)."""
    expected = {**EFFECTIVE_DEFAULTS, "buffer.verify_client_entries": True}
    assert _coordinator_values(CoordinatorConfig()) == {
        k: v for k, v in expected.items() if k.startswith("coordinator.")
    }
    assert _buffer_values(TransactionBufferConfig()) == {
        k: v for k, v in expected.items() if k.startswith("buffer.")
    }
    assert _batched_values("log_batched_write", BatchedWriteConfig()) == {
        k: v for k, v in expected.items() if k.startswith("log_batched_write.")
    }
    assert _pending_ack_values(PendingAckConfig()) == {
        k: v for k, v in expected.items() if k.startswith("pending_ack.")
    }


SRC = Path(__file__).resolve().parents[1] / "src"


def test_a_key_without_effect_is_logged_when_set(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="quasar.config"):
        load()
    assert caplog.text == ""
    with caplog.at_level(logging.WARNING, logger="quasar.config"):
        load(overrides={"brokerShutdownTimeoutMs": "5"})
    assert "brokerShutdownTimeoutMs=5 has no effect" in caplog.text


@pytest.mark.parametrize("key", sorted(KEYS_WITHOUT_EFFECT))
def test_keys_without_effect_are_read_by_nothing(key: str) -> None:
    """When a subsystem starts to read one of these, it must leave the table."""
    field_name = config_keys()[key].path[-1]
    readers = [
        str(path.relative_to(SRC))
        for path in sorted((SRC / "quasar").rglob("*.py"))
        if path != SRC / "quasar" / "config.py" and f".{field_name}" in path.read_text()
    ]
    assert readers == []
