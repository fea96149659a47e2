"""The broker service: topics, namespaces and lookups, composed over storage.

This is the broker's composition root. It owns the loaded topics, creates them on
demand (Pulsar's auto topic creation rules), answers partitioned-metadata and lookup
questions, hands out producer names, and keeps the schema registry. It does no socket
I/O: the server package drives it.

Tenants, namespaces and partitioned-topic metadata live in ``PulsarResources``.
Topic registry: every topic that exists is recorded in the metadata store under
``/topics/<tenant>/<namespace>/<domain>/<encoded local name>`` (value: the full name),
so topics can be listed per namespace and a topic that was never created is
distinguishable from an empty one when auto-creation is off.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import urllib.parse
from collections.abc import Iterable

from prometheus_client.registry import CollectorRegistry

from quasar.clock import Clock, SystemClock
from quasar.config import ServiceConfiguration
from quasar.errors import (
    AlreadyExistsError,
    BadVersion,
    NotAcceptableError,
    NotAllowedError,
    NotFound,
    QuasarError,
    ServiceNotReady,
    TopicNotFound,
)
from quasar.protocol.topic_name import TopicName, is_system_topic
from quasar.resources.models import BacklogQuota, Policies
from quasar.resources.partitions import partition_names, sorted_unique
from quasar.resources.store import PulsarResources
from quasar.storage.api import (
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MetadataStore,
    RetentionPolicy,
)

from .backlog_quota import DESTINATION_STORAGE, MESSAGE_AGE, BacklogQuotaManager
from .backlog_quota_metrics import BacklogQuotaMetrics
from .delayed_delivery import DelayedDelivery
from .entry_info import EntryInfoCache, info_capacity
from .hostile_input import HostileInputRefusals
from .input_bounds import InputBounds
from .message_expiry import MessageExpiryMonitor
from .non_persistent_topics import NON_PERSISTENT, NonPersistentTopics
from .producer_access import ProducerAccess
from .read_limits import ReadLimits
from .schema import SchemaPolicy, SchemaRegistry
from .schema_policy import schema_policy_of
from .termination import forget_terminated, is_terminated
from .topic import PersistentTopic
from .topic_epoch import epoch_saver, forget_topic_epoch, load_topic_epoch
from .topic_list import TopicListWatchers
from .topic_ownership import TopicOwnership
from .transactions import TransactionService

log = logging.getLogger(__name__)

TOPICS_ROOT = "/topics"
PRODUCER_NAME_COUNTER = "/counters/producer-name-generation"
# How often a start-up tries to claim the next generation when other brokers of a
# cluster claim theirs at the same moment.
GENERATION_ATTEMPTS = 50
# With maxNumPartitionsPerPartitionedTopic=0 (no bound), a partitioned topic of at most
# this many partitions is checked partition by partition; a larger one by one scan of
# its namespace's registry.
LINEAR_PARTITION_SCAN_MAX = 10_000
# Registry lookups between two yields to the loop while finding the partitions in use.
PARTITION_LOOKUPS_PER_TURN = 1000


def _topic_key(name: TopicName) -> str:
    local = urllib.parse.quote(name.local_name, safe="")
    return f"{name.tenant}/{name.namespace_name.split('/', 1)[1]}/{name.domain}/{local}"


class BrokerService:
    """The broker's topics and namespaces. Topics see it as an ``api.BrokerContext``;
    the transaction service and system tables as an ``api.TopicRegistry``."""

    def __init__(
        self,
        config: ServiceConfiguration,
        ledgers: ManagedLedgerFactory,
        store: MetadataStore,
        metrics: CollectorRegistry | None = None,
    ) -> None:
        """``metrics``: the broker's registry, for the counters of refused input."""
        self.config = config
        # Every refusal of hostile input, counted on the broker's registry
        # (hostile_input.py); the bounds on batch and ack-set claims, from
        # maxMessageSize (input_bounds.py), count theirs there too.
        self.refusals = HostileInputRefusals(metrics)
        self.input_bounds = InputBounds(
            config.broker.max_message_size, refusals=self.refusals
        )
        # The dispatchers' read bounds; a run-time change updates them in place.
        self.read_limits = ReadLimits.of(config.dispatch)
        self.compaction_retain_null_key = config.broker.topic_compaction_retain_null_key
        # Points each Key_Shared consumer puts on its subscription's hash ring.
        self.key_shared_replica_points = (
            config.dispatch.subscription_key_shared_consistent_hashing_replica_points
        )
        # The WATCH_TOPIC_LIST watchers of every connection, told of each topic
        # registered or deleted below.
        self.topic_list_watchers = TopicListWatchers()
        # Every topic's ledger gets this unless its namespace sets a retention policy.
        self._default_ledger_config = config.managed_ledger_config()
        self.ledgers = ledgers
        self.store = store
        self.resources = PulsarResources(
            store,
            max_partitions=config.policies.max_num_partitions_per_partitioned_topic,
            default_bundles=config.load_balancer.default_number_of_namespace_bundles,
            max_bundles=config.load_balancer.load_balancer_namespace_maximum_bundles,
        )
        self.schemas = SchemaRegistry(
            store,
            self._schema_policy,
            max_versions=config.policies.max_schema_versions_per_topic,
        )
        # Parsed metadata kept for dispatch, sized like the entry cache.
        self.entry_infos = EntryInfoCache(
            info_capacity(config.managed_ledger.managed_ledger_cache_size_bytes)
        )
        self.topics: dict[str, PersistentTopic] = {}
        # Topics being unloaded because another broker fenced them (at most one task
        # per loaded topic).
        self._fenced_unloads: dict[str, asyncio.Task[None]] = {}
        self._loading: dict[str, asyncio.Future[PersistentTopic]] = {}
        self._producer_seq = 0
        self._generation = self._next_generation()
        self.closing = False
        # Set by the composition root when transactionCoordinatorEnabled.
        self.transactions: TransactionService | None = None
        # Set by ``quasar broker``: which topics this cluster member may serve (a
        # standalone broker serves every topic and has none).
        self.ownership: TopicOwnership | None = None
        self.clock: Clock = SystemClock()
        # Shared by every topic's Shared and Key_Shared dispatchers.
        self.delayed_delivery = DelayedDelivery(config.delayed_delivery, self.clock, metrics)
        self._init_namespace_policy_checks(metrics)
        # Non-persistent topics live apart: nothing of theirs is stored, and the
        # persistent machinery (expiry, quotas, compaction) has nothing to do there.
        self.non_persistent = NonPersistentTopics(
            config.broker.enable_non_persistent_topics,
            self.input_bounds.published_info,
            self.namespace_exists,
            self.partitions_of,
            lambda namespace: self._auto_creation(namespace)[0],
            check_serving=self._check_serving,
        )

    def _check_serving(self, name: TopicName) -> None:
        if self.ownership is not None:
            self.ownership.check_serving(name)

    @property
    def cluster_name(self) -> str:
        return self.config.broker.cluster_name

    # -- naming ------------------------------------------------------------------------
    def _next_generation(self) -> int:
        # Members of a cluster share the counter and may start at the same moment:
        # a compare-and-set that lost to another member reads the counter again.
        for _ in range(GENERATION_ATTEMPTS - 1):
            try:
                return self._claim_generation()
            except BadVersion:
                continue
        return self._claim_generation()

    def _claim_generation(self) -> int:
        found = self.store.get(PRODUCER_NAME_COUNTER)
        generation = int(found.value) + 1 if found else 0
        self.store.put(
            PRODUCER_NAME_COUNTER, str(generation).encode(), found.version if found else -1
        )
        return generation

    def generate_producer_name(self) -> str:
        """A name unique across restarts (the generation is persisted at start)."""
        self._producer_seq += 1
        return f"{self.config.broker.cluster_name}-{self._generation}-{self._producer_seq}"

    # -- namespaces and policies -------------------------------------------------------
    def namespace_exists(self, namespace: str) -> bool:
        return self.resources.namespaces.exists(namespace)

    def _policies(self, namespace: str) -> Policies | None:
        try:
            return self.resources.namespaces.get(namespace)
        except QuasarError:
            return None

    def _auto_creation(self, namespace: str) -> tuple[bool, str, int]:
        s = self.config.policies
        policies = self._policies(namespace)
        override = policies.auto_topic_creation_override if policies else None
        if override is None:
            return (
                s.allow_auto_topic_creation,
                s.allow_auto_topic_creation_type,
                s.default_num_partitions,
            )
        return (
            override.allow_auto_topic_creation,
            override.topic_type or s.allow_auto_topic_creation_type,
            override.default_num_partitions or s.default_num_partitions,
        )

    def _schema_policy(self, topic_key: str) -> SchemaPolicy:
        """The schema rules of the namespace of a schema key
        (``tenant/ns/domain/local``), the broker's defaults where it sets none."""
        tenant, namespace = topic_key.split("/", 2)[:2]
        return schema_policy_of(self._policies(f"{tenant}/{namespace}"), self.config.policies)

    def _dedup_enabled(self, namespace: str) -> bool:
        policies = self._policies(namespace)
        if policies is not None and policies.deduplication_enabled is not None:
            return policies.deduplication_enabled
        return self.config.policies.broker_deduplication_enabled

    def _ledger_config(self, namespace: str) -> ManagedLedgerConfig:
        policies = self._policies(namespace)
        retention = policies.retention_policies if policies else None
        if retention is None:
            return self._default_ledger_config
        return dataclasses.replace(
            self._default_ledger_config,
            retention=RetentionPolicy(
                retention.retention_time_in_minutes, retention.retention_size_in_mb
            ),
        )

    # -- message TTL and backlog quotas (message_expiry.py, backlog_quota.py) -----------
    def _init_namespace_policy_checks(self, metrics: CollectorRegistry | None) -> None:
        s = self.config.policies

        def loaded() -> list[PersistentTopic]:
            return list(self.topics.values())

        def now_ms() -> int:
            return self.clock.wall_ms()

        expiry_s = (
            s.message_expiry_check_interval_in_seconds
            or s.message_expiry_check_interval_in_minutes * 60
        )
        self.message_expiry = MessageExpiryMonitor(
            loaded, self._message_ttl, expiry_s, now_ms
        )
        self.backlog_quotas = BacklogQuotaManager(
            loaded,
            self._backlog_quotas,
            s.backlog_quota_check_interval_in_seconds,
            s.backlog_quota_check_enabled,
            now_ms,
        )
        if metrics is not None:
            metrics.register(
                BacklogQuotaMetrics(
                    self.cluster_name, loaded, self.backlog_quotas,
                    topic_level=self.config.metrics.expose_topic_level_metrics_in_prometheus,
                )
            )

    def start_namespace_policy_checks(self) -> None:
        """Start the periodic TTL and backlog-quota checks (on the running loop)."""
        self.message_expiry.start()
        self.backlog_quotas.start()

    def _message_ttl(self, topic: PersistentTopic) -> int:
        policies = self._policies(topic.topic_name.namespace_name)
        if policies is not None and policies.message_ttl_in_seconds is not None:
            return policies.message_ttl_in_seconds
        return self.config.policies.ttl_duration_default_seconds

    def _backlog_quotas(self, topic: PersistentTopic) -> dict[str, BacklogQuota]:
        """The namespace's quotas, else the broker defaults; only those with a limit."""
        s = self.config.policies
        policies = self._policies(topic.topic_name.namespace_name)
        quotas = {} if policies is None else dict(policies.backlog_quota_map)
        default = s.backlog_quota_default_retention_policy
        if DESTINATION_STORAGE not in quotas and s.backlog_quota_default_limit_bytes >= 0:
            quotas[DESTINATION_STORAGE] = BacklogQuota(
                limit_size=s.backlog_quota_default_limit_bytes, policy=default
            )
        if MESSAGE_AGE not in quotas and s.backlog_quota_default_limit_second >= 0:
            quotas[MESSAGE_AGE] = BacklogQuota(
                limit_time=s.backlog_quota_default_limit_second, policy=default
            )
        size, age = quotas.get(DESTINATION_STORAGE), quotas.get(MESSAGE_AGE)
        if size is not None and size.limit_size < 0:
            del quotas[DESTINATION_STORAGE]
        if age is not None and age.limit_time < 0:
            del quotas[MESSAGE_AGE]
        return quotas

    # -- partitioned topics ------------------------------------------------------------
    def partitions_of(self, name: TopicName) -> int:
        """Number of partitions of a partitioned topic; 0 if it is not partitioned."""
        if name.is_partition:
            return 0
        meta = self.resources.partitioned_topics.get(name.full)
        return meta.partitions if meta else 0

    def partitioned_metadata(self, name: TopicName) -> int:
        """Answer PARTITIONED_METADATA, auto-creating a partitioned topic if allowed.

        Only the metadata is recorded: as in Pulsar, each partition is created when a
        client first produces to or subscribes to it.

        Raises:
            TopicNotFound: the namespace does not exist.
            NotAllowedError: auto-creation would exceed
                ``maxNumPartitionsPerPartitionedTopic`` (a namespace override stored
                before the bound was lowered), or a non-persistent topic while
                ``enableNonPersistentTopics`` is false.
        """
        self._require_namespace(name)
        non_persistent = name.domain == NON_PERSISTENT
        if non_persistent:
            self.non_persistent.check_enabled()
        if name.is_partition:
            return 0
        n = self.partitions_of(name)
        loaded = name.full in self.non_persistent.topics
        if n > 0 or (loaded if non_persistent else self.topic_exists(name)):
            return n
        allowed, kind, default_partitions = self._auto_creation(name.namespace_name)
        if allowed and kind == "partitioned":
            try:
                self.resources.partitioned_topics.create(name.full, default_partitions)
            except AlreadyExistsError:  # created concurrently: read what is there
                pass
            except NotAcceptableError as e:
                raise NotAllowedError(str(e)) from None
            return self.partitions_of(name)
        return 0

    def create_partitioned_topic(self, name: TopicName, partitions: int) -> None:
        """Record a partitioned topic unless it exists (its partition count stays).

        Only the metadata: partitions are created on first use, so this costs the
        same for one partition as for many.
        """
        if self.partitions_of(name) > 0:
            return
        try:
            self.resources.partitioned_topics.create(name.full, partitions)
        except AlreadyExistsError:  # created concurrently: keep what is there
            pass

    def _require_namespace(self, name: TopicName) -> None:
        if not self.namespace_exists(name.namespace_name):
            raise TopicNotFound(f"Namespace {name.namespace_name} does not exist")

    # -- topics ------------------------------------------------------------------------
    def topic_exists(self, name: TopicName) -> bool:
        return self.store.get(f"{TOPICS_ROOT}/{_topic_key(name)}") is not None

    def registered_topics(self, namespace: str) -> list[str]:
        """Full names of the namespace's topics that exist: non-partitioned topics
        and the partitions that were used (created), sorted."""
        out: list[str] = []
        base = f"{TOPICS_ROOT}/{namespace}"
        for domain in self.store.children(base):
            for child in self.store.children(f"{base}/{domain}"):
                found = self.store.get(f"{base}/{domain}/{child}")
                if found is not None:
                    out.append(found.value.decode())
        return sorted(out)

    def list_topics(self, namespace: str) -> list[str]:
        """GET_TOPICS_OF_NAMESPACE: the namespace's topics with every partition of its
        partitioned topics, used or not (a client subscribing by pattern must see
        a partition before anyone produced to it), sorted.

        The answer is at most the registered topics plus, per partitioned topic, its
        count, which ``maxNumPartitionsPerPartitionedTopic`` bounds (a count recorded
        above it is not listed: ``PartitionedTopicResources.listed_partitions``).
        """
        partitioned = self.resources.partitioned_topics
        streams: list[Iterable[str]] = [self.registered_topics(namespace)]
        for parent in partitioned.list(namespace):
            streams.append(partition_names(parent, partitioned.listed_partitions(parent)))
        return list(sorted_unique(streams))

    def list_partitioned_topics(self, namespace: str) -> list[str]:
        return self.resources.partitioned_topics.list(namespace)

    async def partitions_in_use(self, name: TopicName) -> list[TopicName]:
        """The partitions of partitioned topic ``name`` that exist (were used).

        Asks the registry once per partition up to the topic's count, letting the
        loop run other work every ``PARTITION_LOOKUPS_PER_TURN`` lookups. A count above
        the bound (recorded before the bound was set) is not walked index by index
        but answered from one scan of the namespace's registry, so a topic declared
        with two billion partitions can still be deleted.
        """
        count = self.partitions_of(name)
        bound = self.resources.partitioned_topics.max_partitions or LINEAR_PARTITION_SCAN_MAX
        found: list[TopicName] = []
        if count <= bound:
            for index in range(count):
                if index % PARTITION_LOOKUPS_PER_TURN == PARTITION_LOOKUPS_PER_TURN - 1:
                    await asyncio.sleep(0)
                partition = name.partition(index)
                if self.topic_exists(partition):
                    found.append(partition)
            return found
        for full in self.registered_topics(name.namespace_name):
            topic = TopicName.parse(full)
            if topic.is_partition and topic.base.full == name.full:
                found.append(topic)
        return found

    async def get_topic(self, name: TopicName, create: bool) -> PersistentTopic:
        """The loaded topic, loading or creating it as needed.

        Raises:
            TopicNotFound: it does not exist and may not be created here.
            NotAllowedError: the name is a partitioned topic's base name.
            ServiceNotReady: the broker is shutting down.
        """
        if self.closing:
            raise ServiceNotReady("Broker is shutting down")
        # A cluster member serves only the topics of the bundles it owns.
        self._check_serving(name)
        topic = self.topics.get(name.full)
        if topic is not None:
            return topic
        pending = self._loading.get(name.full)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[PersistentTopic] = asyncio.get_running_loop().create_future()
        self._loading[name.full] = fut
        try:
            topic = await self._load(name, create)
            fut.set_result(topic)
            return topic
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # mark retrieved: waiters get it through shield
            raise
        finally:
            self._loading.pop(name.full, None)

    async def _load(self, name: TopicName, create: bool) -> PersistentTopic:
        self._require_namespace(name)
        if name.domain != "persistent":  # non-persistent ones: self.non_persistent
            raise NotAllowedError(f"{name.full} is not a persistent topic")
        if not name.is_partition and self.partitions_of(name) > 0:
            raise NotAllowedError(f"{name.full} is a partitioned topic; use its partitions")
        if not self.topic_exists(name):
            if not create:
                raise TopicNotFound(f"Topic {name.full} does not exist")
            if name.is_partition:
                base_partitions = self.partitions_of(name.base)
                if base_partitions == 0 or name.partition_index >= base_partitions:
                    allowed, _, _ = self._auto_creation(name.namespace_name)
                    if not allowed:
                        raise TopicNotFound(f"Topic {name.full} does not exist")
            else:
                allowed, _, _ = self._auto_creation(name.namespace_name)
                if not allowed:
                    raise TopicNotFound(f"Topic {name.full} does not exist")
            self.register_topic(name)
        ledger = await self.ledgers.open(
            name.persistence_name, self._ledger_config(name.namespace_name)
        )
        dedup_max_producers = (
            self.config.policies.broker_deduplication_max_number_of_producers
            if self._dedup_enabled(name.namespace_name)
            else None
        )
        topic = PersistentTopic(self, name, ledger, dedup_max_producers)
        topic.terminated = is_terminated(self.store, name)
        topic.access = ProducerAccess(
            load_topic_epoch(self.store, name), epoch_saver(self.store, name)
        )
        await topic.load()
        self.topics[name.full] = topic
        log.info("loaded topic %s", name.full)
        return topic

    def topic_fenced(self, name: str) -> None:
        topic = self.topics.get(name)
        if topic is None or topic.closed or name in self._fenced_unloads:
            return
        log.warning("%s: its ledger was fenced by another broker; unloading it", name)
        task = asyncio.get_running_loop().create_task(self._unload_fenced(name, topic))
        self._fenced_unloads[name] = task

    async def _unload_fenced(self, name: str, topic: PersistentTopic) -> None:
        try:
            if not topic.closed:  # an unload or session loss may have come first
                await topic.close()
        except Exception:
            log.exception("error closing fenced topic %s", name)
        finally:
            self._fenced_unloads.pop(name, None)
            if self.topics.get(name) is topic:
                del self.topics[name]

    def register_topic(self, name: TopicName) -> None:
        path = f"{TOPICS_ROOT}/{_topic_key(name)}"
        if self.store.get(path) is None:
            self.store.put(path, name.full.encode(), -1)
            self.topic_list_watchers.topic_created(name)

    async def create_topic(self, name: TopicName) -> PersistentTopic:
        """Create a non-partitioned topic explicitly (admin)."""
        self._require_namespace(name)
        self.register_topic(name)
        return await self.get_topic(name, create=True)

    async def delete_topic(self, name: TopicName, force: bool) -> None:
        """Delete a topic with its data and subscriptions.

        Raises:
            TopicNotFound: it does not exist.
            NotAllowedError: it has connected clients and ``force`` is false.
        """
        if not self.topic_exists(name):
            raise TopicNotFound(f"Topic {name.full} does not exist")
        topic = self.topics.get(name.full)
        if topic is not None:
            if not force and not topic.is_idle():
                raise NotAllowedError("Topic has active producers/subscriptions")
            await topic.close()
            self.topics.pop(name.full, None)
        if self.transactions is not None and not is_system_topic(name):
            await self.transactions.delete_buffer_snapshot(name)
        # A topic can be registered without a managed ledger: a partition registered
        # but never opened. Deleting it must still remove the registration.
        try:
            await self.ledgers.delete(name.persistence_name)
        except NotFound:
            pass
        self.store.delete(f"{TOPICS_ROOT}/{_topic_key(name)}")
        self.topic_list_watchers.topic_deleted(name)
        forget_terminated(self.store, name)
        forget_topic_epoch(self.store, name)
        if not name.is_partition:
            self.schemas.remove_all(_topic_key(name))

    def schema_key(self, name: TopicName) -> str:
        """Schemas are shared by all partitions: key them by the base topic."""
        return _topic_key(name.base if name.is_partition else name)

    # -- lifecycle ---------------------------------------------------------------------
    async def close(self) -> None:
        self.closing = True
        await self.message_expiry.stop()
        await self.backlog_quotas.stop()
        if self.transactions is not None:
            try:
                await self.transactions.close()
            except Exception:
                log.exception("error closing transaction coordinators")
        for topic in list(self.topics.values()):
            try:
                await topic.close()
            except Exception:
                log.exception("error closing %s", topic.name)
        self.topics.clear()
        await self.non_persistent.close()
