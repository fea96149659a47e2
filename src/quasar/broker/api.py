"""The seams between the broker's parts: what each part needs of the others.

The broker is layered top-down; each module imports only the ones below it::

    service            the composition root: loads topics, owns the registries
      transactions     coordinators and the per-topic transaction parts
        system_table   key -> value tables kept in compacted system topics
      topic            a persistent topic: producers, subscriptions, its ledger
        subscription   a cursor, its consumers and its dispatcher
          pending_acks acks made inside transactions, per subscription
          dispatcher   moves entries from the cursor to the consumers
            api        (this module) the interfaces below

A part that must talk to one above it does so through a Protocol declared here,
handed to it in its constructor: the dispatcher reads its topic through
``TopicReadView``, a subscription tells its topic about acks through
``SubscriptionHost``, and system tables and the transaction service reach topics
through ``TopicRegistry``. The concrete classes satisfy these protocols structurally
(no inheritance), so tests can hand in small fakes.

This module imports only what sits below the broker (protocol, storage, transaction
and clock types, errors) and the broker's leaf value modules (parsed entry metadata,
compacted records, consumers, the compacted-read state, the dispatchers' read
limits, delayed delivery), none of which import a broker part.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from quasar.clock import Clock
from quasar.errors import CorruptRecordError
from quasar.protocol.topic_name import TopicName
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import (
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerFactory,
    Position,
)
from quasar.transaction.buffer import TopicTransactionBuffer
from quasar.transaction.corrupt_records import CorruptRecords
from quasar.transaction.pending_ack import LowWatermarkAbortListener, PendingAckHandle
from quasar.transaction.txn_status import TxnAction

from .compacted_ledger import CompactedRecord
from .compacted_read import CompactedReadState
from .consumer import Consumer
from .delayed_delivery import DelayedDelivery
from .entry_info import EntryInfo, EntryInfoCache
from .input_bounds import InputBounds
from .read_limits import ReadLimits

__all__ = [
    "BrokerContext",
    "CompactedView",
    "CompactionControl",
    "DispatchSubscription",
    "LoadedTopic",
    "PendingAckView",
    "ReaderSubscription",
    "SubscriptionHost",
    "TopicReadView",
    "TopicRegistry",
    "TransactionComponents",
]


# -- what a dispatcher reads ----------------------------------------------------------
class CompactedView(Protocol):
    """A topic's compacted ledger as a ``read_compacted`` consumer reads it."""

    @property
    def horizon(self) -> Position | None:
        """The last topic position the compacted ledger covers; None if never compacted."""
        ...

    async def read(self, start: Position, max_records: int) -> list[CompactedRecord]:
        """Records at or after ``start``. Raises StorageError when unreadable."""
        ...


class TopicReadView(Protocol):
    """What a subscription's dispatcher reads of its topic."""

    @property
    def ledger(self) -> ManagedLedger: ...

    @property
    def max_read_position(self) -> Position:
        """Dispatchers never read past this position (it is held behind open
        transactions: Pulsar's transaction buffer ``maxReadPosition``)."""
        ...

    @property
    def compaction(self) -> CompactedView: ...

    @property
    def terminated(self) -> bool:
        """No more entries will ever be added (the topic was terminated)."""
        ...

    @property
    def recent_infos(self) -> EntryInfoCache:
        """Metadata parsed at publish, so dispatch need not parse entries again."""
        ...

    @property
    def read_limits(self) -> ReadLimits:
        """How much one read asks for (read at each read: the values are dynamic)."""
        ...

    @property
    def delayed_delivery(self) -> DelayedDelivery:
        """The broker's delayed-delivery settings and clock (Shared and Key_Shared
        dispatchers hold back messages not due yet)."""
        ...

    def is_aborted(self, info: EntryInfo, position: Position) -> bool:
        """True if the entry belongs to an aborted transaction (never delivered)."""
        ...


class PendingAckView(Protocol):
    """A subscription's acks pending in open transactions, as dispatch filters them."""

    def is_pending(self, position: Position) -> bool: ...

    def pending_ack_set(self, position: Position) -> list[int] | None:
        """Of a batch entry, the members not acknowledged in an open transaction
        (wire ack set: bit set = still to deliver); None if none is pending."""
        ...


class DispatchSubscription(Protocol):
    """What a dispatcher asks of, and tells, the subscription it serves."""

    @property
    def cursor(self) -> ManagedCursor: ...

    @property
    def txns(self) -> PendingAckView: ...

    @property
    def compacted_read(self) -> CompactedReadState: ...

    def describe(self) -> str:
        """``topic/subscription``, for log lines."""
        ...

    def count_redelivery(self, position: Position) -> None: ...

    def redelivery_count(self, position: Position) -> int: ...

    def notify_active_consumer(self, consumer: Consumer, active: bool) -> None:
        """Tell a Failover consumer whether it is now the active one."""
        ...

    def check_end_of_topic(self) -> None:
        """Nothing more to read: on a terminated topic whose entries are all
        acknowledged, tell the consumers they reached the end."""
        ...


# -- what a subscription tells its topic ----------------------------------------------
class ReaderSubscription(Protocol):
    """A subscription as its topic decides whether to drop it."""

    @property
    def name(self) -> str: ...

    @property
    def durable(self) -> bool: ...

    @property
    def consumer_count(self) -> int: ...


class SubscriptionHost(TopicReadView, Protocol):
    """The topic as its subscriptions see it: what they read and what they report."""

    @property
    def name(self) -> str:
        """The topic's full name."""
        ...

    @property
    def partition_index(self) -> int:
        """The partition this topic is (-1 if not a partition): Failover spreads
        partitions over consumers by it."""
        ...

    @property
    def closed(self) -> bool: ...

    def on_subscription_acked(self) -> None:
        """Acknowledgements moved: consumed ledgers may be trimmed."""
        ...

    def drop_unused_reader_subscription(self, subscription: ReaderSubscription) -> None:
        """A reader's (non-durable) subscription without consumers goes away."""
        ...


# -- what topics and subscriptions use of the broker ----------------------------------
class TransactionComponents(Protocol):
    """Builds the transaction parts of a topic and of a subscription."""

    def new_transaction_buffer(
        self, ledger: ManagedLedger, topic: TopicName
    ) -> TopicTransactionBuffer: ...

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
        """A pending-ack handle over ``log_ledger`` (not yet recovered)."""
        ...

    @property
    def corrupt_records(self) -> CorruptRecords:
        """Counts the records found unreadable in the broker's own logs."""
        ...


class BrokerContext(Protocol):
    """What a topic and its subscriptions use of the broker service."""

    @property
    def ledgers(self) -> ManagedLedgerFactory: ...

    @property
    def entry_infos(self) -> EntryInfoCache: ...

    @property
    def input_bounds(self) -> InputBounds:
        """The bounds on batch and ack-set claims (from ``maxMessageSize``)."""
        ...

    @property
    def read_limits(self) -> ReadLimits:
        """The dispatchers' read bounds, shared by every topic."""
        ...

    @property
    def compaction_retain_null_key(self) -> bool:
        """Whether compaction keeps messages without a key (``topicCompactionRetainNullKey``)."""
        ...

    @property
    def delayed_delivery(self) -> DelayedDelivery:
        """The delayed-delivery settings, clock and counter, shared by every topic."""
        ...

    @property
    def key_shared_replica_points(self) -> int:
        """``subscriptionKeySharedConsistentHashingReplicaPoints``."""
        ...

    @property
    def transactions(self) -> TransactionComponents | None:
        """None when transactions are disabled on this broker. Read at each use: the
        composition root sets it after the service is built."""
        ...

    def topic_fenced(self, name: str) -> None:
        """Another broker fenced the topic's ledger (it owns the topic now): close and
        unload it here, so its clients look it up again."""
        ...


# -- what system tables and the transaction service need of the service ---------------
class CompactionControl(CompactedView, Protocol):
    """A topic's compaction as a system table drives it."""

    @property
    def running(self) -> bool: ...

    async def read_readable(
        self,
        start: Position,
        max_records: int,
        on_unreadable: Callable[[CorruptRecordError], None],
    ) -> list[CompactedRecord]:
        """As ``read``, but a record that cannot be parsed goes to ``on_unreadable``
        and is skipped."""
        ...

    def trigger(self) -> asyncio.Task[None]:
        """Start compacting (a no-op task if a run is in progress)."""
        ...


class LoadedTopic(Protocol):
    """A loaded topic as the broker's own tables and the end-of-transaction path use it."""

    @property
    def ledger(self) -> ManagedLedger: ...

    @property
    def compaction(self) -> CompactionControl: ...

    @property
    def closed(self) -> bool: ...

    async def end_txn(self, txn: TxnID, action: TxnAction, low_watermark: int) -> None:
        """Write ``txn``'s commit or abort marker on this topic (idempotent)."""
        ...

    async def end_subscription_txn(
        self, subscription: str, txn: TxnID, action: TxnAction, low_watermark: int
    ) -> None:
        """Commit or abort ``txn``'s pending acks on a subscription (idempotent).
        Raises SubscriptionNotFound."""
        ...


class TopicRegistry(Protocol):
    """The broker service as the transaction service and system tables use it."""

    @property
    def cluster_name(self) -> str: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def ledgers(self) -> ManagedLedgerFactory: ...

    async def get_topic(self, name: TopicName, create: bool) -> LoadedTopic:
        """The loaded topic, loading or creating it. Raises TopicNotFound,
        NotAllowedError, ServiceNotReady."""
        ...

    def register_topic(self, name: TopicName) -> None:
        """Record that a topic exists (idempotent)."""
        ...

    def partitions_of(self, name: TopicName) -> int:
        """Partitions of a partitioned topic; 0 if it is not partitioned."""
        ...

    def create_partitioned_topic(self, name: TopicName, partitions: int) -> None:
        """Record a partitioned topic if it does not exist yet (idempotent)."""
        ...
