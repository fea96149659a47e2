"""The broker's transaction service: coordinators plus the local end-of-transaction path.

Coordinators are the partitions of ``persistent://pulsar/system/
transaction_coordinator_assign`` (``transactionCoordinatorCount`` of them, created at
standalone start). Each keeps its log on a managed ledger of the same storage as the
topics. When a coordinator ends a transaction it calls every registered partition and
subscription through ``TransactionBufferClient``; in one process that is
``LocalTransactionBufferClient`` below, which calls the topics directly. The same calls
arrive over the wire as END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION (cluster members
send them to each other, ``ClusterTransactionParts``), and the server routes those to
the same topic methods, so both paths share one implementation.

Each coordinator's terminated-transaction preserver (PIP-255 idempotent commit/abort)
keeps its outcomes in a ``SystemTopicTable`` over the compacted topic
``persistent://pulsar/system/__terminated_txn_state_<n>``, keyed by owner role and
client name, the same way transaction-buffer snapshots use ``__transaction_buffer_snapshot``.

The service reaches topics only through ``api.TopicRegistry`` (the broker service), and
topics reach it only through ``api.TransactionComponents``: it builds their transaction
buffers and their subscriptions' pending-ack handles.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Protocol

from prometheus_client.registry import CollectorRegistry

from quasar.clock import Clock, SystemClock
from quasar.errors import (
    CorruptRecordError,
    InvalidTopicName,
    NotAllowedError,
    ResourceNotFoundError,
    TopicNotFound,
    TransactionCoordinatorNotFound,
)
from quasar.protocol.namespace_name import PERSISTENT, parse_topic
from quasar.protocol.topic_name import TRANSACTION_BUFFER_SNAPSHOT, TopicName
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import ManagedCursor, ManagedLedger, ManagedLedgerFactory
from quasar.transaction.batched_log import BatchedLogs
from quasar.transaction.buffer import TopicTransactionBuffer
from quasar.transaction.buffer.snapshot_store import SnapshotStore
from quasar.transaction.buffer_client import TransactionBufferClient
from quasar.transaction.config import TransactionConfig
from quasar.transaction.coordinator import CoordinatorStatus
from quasar.transaction.coordinator.ownership import Caller
from quasar.transaction.coordinator.preserver import terminated_txn_state_topic
from quasar.transaction.coordinator.preserver_metrics import PreserverMetrics
from quasar.transaction.coordinator_registry import (
    ClientTransactions,
    TransactionCoordinatorRegistry,
)
from quasar.transaction.corrupt_records import CorruptLog, CorruptRecords
from quasar.transaction.pending_ack import (
    LowWatermarkAbortListener,
    PendingAckHandle,
)
from quasar.transaction.pending_ack.log import pending_ack_writer
from quasar.transaction.scheduler import AsyncioScheduler
from quasar.transaction.txn_status import TxnAction

from .api import LoadedTopic, TopicRegistry
from .system_table import SystemTopicTable
from .txn_limits import NOT_FOUND, TxnLimitMetrics, reason_of

log = logging.getLogger(__name__)

TC_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
SNAPSHOT_TOPIC = TRANSACTION_BUFFER_SNAPSHOT
# The preserver writes one message per client name per flush, often one per commit;
# compacting (a new compacted ledger each time) every 1000 writes rather than every
# 200 keeps that cost off the commit path, and bounds what a coordinator load reads
# after the compacted view to 1000 values (at most ~1.6 MB at 64 entries per name).
PRESERVER_COMPACT_EVERY_WRITES = 1000


class LocalTransactionBufferClient:
    """Delivers a coordinator's end decision to topics and subscriptions in this process.

    A participant that can never be reached (``txn_limits.py``: its namespace or topic
    was deleted, or its name is one quasar does not serve) is answered with
    ``TopicNotFound``, logged and counted; the coordinator counts that participant as
    ended, where retrying would keep the transaction COMMITTING or ABORTING for ever.
    """

    def __init__(self, topics: TopicRegistry, metrics: TxnLimitMetrics | None = None) -> None:
        self._topics = topics
        self._metrics = metrics if metrics is not None else TxnLimitMetrics()

    async def end_txn_on_partition(
        self, topic: str, txn_id: TxnID, action: TxnAction, low_watermark: int
    ) -> None:
        t = await self._topic(topic, txn_id)
        await t.end_txn(txn_id, action, low_watermark)

    async def end_txn_on_subscription(
        self,
        topic: str,
        subscription: str,
        txn_id: TxnID,
        action: TxnAction,
        low_watermark: int,
    ) -> None:
        t = await self._topic(topic, txn_id)
        await t.end_subscription_txn(subscription, txn_id, action, low_watermark)

    async def _topic(self, topic: str, txn_id: TxnID) -> LoadedTopic:
        """The loaded topic.

        Raises:
            TopicNotFound: it can never be reached (logged and counted here).
            ServiceNotReady: the broker is shutting down (the end is retried).
        """
        try:
            name = parse_topic(topic)
            if name.domain != PERSISTENT:
                raise NotAllowedError("non-persistent topics are not supported by quasar")
            # get_topic(create=False) answers a loaded topic from memory, with no
            # metadata read per end: a loaded topic was checked not to be a
            # partitioned topic's base name when it loaded, and no partitioned topic
            # can be created over an existing topic. A topic that is not loaded gets
            # that check while loading (NotAllowedError), and TopicNotFound when it
            # does not exist.
            return await self._topics.get_topic(name, create=False)
        except (InvalidTopicName, TopicNotFound, NotAllowedError) as e:
            reason = reason_of(e)
            self._metrics.skipped(reason)
            # A deleted topic is routine; a name that was never servable is not.
            level = logging.INFO if reason == NOT_FOUND else logging.WARNING
            log.log(level, "end of %s: %s cannot be reached (%s), counted as ended",
                    txn_id, topic, e)
            if isinstance(e, TopicNotFound):
                raise
            raise TopicNotFound(f"{topic} cannot be reached: {e}") from None


class ClusterTransactionParts(Protocol):
    """What a cluster member (``quasar broker``) changes in the transaction service."""

    def coordinator_client(self, local: TransactionBufferClient) -> TransactionBufferClient:
        """The coordinators' way to their participants, given the local one."""
        ...

    def owns_coordinator(self, tc_id: int) -> bool:
        """Whether this broker owns coordinator ``tc_id``'s bundle now."""
        ...

    def coordinator_ledgers(self, ledgers: ManagedLedgerFactory) -> ManagedLedgerFactory:
        """Where coordinators open their logs, given the broker's ledgers."""
        ...

    @property
    def snapshot_store(self) -> SnapshotStore:
        """Where transaction-buffer snapshots are kept. A namespace's
        ``__transaction_buffer_snapshot`` topic lives in one bundle, but the
        namespace's topics are spread over every member, each the only writer of its
        own snapshots."""
        ...


class TransactionService:
    """Owns the coordinator registry of this broker, and builds the transaction parts
    of its topics and subscriptions (``api.TransactionComponents``)."""

    def __init__(
        self,
        service: TopicRegistry,
        config: TransactionConfig,
        clock: Clock | None = None,
        *,
        metrics: CollectorRegistry,
        batch_size_max: int | None = None,
        cluster: ClusterTransactionParts | None = None,
    ) -> None:
        """``batch_size_max``: the most members of a batch the broker accepts
        (``InputBounds.max_batch_records``); pending-ack replay holds records to it.
        ``cluster``: what differs on a cluster member (``ClusterTransactionParts``)."""
        self.config = config
        self._batch_size_max = batch_size_max
        # The topic checks each published entry's metadata once itself
        # (PersistentTopic.publish), so its buffer need not parse it again.
        self._buffer_config = dataclasses.replace(
            config.buffer, verify_client_entries=False
        )
        self.service = service
        self._cluster = cluster
        self.coordinator_count = self._coordinator_count()
        # quasar_txn_refused_total and quasar_txn_end_participant_skipped_total.
        self.limit_metrics = TxnLimitMetrics(metrics)
        # The participant side: ends for topics this broker serves.
        self.buffer_client = LocalTransactionBufferClient(service, self.limit_metrics)
        self._snapshot_tables: dict[str, SystemTopicTable] = {}
        self._preserver_tables: dict[int, SystemTopicTable] = {}
        self.scheduler = AsyncioScheduler()
        self.batched_logs = BatchedLogs(
            config.transaction_log_batched_write,
            config.transaction_pending_ack_batched_write,
            cluster=service.cluster_name, registry=metrics,
        )
        self.corrupt_records = CorruptRecords(service.cluster_name)
        metrics.register(self.corrupt_records)
        self.registry = TransactionCoordinatorRegistry(
            cluster.coordinator_ledgers(service.ledgers) if cluster else service.ledgers,
            # The coordinator side: in a cluster, ends travel to the owning brokers.
            cluster.coordinator_client(self.buffer_client) if cluster else self.buffer_client,
            coordinator_count=self.coordinator_count,
            clock=clock or SystemClock(),
            config=config.coordinator,
            preserver_store=self.preserver_table,
            batched_log=self.batched_logs.coordinator,
            corrupt_records=self.corrupt_records,
            owns=cluster.owns_coordinator if cluster else None,
        )
        self.preserver_metrics = PreserverMetrics(
            service.cluster_name,
            lambda: [(tc.tc_id, tc.preserver.stats) for tc in self.registry.coordinators()],
        )
        self._metrics = metrics
        metrics.register(self.preserver_metrics)

    def snapshot_table(self, namespace: str) -> SnapshotStore:
        """The namespace's ``__transaction_buffer_snapshot`` table (one per namespace);
        on a cluster member, the store ``ClusterTransactionParts`` names."""
        if self._cluster is not None:
            return self._cluster.snapshot_store
        table = self._snapshot_tables.get(namespace)
        if table is None:
            topic = f"persistent://{namespace}/{SNAPSHOT_TOPIC}"
            # Created here, not by auto-creation: every topic of the namespace loads
            # its buffer from this table, also where allowAutoTopicCreation is off.
            self.service.register_topic(TopicName.parse(topic))
            table = SystemTopicTable(self.service, topic, on_unreadable=self._unreadable_row)
            self._snapshot_tables[namespace] = table
        return table

    def _unreadable_row(self, exc: CorruptRecordError) -> None:
        self.corrupt_records.found(CorruptLog.SYSTEM_TABLE, exc)

    def preserver_table(self, tc_id: int) -> SystemTopicTable:
        """Coordinator ``tc_id``'s ``__terminated_txn_state_<tc_id>`` table (kept across
        reloads of the coordinator: once read, the table's map is authoritative)."""
        table = self._preserver_tables.get(tc_id)
        if table is None:
            topic = terminated_txn_state_topic(tc_id)
            # Created here, not by auto-creation: a coordinator must load even where
            # allowAutoTopicCreation is off (registering is idempotent).
            self.service.register_topic(TopicName.parse(topic))
            table = SystemTopicTable(
                self.service, topic, compact_every_writes=PRESERVER_COMPACT_EVERY_WRITES,
                on_unreadable=self._unreadable_row,
            )
            self._preserver_tables[tc_id] = table
        return table

    async def client_transactions(
        self, client_name: str, *, role: str | None, superuser: bool,
        tc_id: int | None = None,
    ) -> dict[str, Any]:
        """The admin view of a client name's transactions (``docs/transactions.md``)
        that ``role`` may see: those it owns and those without owner; every role's
        when ``superuser``. On every coordinator, or on coordinator ``tc_id`` only.

        Raises:
            ResourceNotFoundError: ``tc_id`` is no coordinator's id (404).
        """
        if tc_id is not None and not 0 <= tc_id < self.coordinator_count:
            raise ResourceNotFoundError(f"Transaction coordinator with id {tc_id} not found")
        caller = Caller(role, superuser)
        return client_transactions_json(
            await self.registry.client_transactions(client_name, caller, tc_id)
        )

    def new_transaction_buffer(
        self, ledger: ManagedLedger, topic: TopicName
    ) -> TopicTransactionBuffer:
        return TopicTransactionBuffer(
            ledger,
            topic.full,
            self.snapshot_table(topic.namespace_name),
            self.service.clock,
            self.scheduler,
            self._buffer_config,
            on_corrupt_snapshot=lambda exc: self.corrupt_records.found(
                CorruptLog.BUFFER_SNAPSHOT, exc
            ),
        )

    def new_pending_ack_handle(
        self,
        cursor: ManagedCursor,
        log_ledger: ManagedLedger,
        topic: str,
        subscription: str,
        *,
        on_low_watermark_abort: LowWatermarkAbortListener,
        on_fenced: Callable[[PendingAckHandle], None],
    ) -> PendingAckHandle:
        clock = self.service.clock
        return PendingAckHandle(
            cursor,
            log_ledger,
            topic,
            subscription,
            clock,
            self.scheduler,
            self.config.pending_ack,
            on_low_watermark_abort=on_low_watermark_abort,
            on_fenced=on_fenced,
            writer=pending_ack_writer(self.batched_logs.pending_ack, log_ledger, topic,
                                      subscription, self.scheduler, clock),
            batch_size_max=self._batch_size_max,
        )

    async def delete_buffer_snapshot(self, name: TopicName) -> None:
        """Remove a deleted topic's snapshot (index record and segments)."""
        table = self.snapshot_table(name.namespace_name)
        await table.delete(name.full)

    def _coordinator_count(self) -> int:
        """The partitions of the coordinator-assign topic if it exists, as in Pulsar
        (the count is fixed when the topic is created); else the configured count.

        A data directory keeps the coordinators it was created with: each one has a
        log with the state of its transactions, and clients address coordinators by
        partition, so changing ``transactionCoordinatorCount`` later must not drop any.
        """
        stored = self.service.partitions_of(TopicName.parse(TC_ASSIGN_TOPIC))
        # A cluster's count is initialize-cluster-metadata's, never this setting's.
        if stored and stored != self.config.transaction_coordinator_count and (
            self._cluster is None
        ):
            log.warning(
                "%s has %d partitions: keeping %d transaction coordinators "
                "(transactionCoordinatorCount=%d applies when the topic is created)",
                TC_ASSIGN_TOPIC, stored, stored, self.config.transaction_coordinator_count,
            )
        return stored or self.config.transaction_coordinator_count

    def create_assign_topic(self) -> None:
        """Record the coordinator-assign partitioned topic (idempotent)."""
        name = TopicName.parse(TC_ASSIGN_TOPIC)
        if self.service.partitions_of(name) == 0:
            self.service.create_partitioned_topic(name, self.coordinator_count)

    async def coordinator_stats(self, tc_id: int | None) -> dict[str, Any]:
        """Pulsar's ``TransactionCoordinatorStats`` of one coordinator, or of every one
        keyed by id; a coordinator whose load fails is in state ``Error`` with
        quasar's ``lastError`` (the error, and the log and position of an unreadable
        record, which ``skipCorruptRecord`` takes).

        Coordinators not loaded yet are loaded first, as a TC_CLIENT_CONNECT would
        load them (after a restart none may be), so one request makes at most one
        load attempt per coordinator.

        Raises:
            ResourceNotFoundError: unknown id (404, as Pulsar's admin answers it).
        """
        if tc_id is None:
            return {str(i): await self._one_coordinator_stats(i)
                    for i in range(self.coordinator_count)}
        if not 0 <= tc_id < self.coordinator_count:
            raise ResourceNotFoundError(
                f"Transaction coordinator with id {tc_id} not found"
            )
        return await self._one_coordinator_stats(tc_id)

    async def _one_coordinator_stats(self, tc_id: int) -> dict[str, Any]:
        try:
            await self.registry.connect(tc_id)
        except TransactionCoordinatorNotFound as exc:
            log.info("coordinator stats: coordinator %d unavailable: %s", tc_id, exc)
        tc = next((c for c in self.registry.coordinators() if c.tc_id == tc_id), None)
        failure = self.registry.load_failures.get(tc_id)
        out: dict[str, Any] = {
            "state": tc.status.value if tc is not None else "NotLoaded",
            "leastSigBits": tc.next_sequence() - 1 if tc is not None else -1,
            "lowWaterMark": tc.low_watermark() if tc is not None else -1,
            "ongoingTxnSize": tc.active_transactions() if tc is not None else 0,
            "recoverStartTime": tc.stats.recover_start_ms if tc is not None else 0,
            "recoverEndTime": tc.stats.recover_end_ms if tc is not None else 0,
        }
        if failure is not None and (tc is None or tc.status is not CoordinatorStatus.READY):
            out["state"] = "Error"
            out["lastError"] = {
                "message": failure.error,
                "log": failure.log_name,
                "position": failure.position,
                "timestamp": failure.time_ms,
            }
        return out

    async def close(self) -> None:
        self._metrics.unregister(self.preserver_metrics)
        self._metrics.unregister(self.corrupt_records)
        await self.registry.close()
        self.batched_logs.close()


def client_transactions_json(found: ClientTransactions) -> dict[str, Any]:
    """``GET /admin/v3/transactions/clientTransactions/{clientName}``'s body.

    ``open``: live transactions in id order, with status OPEN, COMMITTING or ABORTING;
    ``terminated``: preserved outcomes (COMMITTED/ABORTED) ordered by end time; each
    with its ``owner``, the role that opened it (null: opened without authentication);
    ``unavailableCoordinators``: coordinators that could not be asked (the answer is
    partial when this is not empty).
    """
    live = sorted(found.live, key=lambda m: m.txn_id)
    terminated = sorted(found.terminated, key=lambda t: (t.end_time_ms, t.txn_id))
    return {
        "clientName": found.client_name,
        "open": [
            {
                "txnId": str(m.txn_id),
                "mostSigBits": m.txn_id.most_bits,
                "leastSigBits": m.txn_id.least_bits,
                "coordinatorId": m.txn_id.most_bits,
                "status": m.status.name,
                "owner": m.owner,
                "openTimestamp": m.open_timestamp_ms,
                "timeoutAt": m.timeout_at_ms,
            }
            for m in live
        ],
        "terminated": [
            {
                "txnId": str(t.txn_id),
                "mostSigBits": t.txn_id.most_bits,
                "leastSigBits": t.txn_id.least_bits,
                "coordinatorId": t.txn_id.most_bits,
                "status": t.status.name,
                "owner": t.owner,
                "endTime": t.end_time_ms,
            }
            for t in terminated
        ],
        "unavailableCoordinators": sorted(found.unavailable),
    }
