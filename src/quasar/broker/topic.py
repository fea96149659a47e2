"""A persistent topic (or one partition of a partitioned topic).

A topic owns its managed ledger, its producers and its subscriptions. Publishing appends
the producer's bytes verbatim; the receipt goes out only after the entry is durable
(the managed ledger resolves ``add_entry`` after fsync). New durable entries wake the
subscriptions' dispatchers.

A topic sees the broker only as an ``api.BrokerContext`` (storage, the parsed-metadata
cache, the transaction service); to its subscriptions it is an ``api.SubscriptionHost``,
and to system tables and the end-of-transaction path an ``api.LoadedTopic``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from quasar.errors import (
    ConsumerBusy,
    LedgerFencedError,
    NotAllowedError,
    QuasarError,
    RemoteProtocolError,
    ServiceNotReady,
    SubscriptionNotFound,
    TopicTerminatedError,
)
from quasar.protocol.topic_name import (
    COMPACTION_CURSOR,
    DEDUP_CURSOR,
    TopicName,
    is_system_cursor,
    is_system_topic,
)
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import (
    EARLIEST,
    LATEST,
    InitialPosition,
    ManagedCursor,
    ManagedLedger,
    Position,
)
from quasar.transaction.buffer import TopicTransactionBuffer
from quasar.transaction.txn_status import TxnAction

from .api import BrokerContext, ReaderSubscription
from .compaction import CompactionService
from .consumer import Consumer
from .dedup import DupStatus, MessageDeduplication
from .entry_info import EntryInfo, entry_info
from .producer import Producer
from .producer_access import AccessControlledProducers, ProducerAccess
from .stats_rates import MessageRate, average_msg_size, estimated_backlog_size
from .subscription import SUB_KEY_SHARED, SUB_SHARED, Subscription
from .txn_sends import TransactionalSends

__all__ = ["PersistentTopic", "PublishCallback", "is_system_cursor"]

log = logging.getLogger(__name__)

PublishCallback = Callable[[Position | None, BaseException | None], None]

TRIM_DELAY_S = 1.0  # consumed-ledger trimming runs at most this often per topic


class PersistentTopic(AccessControlledProducers):
    """One persistent topic or partition (an ``api.SubscriptionHost`` and
    ``api.LoadedTopic``)."""

    def __init__(
        self,
        broker: BrokerContext,
        name: TopicName,
        ledger: ManagedLedger,
        dedup_max_producers: int | None,
    ) -> None:
        """``dedup_max_producers``: deduplication's bound on tracked producer names
        (``brokerDeduplicationMaxNumberOfProducers``), or None when deduplication is
        off for the topic's namespace."""
        self._broker = broker
        self.topic_name = name
        self.name = name.full
        self.ledger = ledger
        self.partition_index = name.partition_index
        self.producers: dict[int, Producer] = {}  # by id(producer)
        # Registration looks producers with a name their client chose up here instead
        # of scanning them all, so adding one costs the same however many there are.
        self._named_producers: dict[str, Producer] = {}
        # The service replaces it with one holding the topic's recorded epoch.
        self.access = ProducerAccess()
        self.subscriptions: dict[str, Subscription] = {}
        self.dedup: MessageDeduplication | None = (
            None
            if dedup_max_producers is None
            else MessageDeduplication(ledger, max_producers=dedup_max_producers)
        )
        self.closed = False
        # Set by termination (termination.py): no producer or publish is accepted.
        self.terminated = False
        self.msg_in = 0
        self.bytes_in = 0
        # Pulsar's msgChunkPublished: a chunked message was published since loading.
        self.msg_chunk_published = False
        # Refreshed by the stats updater: msgRateIn/msgThroughputIn from the
        # counters above, msgRateOut/msgThroughputOut as the subscriptions' sum, and
        # the storage's entries written and read per second.
        self.rate_in = MessageRate()
        self.rate_out = MessageRate()
        self.storage_write = MessageRate()
        self.storage_read = MessageRate()
        self._trim_handle: asyncio.TimerHandle | None = None
        self.txn_buffer: TopicTransactionBuffer | None = None
        self.recent_infos = broker.entry_infos
        self.read_limits = broker.read_limits
        self.delayed_delivery = broker.delayed_delivery
        self.txn_sends = TransactionalSends()
        # The lambdas look the hooks up at call time: the transaction buffer may
        # replace them after construction.
        self.compaction = CompactionService(
            ledger,
            broker.ledgers,
            name.persistence_name,
            max_read_position=lambda: self.max_read_position,
            is_aborted=lambda info, position: self.is_aborted(info, position),
            on_horizon_moved=self.on_subscription_acked,
            input_bounds=broker.input_bounds,
            retain_null_key=broker.compaction_retain_null_key,
        )

    async def load(self) -> None:
        """Recover state that lives beside the ledger (dedup marks, compaction state,
        subscriptions)."""
        if self.dedup is not None:
            await self.dedup.recover()
        await self._load_transaction_buffer()
        await self.compaction.recover()
        for name, cursor in self.ledger.cursors().items():
            if is_system_cursor(name) or not cursor.durable:
                continue
            sub = Subscription(self, self._broker, name, cursor, durable=True)
            self.subscriptions[name] = sub
            if self._broker.transactions is not None:
                await sub.txns.load_if_exists()

    # -- transactions (the topic's transaction buffer) ---------------------------------
    @property
    def max_read_position(self) -> Position:
        """Dispatchers never read past this position (held behind open transactions)."""
        tb = self.txn_buffer
        return tb.max_read_position if tb is not None else self.ledger.last_confirmed_entry

    def is_aborted(self, info: EntryInfo, position: Position) -> bool:
        """True if the entry at ``position`` belongs to an aborted transaction."""
        tb = self.txn_buffer
        if tb is None or info.txn is None:
            return False
        return tb.is_aborted(TxnID(*info.txn), position)

    def append_transactional(self, txn: TxnID, data: bytes) -> asyncio.Future[Position]:
        """Append an entry of ``txn`` through the transaction buffer.

        Raises:
            NotAllowedError: the topic has no transaction buffer (transactions are off,
                or it is a system topic).
        """
        if self.txn_buffer is None:
            raise NotAllowedError(f"Topic {self.name} does not accept transactional messages")
        return self.txn_buffer.append_transactional(txn, data)

    async def end_txn(self, txn: TxnID, action: TxnAction, low_watermark: int) -> None:
        """End ``txn`` on this partition: write its commit or abort marker (idempotent).

        Raises:
            NotAllowedError: the topic has no transaction buffer.
            InvalidTxnStatus: the opposite end already happened here.
        """
        if self.txn_buffer is None:
            raise NotAllowedError(f"Topic {self.name} does not accept transactional messages")
        await self.txn_buffer.end_txn(txn, action, low_watermark)
        self.txn_sends.ended(txn, set(self.txn_buffer.ongoing_transactions()))

    async def end_subscription_txn(
        self, subscription: str, txn: TxnID, action: TxnAction, low_watermark: int
    ) -> None:
        """End ``txn``'s pending acks on ``subscription`` (idempotent).

        Raises:
            SubscriptionNotFound: the topic has no such subscription.
        """
        sub = self.subscriptions.get(subscription)
        if sub is None:
            raise SubscriptionNotFound(f"Subscription {subscription} not found on {self.name}")
        await sub.end_txn(txn, action, low_watermark)

    async def check_transactions_recovered(self, txn_enabled: bool) -> None:
        """Producers wait here until the transaction buffer finished recovering."""
        if self.txn_buffer is not None:
            await self.txn_buffer.check_if_recovered(txn_enabled)

    async def _load_transaction_buffer(self) -> None:
        txns = self._broker.transactions
        if txns is None or is_system_topic(self.topic_name):
            return
        tb = txns.new_transaction_buffer(self.ledger, self.topic_name)
        self.txn_buffer = tb
        tb.add_max_read_position_listener(lambda _: self.notify_new_entries())
        await tb.recover()
        await self.txn_sends.rebuild(self.ledger, tb.ongoing_transactions())

    # -- producers ---------------------------------------------------------------------
    async def add_producer(
        self, producer: Producer, on_queued: Callable[[], None] = lambda: None
    ) -> None:
        """Attach a producer, honouring its access mode (``producer_access.py``);
        ``on_queued`` runs if a WaitForExclusive producer has to wait.

        Raises:
            ProducerBusy: a shared producer while exclusive access is held or
                awaited, or the name is already connected.
            ProducerFenced: an exclusive producer refused (``ProducerAccess``).
        """
        if self.terminated and not self.closed:
            raise TopicTerminatedError(f"Topic {self.name} was already terminated")
        await self._attach_producer(producer, on_queued)

    @property
    def waiting_producers(self) -> int:
        """Producers queued for exclusive access."""
        return self.access.waiting_count

    def last_sequence_id(self, producer_name: str) -> int:
        return self.dedup.last_sequence_id(producer_name) if self.dedup else -1

    def publish(
        self,
        producer: Producer,
        sequence_id: int,
        highest_sequence_id: int,
        num_messages: int,
        data: bytes,
        callback: PublishCallback,
        txn: TxnID | None = None,
    ) -> None:
        """Append one entry; ``callback(position, error)`` runs once it is durable.

        With ``txn``, the entry belongs to that transaction and goes through the
        topic's transaction buffer (it becomes visible when the transaction commits).

        A duplicate (deduplication on) gets ``callback(Position(-1, -1), None)`` and
        stores nothing; an in-flight duplicate gets an error so the client resends.
        """
        if self.terminated:
            callback(None, TopicTerminatedError(f"Topic {self.name} was already terminated"))
            return
        # The metadata is parsed once here: it is checked (recovery trusts stored
        # metadata, so a client may not forge markers or transaction ids) and the
        # result is kept for the dispatchers, which would otherwise parse it again.
        try:
            # Also bounds uncompressed_size and the batch size (input_bounds.py).
            info = self._broker.input_bounds.published_info(data, num_messages)
        except RemoteProtocolError as e:
            callback(None, NotAllowedError(f"Unreadable message metadata: {e}"))
            return
        except NotAllowedError as e:
            callback(None, e)
            return
        if info.marker_type is not None:
            callback(None, NotAllowedError("Clients may not publish marker entries"))
            return
        if info.txn != (None if txn is None else (txn.most_bits, txn.least_bits)):
            callback(None, NotAllowedError(
                "Transaction ids in the message metadata do not match the send"
            ))
            return
        # A chunk before the last is neither checked nor recorded (dedup.py).
        if info.partial_chunk:
            dedup = None
            self.msg_chunk_published = True
        else:
            dedup = self.dedup
        name = producer.producer_name
        if dedup is not None:
            status = dedup.check(name, sequence_id, highest_sequence_id)
            if status is DupStatus.DUPLICATE:
                callback(Position(-1, -1), None)
                return
            if status is DupStatus.UNKNOWN:
                callback(None, ServiceNotReady("duplicate send still in flight"))
                return
        size = len(data)
        top = max(sequence_id, highest_sequence_id)
        tb = self.txn_buffer
        previous_mark = -1

        def done(pos: Position | None, exc: BaseException | None) -> None:
            if exc is not None:
                if isinstance(exc, LedgerFencedError):
                    self._broker.topic_fenced(self.name)
                if dedup is not None:
                    dedup.producer_failed(name)
                if txn is not None:
                    self.txn_sends.restore(txn, name, previous_mark)
                callback(None, exc)
                return
            assert pos is not None
            self.msg_in += num_messages
            self.bytes_in += size
            producer.msg_in += num_messages
            producer.bytes_in += size
            if dedup is not None:
                dedup.persisted_at(name, top, pos)
            self.recent_infos.put(pos, info)
            callback(pos, None)
            if tb is None:
                # With a transaction buffer, its max-read-position listener wakes the
                # dispatchers exactly when something became readable.
                self.notify_new_entries()

        if txn is None:
            # The hot path: callbacks all the way down, no future per entry.
            if tb is not None:
                tb.append_non_transactional_cb(data, done)
            else:
                self.ledger.append_entry(data, done)
            return
        if self.txn_sends.is_duplicate(txn, name, sequence_id):
            # A re-send of a message this transaction already holds (its receipt
            # was lost): answer it, store nothing.
            callback(Position(-1, -1), None)
            return
        try:
            fut = self.append_transactional(txn, data)
        except QuasarError as e:
            if dedup is not None:
                dedup.producer_failed(name)
            callback(None, e)
            return
        previous_mark = self.txn_sends.record(
            txn, name, max(sequence_id + num_messages - 1, highest_sequence_id)
        )

        def txn_done(f: asyncio.Future[Position]) -> None:
            exc = f.exception()
            done(None if exc is not None else f.result(), exc)

        fut.add_done_callback(txn_done)

    def notify_new_entries(self) -> None:
        for sub in self.subscriptions.values():
            sub.notify_new_entries()

    # -- consumers ---------------------------------------------------------------------
    def subscribe(
        self,
        consumer: Consumer,
        durable: bool,
        initial_position: int,
        start_message_id: Position | None,
    ) -> Subscription:
        """Attach a consumer to a (possibly new) subscription.

        Raises:
            ConsumerBusy, NotAllowedError: see ``Subscription.add_consumer``.
            NotAllowedError: the name is reserved, or ``read_compacted`` was asked on
                a Shared or Key_Shared subscription (Pulsar refuses it too).
        """
        name = consumer.subscription_name
        if self.closed:
            # Unloading or deleting: the client retries and finds the reloaded topic.
            raise ServiceNotReady(f"Topic {self.name} is closing")
        if name == DEDUP_CURSOR or name == COMPACTION_CURSOR:
            raise NotAllowedError(f"Subscription name {name} is reserved")
        if consumer.read_compacted and consumer.sub_type in (SUB_SHARED, SUB_KEY_SHARED):
            raise NotAllowedError(
                "readCompacted only allowed on failover or exclusive subscriptions"
            )
        sub = self.subscriptions.get(name)
        if sub is None:
            start: Position | None = (
                (EARLIEST if initial_position == InitialPosition.EARLIEST else None)
                if durable
                else self._reader_start(start_message_id, initial_position)
            )
            if durable:
                cursor = self.ledger.open_cursor(
                    name,
                    InitialPosition.EARLIEST
                    if initial_position == InitialPosition.EARLIEST
                    else InitialPosition.LATEST,
                )
            else:
                cursor = self.ledger.new_non_durable_cursor(
                    self._reader_start(start_message_id, initial_position), name
                )
            sub = Subscription(self, self._broker, name, cursor, durable)
            if consumer.read_compacted and start is not None:
                # Remembered beside the cursor, which cannot hold a position the topic
                # no longer has: from the earliest, a compacted reader gets the whole
                # compacted ledger, trimmed ledgers included.
                sub.compacted_read.start_at(start, cursor.mark_delete_position)
            self.subscriptions[name] = sub
        elif not durable and sub.durable:
            raise ConsumerBusy(f"Durable subscription with the same name {name} exists")
        try:
            sub.add_consumer(consumer)
        except Exception:
            if not sub.consumers and not sub.durable:
                self.subscriptions.pop(name, None)
            raise
        return sub

    def ensure_initial_subscription(self, name: str) -> None:
        """Create the durable subscription ``name`` at the earliest position unless it
        exists: a producer's ``initial_subscription_name`` (the dead-letter
        producer's), so what it publishes is retained from its first message.

        Raises:
            NotAllowedError: the name is reserved for the broker's own cursors.
        """
        if name in self.subscriptions:
            return
        if name == DEDUP_CURSOR or name == COMPACTION_CURSOR:
            raise NotAllowedError(f"Subscription name {name} is reserved")
        cursor = self.ledger.open_cursor(name, InitialPosition.EARLIEST)
        self.add_durable_subscription(name, cursor)

    def add_durable_subscription(self, name: str, cursor: ManagedCursor) -> Subscription:
        """Register a durable subscription over ``cursor``, a cursor of this topic's
        ledger already positioned (admin's create-subscription)."""
        sub = Subscription(self, self._broker, name, cursor, durable=True)
        self.subscriptions[name] = sub
        return sub

    def _reader_start(self, start: Position | None, initial_position: int) -> Position:
        if start is None:
            return EARLIEST if initial_position == InitialPosition.EARLIEST else LATEST
        if start.ledger_id < 0:
            return EARLIEST
        if start >= LATEST:
            return LATEST
        return start  # inclusive: the client filters the start id when exclusive

    def consumer_count(self) -> int:
        """Consumers attached to any of the topic's subscriptions."""
        return sum(sub.consumer_count for sub in self.subscriptions.values())

    def resume_dispatch(self, consumer: Consumer) -> None:
        """``consumer`` may take entries again (its connection's write buffer
        drained): its subscription's dispatcher looks for work."""
        sub = self.subscriptions.get(consumer.subscription_name)
        if sub is not None:
            sub.resume_dispatch()

    def remove_consumer(self, consumer: Consumer) -> None:
        sub = self.subscriptions.get(consumer.subscription_name)
        if sub is None:
            return
        sub.remove_consumer(consumer)
        self.drop_unused_reader_subscription(sub)

    def drop_unused_reader_subscription(self, sub: ReaderSubscription) -> None:
        """A reader's subscription ends with its last consumer."""
        if sub.durable or sub.consumer_count:
            return
        if self.subscriptions.get(sub.name) is sub:
            self.subscriptions.pop(sub.name)
            self.ledger.delete_cursor(sub.name)

    def unsubscribe(self, consumer: Consumer) -> None:
        """Delete the consumer's subscription.

        Raises:
            ConsumerBusy: other consumers are still connected.
            SubscriptionNotFound: the subscription does not exist.
        """
        sub = self.subscriptions.get(consumer.subscription_name)
        if sub is None:
            raise SubscriptionNotFound(f"Subscription {consumer.subscription_name} not found")
        others = [c for c in sub.consumers if c is not consumer]
        if others:
            raise ConsumerBusy("Subscription has other connected consumers")
        sub.remove_consumer(consumer)
        self.delete_subscription(sub.name)

    def delete_subscription(self, name: str) -> None:
        sub = self.subscriptions.pop(name, None)
        if sub is None:
            raise SubscriptionNotFound(f"Subscription {name} not found")
        for c in sub.consumers:
            c.connection.close_consumer(c.consumer_id)
            sub.remove_consumer(c)
        self.ledger.delete_cursor(name)
        # The pending-ack log goes with its subscription.
        task = asyncio.get_running_loop().create_task(sub.txns.delete())
        task.add_done_callback(_log_task_error)
        self.on_subscription_acked()

    # -- last message id ---------------------------------------------------------------
    async def last_message(
        self, read_compacted: bool | None = None
    ) -> tuple[Position, EntryInfo | None]:
        """The last message a consumer can read (GET_LAST_MESSAGE_ID).

        Returns ``((ledger, -1), None)`` for a topic without messages; the batch index
        of the last message is ``info.num_messages - 1`` for a batch.

        On a compacted topic whose last message is at or before the horizon, a
        ``read_compacted`` consumer never receives that message if compaction dropped
        it (a tombstone, a keyless message), nor any message of trimmed ledgers: its
        last message is the compacted ledger's last retained one (Pulsar's rule).
        ``read_compacted=None`` (the asker is unknown) answers like a compacted
        consumer whenever the horizon covers the topic's last message, which is
        Pulsar's answer when it does not take the consumer into account.
        """
        position, info = await self._last_topic_message()
        horizon = self.compaction.horizon
        if horizon is None or read_compacted is False:
            return position, info
        if info is not None and position > horizon:
            return position, info
        record = await self.compaction.last_record()
        if record is None:
            return Position(self.ledger.last_confirmed_entry.ledger_id, -1), None
        compacted = entry_info(record.data)
        if compacted.is_batch:
            # Report the last *retained* message of the batch, not the batch's last.
            last_index = record.last_batch_index(compacted.num_messages)
            compacted = dataclasses.replace(compacted, num_messages=last_index + 1)
        return record.position, compacted

    async def _last_topic_message(self) -> tuple[Position, EntryInfo | None]:
        """The last readable entry of the topic that is a real message (not a marker)."""
        limit = self.max_read_position
        first = self.ledger.first_position
        pos = limit
        if pos.entry_id < 0:
            pos = self.ledger.previous_position(pos) if pos > first else pos
        while pos >= first and pos.entry_id >= 0:
            e = await self.ledger.read_entry(pos)
            if e is not None:
                info = entry_info(e.data)
                if info.marker_type is None and not self.is_aborted(info, pos):
                    return pos, info
            prev = self.ledger.previous_position(pos)
            if prev >= pos:
                break
            pos = prev
        return Position(self.ledger.last_confirmed_entry.ledger_id, -1), None

    async def find_position_by_time(self, publish_time_ms: int) -> Position:
        """The first entry published at or after ``publish_time_ms``.

        Scans forward from the first retained entry (publish times come from client
        clocks and are not guaranteed monotonic, so a binary search could miss). If no
        entry qualifies, returns the position after the last entry.
        """
        position = self.ledger.first_position
        while True:
            entries = await self.ledger.read_entries(position, 500)
            if not entries:
                return self.ledger.next_position(self.ledger.last_confirmed_entry)
            for e in entries:
                try:
                    info = entry_info(e.data)
                except Exception:
                    continue
                if info.marker_type is None and info.publish_time >= publish_time_ms:
                    return e.position
            position = self.ledger.next_position(entries[-1].position)

    # -- housekeeping ------------------------------------------------------------------
    def on_subscription_acked(self) -> None:
        if self._trim_handle is None and not self.closed:
            loop = asyncio.get_running_loop()
            self._trim_handle = loop.call_later(TRIM_DELAY_S, self._trim)

    def _trim(self) -> None:
        self._trim_handle = None
        if self.closed:
            return
        task = asyncio.get_running_loop().create_task(self.ledger.trim_consumed_ledgers())
        task.add_done_callback(_log_task_error)

    def is_idle(self) -> bool:
        return not self.producers and not any(s.consumers for s in self.subscriptions.values())

    async def close(self) -> None:
        """Close producers and consumers (clients will reconnect) and the ledger."""
        self.closed = True
        if self._trim_handle is not None:
            self._trim_handle.cancel()
        for p in list(self.producers.values()):
            p.connection.close_producer(p.producer_id)
            self.remove_producer(p)
        for sub in list(self.subscriptions.values()):
            for c in sub.consumers:
                c.connection.close_consumer(c.consumer_id)
                sub.remove_consumer(c)
            await sub.txns.close()
            if sub.durable:
                await self._save_on_close(sub.cursor.flush())
        if self.dedup is not None:
            await self._save_on_close(self.dedup.close())
        if self.txn_buffer is not None:
            await self.txn_buffer.close()
        await self.compaction.close()
        await self.ledger.close()

    async def _save_on_close(self, write: Awaitable[None]) -> None:
        """Await a state write of ``close``. Once another broker fenced the ledger the
        state is the new owner's: the write is refused, and the close goes on."""
        try:
            await write
        except LedgerFencedError as exc:
            log.info("%s: not saved on close: %s", self.name, exc)

    # -- stats -------------------------------------------------------------------------
    def backlog_size(self) -> int:
        """Pulsar's ``backlogSize``: the estimated bytes after the slowest
        subscription's mark-delete position (0 without subscriptions)."""
        if not self.subscriptions:
            return 0
        slowest = min(s.cursor.mark_delete_position for s in self.subscriptions.values())
        return estimated_backlog_size(self.ledger.ledgers(), slowest)

    def msg_backlog(self) -> int:
        """Pulsar's ``pulsar_msg_backlog``: the sum of the subscriptions' backlogs."""
        return sum(s.backlog() for s in self.subscriptions.values())

    def delayed_index_size_bytes(self) -> int:
        """Pulsar's ``delayedMessageIndexSizeInBytes``: the subscriptions' delayed
        delivery indexes together."""
        return sum(s.delayed_index_size_bytes() for s in self.subscriptions.values())

    def stats(self) -> dict[str, object]:
        msg_out = bytes_out = 0
        for sub in self.subscriptions.values():
            m, b, _ = sub.out_counters()
            msg_out += m
            bytes_out += b
        subs = {
            n: s.stats() for n, s in self.subscriptions.items()
        }
        return {
            "msgRateIn": self.rate_in.msg_rate,
            "msgThroughputIn": self.rate_in.byte_rate,
            "msgRateOut": self.rate_out.msg_rate,
            "msgThroughputOut": self.rate_out.byte_rate,
            "averageMsgSize": average_msg_size(self.rate_in),
            "msgInCounter": self.msg_in,
            "bytesInCounter": self.bytes_in,
            "msgOutCounter": msg_out,
            "bytesOutCounter": bytes_out,
            "storageSize": self.ledger.total_size,
            "backlogSize": self.backlog_size(),
            "delayedMessageIndexSizeInBytes": self.delayed_index_size_bytes(),
            "publishers": [p.stats() for p in self.producers.values()],
            "waitingPublishers": self.waiting_producers,
            "subscriptions": subs,
            "replication": {},
            "deduplicationStatus": "Enabled" if self.dedup else "Disabled",
            "msgChunkPublished": self.msg_chunk_published,
            "topicEpoch": self.topic_epoch,
            "compaction": self.compaction.stats(),
        }

    def internal_stats(self) -> dict[str, object]:
        ledgers = self.ledger.ledgers()
        return {
            "entriesAddedCounter": self.msg_in,
            "numberOfEntries": self.ledger.number_of_entries,
            "totalSize": self.ledger.total_size,
            "currentLedgerEntries": ledgers[-1].entries if ledgers else 0,
            "currentLedgerSize": ledgers[-1].size if ledgers else 0,
            "lastConfirmedEntry": str(self.ledger.last_confirmed_entry),
            "state": "LedgerOpened",
            "ledgers": [
                {"ledgerId": li.ledger_id, "entries": li.entries, "size": li.size,
                 "timestamp": li.timestamp_ms}
                for li in ledgers
            ],
            "cursors": {
                n: c_stats
                for n, s in self.subscriptions.items()
                for c_stats in [s.internal_stats()]
            } | self._compaction_cursor_stats(),
            "compactedLedger": self._compacted_ledger_stats(),
        }

    def _compaction_cursor_stats(self) -> dict[str, object]:
        # Pulsar lists the compactor's cursor among the cursors: its mark-delete
        # position is the horizon of the current compacted view.
        c_stats = self.compaction.cursor_internal_stats()
        return {} if c_stats is None else {COMPACTION_CURSOR: c_stats}

    def _compacted_ledger_stats(self) -> dict[str, object]:
        """Pulsar's ``compactedLedger`` internal stats (-1 when never compacted)."""
        view = self.compaction.view
        if view is None:
            return {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False,
                    "underReplicated": False}
        ledgers = view.ledger.ledgers()
        return {
            "ledgerId": ledgers[0].ledger_id if ledgers else -1,
            "entries": view.ledger.number_of_entries,
            "size": view.ledger.total_size,
            "offloaded": False,
            "underReplicated": False,
        }


def _log_task_error(task: asyncio.Task[object]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("background task failed", exc_info=task.exception())
