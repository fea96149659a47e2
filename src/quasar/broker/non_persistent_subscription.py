"""A subscription of a non-persistent topic: delivery now or never.

Nothing is stored, so there is no cursor, no backlog and no redelivery. A published
entry is offered once to the subscription; it goes to the consumer its type picks
(Exclusive and Failover: the active consumer; Shared: the next consumer in turn that
can take it; Key_Shared: the consumer owning the entry's key hash) if that consumer
has a permit left and its connection is writable, and is dropped otherwise, as
Pulsar's non-persistent dispatchers do. Drops are counted in messages and reported as
``msgDropRate``.

The only place a message waits is the consumer connection's write buffer, which a
non-writable connection stops filling (``WriteState``): nothing here is queued, so a
slow or hostile consumer costs the broker at most one write buffer.

Acknowledgements are accepted and ignored (Pulsar does the same: nothing is left to
acknowledge); a redelivery request has nothing to redeliver.
"""

from __future__ import annotations

from collections.abc import Sequence

from quasar.errors import ConsumerBusy, NotAllowedError
from quasar.protocol import encode_command, pb
from quasar.storage.api import Entry, Position

from .consumer import Consumer, Delivery
from .entry_info import EntryInfo
from .key_shared import KEY_HASH_RANGE_SIZE, sticky_key_hash
from .stats_rates import MessageRate
from .subscription import (
    SUB_EXCLUSIVE,
    SUB_FAILOVER,
    SUB_KEY_SHARED,
    SUB_TYPE_NAMES,
)

__all__ = ["NonPersistentSubscription"]

NOT_SUPPORTED = "is not supported on non-persistent topic"  # Pulsar's wording


class NonPersistentSubscription:
    """The consumers of one subscription name on a non-persistent topic."""

    durable = False

    def __init__(self, name: str, sub_type: int, partition_index: int) -> None:
        self.name = name
        self.sub_type = sub_type
        self.partition_index = partition_index
        self.consumers: list[Consumer] = []
        self._next = 0  # Shared: whose turn it is
        self._active: Consumer | None = None  # Failover: the consumer told it is active
        # Messages offered to this subscription and dropped (no consumer could take
        # them); msgDropRate is its rate, refreshed by the stats updater.
        self.msg_dropped = 0
        self.rate_drop = MessageRate()
        self.rate_out = MessageRate()
        # Counters of consumers that left, so the subscription's totals never go back.
        self._gone_out = (0, 0)

    # -- consumers -----------------------------------------------------------------------
    @property
    def consumer_count(self) -> int:
        return len(self.consumers)

    def add_consumer(self, consumer: Consumer) -> None:
        """Raises:
        ConsumerBusy: an Exclusive subscription already has a consumer, or the
            subscription has consumers of another type (Pulsar's answers).
        """
        if self.consumers:
            if self.sub_type != consumer.sub_type:
                raise ConsumerBusy(
                    f"Subscription {self.name} is of type {SUB_TYPE_NAMES.get(self.sub_type)}"
                    f", not {SUB_TYPE_NAMES.get(consumer.sub_type)}"
                )
            if self.sub_type == SUB_EXCLUSIVE:
                raise ConsumerBusy("Exclusive consumer is already connected")
        self.sub_type = consumer.sub_type
        self.consumers.append(consumer)
        self.consumers.sort(key=lambda c: c.order)
        self._elect(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.closed = True
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            out, size = self._gone_out
            self._gone_out = (out + consumer.msg_out, size + consumer.bytes_out)
        self._elect(None)

    def _elect(self, joined: Consumer | None) -> None:
        """Failover: tell the consumers which one is active when that changes, and a
        consumer that joins as a standby that it is one (ACTIVE_CONSUMER_CHANGE, as
        for persistent topics)."""
        if self.sub_type != SUB_FAILOVER:
            return
        new = self.active_consumer()
        if new is self._active:
            if joined is not None and joined is not new:
                _notify_active(joined, False)
            return
        self._active = new
        for c in self.consumers:
            _notify_active(c, c is new)

    # -- delivery ------------------------------------------------------------------------
    def offer(self, data: bytes, info: EntryInfo) -> None:
        """Hand one published entry to the consumer this subscription's type picks, or
        drop it (counted) when that consumer cannot take it now."""
        consumer = self._pick(info)
        if consumer is None:
            self.msg_dropped += info.num_messages
            return
        # Pulsar gives every non-persistent entry the id 0:0: nothing is stored, so
        # there is no position to name.
        entry = Entry(Position(0, 0), data)
        consumer.deliver([Delivery(entry, info)], track=False)

    def _pick(self, info: EntryInfo) -> Consumer | None:
        consumers = self.consumers
        if not consumers:
            return None
        if self.sub_type in (SUB_EXCLUSIVE, SUB_FAILOVER):
            active = self.active_consumer()
            return active if active is not None and active.available() else None
        if self.sub_type == SUB_KEY_SHARED:
            owner = self._key_owner(info.key)
            return owner if owner.available() else None
        # Shared: the next consumer in turn that can take it.
        n = len(consumers)
        for step in range(n):
            c = consumers[(self._next + step) % n]
            if c.available():
                self._next = (self._next + step + 1) % n
                return c
        return None

    def active_consumer(self) -> Consumer | None:
        """Exclusive and Failover: the consumer that gets every message (the same
        choice as the persistent dispatcher: priority level, then name, then join
        order; on a partition, the partition's turn among them)."""
        if not self.consumers:
            return None
        top_level = min(c.priority_level for c in self.consumers)
        top = sorted(
            (c for c in self.consumers if c.priority_level == top_level),
            key=lambda c: (c.consumer_name, c.order),
        )
        if self.sub_type == SUB_FAILOVER and self.partition_index >= 0:
            return top[self.partition_index % len(top)]
        return top[0]

    def _key_owner(self, key: bytes | None) -> Consumer:
        # Auto-split: the hash range is cut into equal parts, one per consumer in join
        # order, so a key stays with its consumer while the consumers do not change.
        slot = sticky_key_hash(key or b"")
        return self.consumers[slot * len(self.consumers) // KEY_HASH_RANGE_SIZE]

    # -- what the connection relays ------------------------------------------------------
    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits)

    def ack_individual(
        self, consumer: Consumer, acks: Sequence[tuple[Position, list[int] | None]]
    ) -> None:
        """Accepted and ignored: nothing is stored, so nothing is left to delete."""

    def ack_cumulative(self, consumer: Consumer, position: Position) -> None:
        """Accepted and ignored, as ``ack_individual``."""

    def redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """Nothing to redeliver: an entry is offered once."""

    async def ack_individual_in_txn(self, *args: object) -> None:
        """Raises: NotAllowedError: transactions need a persistent topic."""
        raise NotAllowedError(f"Transactional acknowledgement {NOT_SUPPORTED}")

    async def ack_cumulative_in_txn(self, *args: object) -> None:
        """Raises: NotAllowedError: transactions need a persistent topic."""
        raise NotAllowedError(f"Transactional acknowledgement {NOT_SUPPORTED}")

    def reset_cursor(self, position: Position) -> None:
        """Raises: NotAllowedError: there is nothing stored to seek in."""
        raise NotAllowedError(f"Seek {NOT_SUPPORTED}")

    def backlog(self) -> int:
        return 0

    # -- stats ---------------------------------------------------------------------------
    def out_counters(self) -> tuple[int, int]:
        msgs, size = self._gone_out
        for c in self.consumers:
            msgs += c.msg_out
            size += c.bytes_out
        return msgs, size

    def refresh_rates(self, elapsed_s: float) -> None:
        for c in self.consumers:
            c.rate_out.update(c.msg_out, c.bytes_out, elapsed_s)
        msgs, size = self.out_counters()
        self.rate_out.update(msgs, size, elapsed_s)
        self.rate_drop.update(self.msg_dropped, 0, elapsed_s)

    def stats(self) -> dict[str, object]:
        """Pulsar's NonPersistentSubscriptionStats (the fields quasar tracks)."""
        msgs, size = self.out_counters()
        active = self.active_consumer()
        single = self.sub_type in (SUB_EXCLUSIVE, SUB_FAILOVER)
        return {
            "msgRateOut": self.rate_out.msg_rate,
            "msgThroughputOut": self.rate_out.byte_rate,
            "msgOutCounter": msgs,
            "bytesOutCounter": size,
            "msgRateRedeliver": 0.0,
            "msgBacklog": 0,
            "msgBacklogNoDelayed": 0,
            "unackedMessages": 0,
            "blockedSubscriptionOnUnackedMsgs": False,
            "type": SUB_TYPE_NAMES.get(self.sub_type, "Exclusive"),
            "activeConsumerName": active.consumer_name if single and active else None,
            "msgRateExpired": 0.0,
            "isDurable": False,
            "isReplicated": False,
            "consumers": [c.stats() for c in self.consumers],
            "msgDropRate": self.rate_drop.msg_rate,
            # quasar's own: the count msgDropRate is the rate of.
            "msgDropCounter": self.msg_dropped,
        }


def _notify_active(consumer: Consumer, active: bool) -> None:
    cmd = pb.BaseCommand(type=pb.BaseCommand.ACTIVE_CONSUMER_CHANGE)
    cmd.active_consumer_change.consumer_id = consumer.consumer_id
    cmd.active_consumer_change.is_active = active
    consumer.connection.write(encode_command(cmd))
