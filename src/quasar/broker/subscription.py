"""A subscription: a cursor on a topic, a dispatcher, and the consumers attached to it.

Acknowledgement rules (Pulsar's):

* Individual acks delete single entries; a batch entry with a partial ``ack_set``
  records the remaining bits so redelivery only brings back the unacked members.
* Cumulative acks move mark-delete and are allowed on Exclusive and Failover only.
* A consumer that leaves hands its unacknowledged entries back for redelivery, and
  their redelivery count goes up by one.

A subscription sees its topic only as an ``api.SubscriptionHost`` (what its dispatcher
reads, and where it reports acks) and the broker as an ``api.BrokerContext`` (storage
and transactions, for its pending acks).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from quasar.errors import (
    ConsumerBusy,
    NotAllowedError,
    RemoteProtocolError,
    StorageError,
)
from quasar.protocol import ack_set as ack_sets
from quasar.protocol import encode_command, pb
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import ManagedCursor, Position
from quasar.transaction.pending_ack.results import AbortResult, CommitResult
from quasar.transaction.txn_status import TxnAction

from .api import BrokerContext, SubscriptionHost
from .compacted_read import CompactedReadState
from .consumer import Consumer
from .dispatcher import (
    Dispatcher,
    SharedDispatcher,
    SingleActiveConsumerDispatcher,
)
from .entry_info import entry_info
from .key_shared import checked_ranges
from .key_shared_dispatcher import KeySharedDispatcher, mode_of
from .pending_acks import SubscriptionTransactions
from .stats_rates import MessageRate

log = logging.getLogger(__name__)

SUB_EXCLUSIVE = pb.CommandSubscribe.Exclusive
SUB_SHARED = pb.CommandSubscribe.Shared
SUB_FAILOVER = pb.CommandSubscribe.Failover
SUB_KEY_SHARED = pb.CommandSubscribe.Key_Shared
SUB_TYPE_NAMES: dict[int | None, str] = {
    SUB_EXCLUSIVE: "Exclusive",
    SUB_SHARED: "Shared",
    SUB_FAILOVER: "Failover",
    SUB_KEY_SHARED: "Key_Shared",
}

REDELIVERY_COUNTS_MAX = 100_000  # bound on tracked redelivery counters per subscription
# How long a reader's (non-durable) subscription outlives a seek without a consumer:
# its client resubscribes within its reconnect backoff; a client that closed instead
# must not leave the cursor behind for ever.
RESUBSCRIBE_AFTER_SEEK_TIMEOUT_S = 60.0


class Subscription:
    def __init__(
        self,
        topic: SubscriptionHost,
        broker: BrokerContext,
        name: str,
        cursor: ManagedCursor,
        durable: bool,
    ) -> None:
        self.topic = topic
        self.name = name
        self.cursor = cursor
        self._bounds = broker.input_bounds
        self._key_shared_replica_points = broker.key_shared_replica_points
        self.durable = durable
        self.sub_type: int | None = None
        self.dispatcher: Dispatcher | None = None
        self._redelivery: dict[Position, int] = {}
        self.txns = SubscriptionTransactions(
            broker,
            topic.name,
            topic.ledger,
            name,
            cursor,
            on_released=self.redeliver_released,
            on_committed=self.apply_committed,
        )
        # Where read_compacted consumers of this subscription read next.
        self.compacted_read = CompactedReadState()
        # Set while a reader's subscription waits for its consumer after a seek.
        self._resubscribe_timer: asyncio.TimerHandle | None = None
        # What consumers that left had delivered and redelivered, so that the
        # subscription's counters (and the rates over them) do not drop when a
        # consumer goes, as Pulsar's do not.
        self._removed_msg_out = 0
        self._removed_bytes_out = 0
        self._removed_msg_redelivered = 0
        # msgRateOut/msgThroughputOut and msgRateRedeliver, refreshed by the stats
        # updater from ``out_counters``.
        self.rate_out = MessageRate()
        self.rate_redeliver = MessageRate()
        # msgRateExpired, refreshed by the stats updater from total_msg_expired.
        self.rate_expired = MessageRate()
        # Entries expired by message TTL or evicted by a backlog quota, for the
        # subscription stats (totalMsgExpired).
        self.total_msg_expired = 0

    def describe(self) -> str:
        return f"{self.topic.name}/{self.name}"

    @property
    def consumers(self) -> list[Consumer]:
        return list(self.dispatcher.consumers) if self.dispatcher else []

    @property
    def consumer_count(self) -> int:
        """How many consumers are attached (without copying them, as ``consumers``
        does)."""
        return len(self.dispatcher.consumers) if self.dispatcher else 0

    def resume_dispatch(self) -> None:
        """A consumer may take entries again (its connection drained its write
        buffer): look for work."""
        if self.dispatcher is not None:
            self.dispatcher.schedule()

    # -- consumers ---------------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        """Attach a consumer.

        Raises:
            ConsumerBusy: an Exclusive subscription already has a consumer, or the
                subscription has consumers of another type (or Key_Shared policy).
            ConsumerAssignError: Key_Shared STICKY hash ranges that are malformed or
                overlap another consumer's.
            ServiceNotReady: the subscription's pending-ack log has an unreadable
                record.
        """
        if consumer.sub_type == SUB_KEY_SHARED and mode_of(consumer) == pb.STICKY:
            # Malformed ranges are refused before any dispatcher is made for them.
            checked_ranges(consumer.key_shared_ranges)
        d = self.dispatcher
        if d is not None and d.consumers:
            if self.sub_type != consumer.sub_type:
                raise ConsumerBusy(
                    f"Subscription {self.name} is of type {SUB_TYPE_NAMES.get(self.sub_type)}"
                    f", not {SUB_TYPE_NAMES.get(consumer.sub_type)}"
                )
            if self.sub_type == SUB_EXCLUSIVE:
                raise ConsumerBusy("Exclusive consumer is already connected")
        if self.txns.failure is not None:
            # Entries acknowledged in open transactions are unknown: delivering
            # could hand out messages a committed transaction consumed.
            raise self.txns.not_ready("subscribe")
        if (
            d is None
            or self.sub_type != consumer.sub_type
            or (isinstance(d, KeySharedDispatcher) and not d.consumers
                and not d.same_policy(consumer))
        ):
            if d is not None:
                d.close()
                if d.delayed_messages or isinstance(d, KeySharedDispatcher):
                    # What it held back (its delayed index; for Key_Shared, whose new
                    # policy gets a new dispatcher as in Pulsar, its replay set too) is
                    # read again from mark-delete on.
                    self.cursor.rewind()
            d = self._new_dispatcher(consumer)
            self.dispatcher = d
            self.sub_type = consumer.sub_type
        d.add_consumer(consumer)
        if self._resubscribe_timer is not None:
            self._resubscribe_timer.cancel()
            self._resubscribe_timer = None

    def _new_dispatcher(self, consumer: Consumer) -> Dispatcher:
        sub_type = consumer.sub_type
        if sub_type in (SUB_EXCLUSIVE, SUB_FAILOVER):
            self.cursor.rewind()
            return SingleActiveConsumerDispatcher(
                self, self.topic, sub_type == SUB_FAILOVER, self.topic.partition_index
            )
        if sub_type == SUB_KEY_SHARED:
            return KeySharedDispatcher(
                self, self.topic, consumer, self._key_shared_replica_points
            )
        return SharedDispatcher(self, self.topic)

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.closed = True
        if self.dispatcher is not None:
            if consumer in self.dispatcher.consumers:
                self._removed_msg_out += consumer.msg_out
                self._removed_bytes_out += consumer.bytes_out
                self._removed_msg_redelivered += consumer.msg_redelivered
            self.dispatcher.remove_consumer(consumer)

    def notify_active_consumer(self, consumer: Consumer, active: bool) -> None:
        cmd = pb.BaseCommand(type=pb.BaseCommand.ACTIVE_CONSUMER_CHANGE)
        cmd.active_consumer_change.consumer_id = consumer.consumer_id
        cmd.active_consumer_change.is_active = active
        consumer.connection.write(encode_command(cmd))

    # -- flow and redelivery -----------------------------------------------------------
    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits)
        if self.dispatcher is not None:
            self.dispatcher.schedule()

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        if self.dispatcher is not None:
            self.dispatcher.on_redeliver(consumer, positions)

    def count_redelivery(self, position: Position) -> None:
        if position not in self._redelivery and len(self._redelivery) >= REDELIVERY_COUNTS_MAX:
            return
        self._redelivery[position] = self._redelivery.get(position, 0) + 1

    def redelivery_count(self, position: Position) -> int:
        return self._redelivery.get(position, 0)

    def notify_new_entries(self) -> None:
        if self.dispatcher is not None and self.dispatcher.consumers:
            self.dispatcher.schedule()

    # -- acknowledgements --------------------------------------------------------------
    def ack_individual(
        self, consumer: Consumer, acks: Sequence[tuple[Position, Sequence[int] | None]]
    ) -> None:
        """Acknowledge entries (or batch members, given a remaining-unacked ack_set).

        Raises:
            NotAllowedError: an ack set is longer than its batch needs (nothing of
                this ACK is applied).
        """
        self._bounds.check_ack_sets(acks, lambda pos: self._known_batch_size(pos, consumer))
        whole: list[Position] = []
        handle = self.txns.handle
        for pos, ack_set in acks:
            if handle is not None:
                # Members pending in a transaction stay unacked on the cursor so that an
                # abort can still hand them back (Pulsar ignores such acks).
                normal = handle.filter_normal_ack(pos, ack_set)
                if not normal.apply:
                    continue
                ack_set = normal.ack_set
            if ack_set:
                merged = self._merge_ack_set(pos, ack_set)
                if not ack_sets.is_all_acked(merged):
                    self.cursor.set_batch_ack(pos, merged)
                    continue
            whole.append(pos)
        if not whole:
            return
        self.cursor.delete(whole)
        self._forget_acked(whole, consumer)
        self._after_ack()

    def _known_batch_size(self, position: Position, acker: Consumer) -> int | None:
        """An entry's message count, to bound an ack set by: from the consumer it was
        dispatched to, the recently published entries, or else the entry itself (a
        read from the entry cache or a local file). None for an entry that cannot be
        read (gone, or never written: the cursor ignores acks of those)."""
        n = acker.pending.get(position)
        if n is not None:
            return n
        for other in self.consumers:
            n = other.pending.get(position)
            if n is not None:
                return n
        info = self.topic.recent_infos.get(position)
        if info is not None:
            return info.num_messages
        try:
            entry = self.topic.ledger.read_entry_now(position)
            if entry is None:
                return None
            info = entry_info(entry.data)
        except (StorageError, RemoteProtocolError) as e:
            log.warning("%s: cannot read %s to check an ack set: %s",
                        self.describe(), position, e)
            return None
        return info.num_messages

    def _forget_acked(self, positions: Sequence[Position], acker: Consumer | None) -> None:
        """Entries now deleted on the cursor leave the redelivery counters, the replay
        set and the pending map of the consumer they were dispatched to (``acker``'s,
        usually; a commit has no acking consumer at hand)."""
        d = self.dispatcher
        others = d.consumers if d is not None else []
        for pos in positions:
            self._redelivery.pop(pos, None)
            if d is not None:
                d.discard_replay(pos)
            if acker is None or not acker.acked(pos):
                for other in others:
                    if other.acked(pos):
                        break

    def _merge_ack_set(self, pos: Position, ack_set: Sequence[int]) -> list[int]:
        current = self.cursor.batch_ack_set(pos)
        return ack_sets.and_(current, ack_set) if current is not None else list(ack_set)

    def ack_cumulative(self, consumer: Consumer, position: Position) -> None:
        """Acknowledge everything at or before ``position``.

        Raises:
            NotAllowedError: on Shared and Key_Shared subscriptions.
        """
        if self.sub_type in (SUB_SHARED, SUB_KEY_SHARED):
            raise NotAllowedError("Cumulative ack is not supported for Shared subscriptions")
        if position <= self.cursor.mark_delete_position:
            return
        self.cursor.mark_delete(position)
        self._forget_acked_up_to(position, [consumer])
        self._after_ack()

    def acknowledge_up_to(self, position: Position) -> None:
        """Acknowledge everything at or before ``position`` for every consumer, whatever
        the subscription type (an operator's skip or clear-backlog)."""
        if position <= self.cursor.mark_delete_position:
            return
        self.cursor.mark_delete(position)
        self._forget_acked_up_to(position, self.consumers)
        self._after_ack()

    def _forget_acked_up_to(self, position: Position, consumers: Sequence[Consumer]) -> None:
        for c in consumers:
            c.acked_up_to(position)
        for p in [p for p in self._redelivery if p <= position]:
            del self._redelivery[p]
        if self.dispatcher is not None:
            self.dispatcher.discard_replay_up_to(position)

    def apply_committed(self, result: CommitResult) -> None:
        """A commit applied its acks to the cursor: forget those entries as a plain
        ack would. A batch acknowledged member by member in transactions stays
        pending on its consumer until the last member's commit deletes it."""
        if result.acked:
            self._forget_acked(result.acked, None)
        if result.mark_delete is not None:
            self._forget_acked_up_to(result.mark_delete, self.consumers)
        # Unlike a plain ack (_after_ack), always look for work: the commit may have
        # been the last thing holding an entry or a consumer back.
        self.topic.on_subscription_acked()
        if self.dispatcher is not None:
            self.dispatcher.schedule()

    def check_end_of_topic(self) -> None:
        """On a terminated topic with nothing left to acknowledge, tell every
        consumer it reached the end of the topic (Pulsar's REACHED_END_OF_TOPIC)."""
        if not self.topic.terminated or self.backlog() > 0:
            return
        for consumer in self.consumers:
            cmd = pb.BaseCommand(type=pb.BaseCommand.REACHED_END_OF_TOPIC)
            cmd.reachedEndOfTopic.consumer_id = consumer.consumer_id
            consumer.connection.write(encode_command(cmd))

    def _after_ack(self) -> None:
        if self.topic.terminated:
            self.check_end_of_topic()
        self.topic.on_subscription_acked()
        if self.dispatcher is not None and (
            self.dispatcher.replay_size or self.sub_type in (SUB_SHARED, SUB_KEY_SHARED)
        ):
            # Acks can unblock Key_Shared hand-overs (recently joined consumers wait
            # for mark-delete) and unacked-message limits.
            self.dispatcher.schedule()

    # -- transactions ------------------------------------------------------------------
    async def ack_individual_in_txn(
        self,
        consumer: Consumer,
        txn: TxnID,
        acks: Sequence[tuple[Position, Sequence[int] | None]],
    ) -> None:
        """Record acks of ``txn`` as pending until it ends.

        Raises:
            TransactionConflict, NotAllowedError, TooManyRequests, ServiceNotReady.
            NotAllowedError also when an ack set is longer than its batch needs.
        """
        self._bounds.check_ack_sets(acks, lambda pos: self._known_batch_size(pos, consumer))
        await self.txns.individual_ack(txn, acks, consumer.pending)
        # A batch member's entry stays in flight for the others (and for the commit
        # that deletes it: apply_committed).
        self._forget_acked([pos for pos, ack_set in acks if not ack_set], consumer)

    async def ack_cumulative_in_txn(
        self, consumer: Consumer, txn: TxnID, position: Position
    ) -> None:
        """Raises: NotAllowedError (Shared/Key_Shared), TransactionConflict, ..."""
        if self.sub_type in (SUB_SHARED, SUB_KEY_SHARED):
            raise NotAllowedError("Cumulative ack is not supported for Shared subscriptions")
        await self.txns.cumulative_ack(txn, position)
        consumer.acked_up_to(position)

    async def end_txn(self, txn: TxnID, action: TxnAction, low_watermark: int) -> None:
        """Commit or abort ``txn``'s pending acks here (idempotent)."""
        await self.txns.end_txn(txn, action, low_watermark)

    def redeliver_released(self, released: AbortResult) -> None:
        """What an aborted transaction had acknowledged is delivered again: whole
        entries, and of batches only the members it held (the others may be in a
        consumer's hands; sending them again would duplicate them)."""
        d = self.dispatcher
        positions = released.positions
        if d is None or not positions:
            return
        if isinstance(d, SingleActiveConsumerDispatcher):
            for p in positions:
                self.count_redelivery(p)
            d.rewind()  # one consumer, in order: restart at the first unacked entry
        else:
            d.add_replay(positions, count_redelivery=True,
                         members=dict(released.batch_members))
            d.schedule()

    # -- seek --------------------------------------------------------------------------
    def reset_cursor(self, position: Position) -> None:
        """Restart the subscription at ``position`` and disconnect its consumers.

        The clients reconnect and resubscribe (with fresh permits), like Pulsar. A
        reader's non-durable subscription is kept for them although it has no consumer
        meanwhile (Pulsar's ``removeConsumer(consumer, isResetCursor=true)``): the
        resubscribe attaches to the reset cursor, whatever start id it carries. After a
        seek by time that is the only record of the position (the clients resubscribe
        with their original start id, or ``earliest``).
        """
        self.cursor.reset(position)
        self.compacted_read.on_seek(position, self.cursor.mark_delete_position)
        self._redelivery.clear()
        d = self.dispatcher
        if d is not None:
            d.clear_replay()
            for c in list(d.consumers):
                c.take_pending()
                c.connection.close_consumer(c.consumer_id)
                self.remove_consumer(c)
        if not self.durable and not self.consumers:
            if self._resubscribe_timer is not None:
                self._resubscribe_timer.cancel()
            self._resubscribe_timer = asyncio.get_running_loop().call_later(
                RESUBSCRIBE_AFTER_SEEK_TIMEOUT_S, self._on_resubscribe_timeout
            )

    # -- expiry (message TTL, expire-messages, backlog-quota eviction) ---------------
    def expire_up_to(self, position: Position, *, expired: bool = True) -> int:
        """Count every entry at or before ``position`` as consumed, whatever the
        subscription type, as Pulsar's message expiry, backlog eviction and
        clear-backlog move the cursor's mark-delete; return how many entries left the
        backlog. ``expired``: count them in ``total_msg_expired`` (not when an
        operator clears the backlog).

        Consumers keep what they hold; their acknowledgements of it are no-ops.
        """
        if position <= self.cursor.mark_delete_position:
            return 0
        before = self.cursor.backlog()
        self.cursor.mark_delete(position)
        removed = max(before - self.cursor.backlog(), 0)
        if expired:
            self.total_msg_expired += removed
        self._forget_acked_up_to(position, self.consumers)
        self.topic.on_subscription_acked()
        if self.dispatcher is not None:
            self.dispatcher.schedule()
        return removed

    def _on_resubscribe_timeout(self) -> None:
        self._resubscribe_timer = None
        if not self.topic.closed:
            self.topic.drop_unused_reader_subscription(self)

    # -- stats -------------------------------------------------------------------------
    def backlog(self) -> int:
        return self.cursor.backlog()

    def delayed_messages(self) -> int:
        """Pulsar's ``msgDelayed``: entries held back until their delivery time."""
        return self.dispatcher.delayed_messages if self.dispatcher else 0

    def delayed_index_size_bytes(self) -> int:
        """Pulsar's ``delayedMessageIndexSizeInBytes`` of this subscription."""
        return self.dispatcher.delayed_index_size_bytes if self.dispatcher else 0

    def out_counters(self) -> tuple[int, int, int]:
        """Messages and bytes delivered, and messages redelivered, by every consumer
        the subscription has had (Pulsar's msgOutCounter and bytesOutCounter)."""
        msgs, size, redelivered = (
            self._removed_msg_out, self._removed_bytes_out, self._removed_msg_redelivered
        )
        for c in self.dispatcher.consumers if self.dispatcher else ():
            msgs += c.msg_out
            size += c.bytes_out
            redelivered += c.msg_redelivered
        return msgs, size, redelivered

    def unacked_messages(self) -> int:
        return sum(c.unacked_messages for c in self.dispatcher.consumers) if (
            self.dispatcher
        ) else 0

    def blocked_on_unacked(self) -> bool:
        """True when every consumer is blocked on its unacked-messages limit (the
        subscription can deliver to none of them)."""
        consumers = self.dispatcher.consumers if self.dispatcher else ()
        return bool(consumers) and all(c.blocked_on_unacked for c in consumers)

    def stats(self) -> dict[str, object]:
        consumers = self.consumers
        msg_out, bytes_out, _ = self.out_counters()
        backlog = self.backlog()
        delayed = self.delayed_messages()
        return {
            "msgRateOut": self.rate_out.msg_rate,
            "msgThroughputOut": self.rate_out.byte_rate,
            "msgBacklog": backlog,
            "msgBacklogNoDelayed": max(backlog - delayed, 0),
            "msgDelayed": delayed,
            "delayedMessageIndexSizeInBytes": self.delayed_index_size_bytes(),
            "type": SUB_TYPE_NAMES.get(self.sub_type or SUB_EXCLUSIVE, "Exclusive"),
            "msgOutCounter": msg_out,
            "bytesOutCounter": bytes_out,
            "unackedMessages": self.unacked_messages(),
            "isDurable": self.durable,
            "isReplicated": False,
            "consumers": self._consumer_stats(consumers),
            "lastMarkDeletePosition": str(self.cursor.mark_delete_position),
            "msgRateRedeliver": self.rate_redeliver.msg_rate,
            "msgRateExpired": self.rate_expired.msg_rate,
            "totalMsgExpired": self.total_msg_expired,
            "blockedSubscriptionOnUnackedMsgs": self.blocked_on_unacked(),
            **self.txns.status(),
            **self._key_shared_stats(),
        }

    def _consumer_stats(self, consumers: list[Consumer]) -> list[dict[str, object]]:
        d = self.dispatcher
        if not isinstance(d, KeySharedDispatcher):
            return [c.stats() for c in consumers]
        ranges = d.key_hash_ranges()
        return [{**c.stats(), "keyHashRanges": ranges.get(c, [])} for c in consumers]

    def _key_shared_stats(self) -> dict[str, object]:
        """Pulsar's Key_Shared fields of SubscriptionStats."""
        d = self.dispatcher
        if not isinstance(d, KeySharedDispatcher):
            return {}
        return {
            "keySharedMode": "STICKY" if d.mode == pb.STICKY else "AUTO_SPLIT",
            "allowOutOfOrderDelivery": d.allow_out_of_order_delivery,
            "consumersAfterMarkDeletePosition": d.consumers_after_mark_delete(),
        }

    def internal_stats(self) -> dict[str, object]:
        ranges = self.cursor.individually_deleted_ranges()
        return {
            "markDeletePosition": str(self.cursor.mark_delete_position),
            "readPosition": str(self.cursor.read_position),
            "individuallyDeletedMessages": "["
            + ", ".join(f"({a}..{b}]" for a, b in ranges)
            + "]",
            "numberOfEntriesSinceFirstNotAckedMessage": self.backlog(),
            "totalNonContiguousDeletedMessagesRange": len(ranges),
            "properties": dict(self.cursor.properties),
            "active": bool(self.consumers),
            "state": "Open",
        }
