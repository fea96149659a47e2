"""A non-persistent topic (or one partition of a partitioned non-persistent topic).

Pulsar's best-effort topics, for data that may be lost (telemetry, live positions):
a published entry is handed at once to the connected consumers of each subscription
(``NonPersistentSubscription.offer``) and then forgotten. Nothing is written to disk,
so the producer's receipt goes out at once, with the id Pulsar gives, 0:0. With no
subscription the entry is simply gone.

A topic lives in memory only while it has producers or subscriptions and is unloaded
with its last one (``on_unused``): it has no stored state to keep.

What needs stored messages is refused with NotAllowedError and Pulsar's wording:
transactions, seek, readCompacted, a reader starting at a given message id, and
getLastMessageId. A reader or consumer starting at the earliest or latest message
both begin with the next message published, since nothing earlier is kept.
"""

from __future__ import annotations

from collections.abc import Callable

from quasar.errors import (
    ConsumerBusy,
    NotAllowedError,
    RemoteProtocolError,
    ServiceNotReady,
    SubscriptionNotFound,
)
from quasar.protocol.topic_name import TopicName
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import EARLIEST, LATEST, Position

from .consumer import Consumer
from .entry_info import EntryInfo
from .non_persistent_subscription import NOT_SUPPORTED, NonPersistentSubscription
from .producer import Producer
from .producer_access import AccessControlledProducers, ProducerAccess
from .stats_rates import MessageRate, average_msg_size

__all__ = ["NonPersistentTopic"]

PublishCallback = Callable[[Position | None, BaseException | None], None]
# What checks a SEND's metadata claims and parses it (``InputBounds.published_info``).
PublishedInfo = Callable[[bytes, int], EntryInfo]

# The id of every non-persistent message, as Pulsar answers it.
NON_PERSISTENT_POSITION = Position(0, 0)


class NonPersistentTopic(AccessControlledProducers):
    """Producers and subscriptions of one non-persistent topic, in memory only."""

    def __init__(
        self,
        name: TopicName,
        published_info: PublishedInfo,
        on_unused: Callable[[NonPersistentTopic], None],
    ) -> None:
        self.topic_name = name
        self.name = name.full
        self.partition_index = name.partition_index
        self._published_info = published_info
        self._on_unused = on_unused
        self.producers: dict[int, Producer] = {}
        self._named_producers: dict[str, Producer] = {}
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        self.closed = False
        self.msg_in = 0
        self.bytes_in = 0
        self.rate_in = MessageRate()
        self.access = ProducerAccess()

    # -- producers -----------------------------------------------------------------------
    async def check_transactions_recovered(self, txn_enabled: bool) -> None:
        """Nothing to recover: a non-persistent topic has no transaction buffer."""

    async def add_producer(
        self, producer: Producer, on_queued: Callable[[], None] = lambda: None
    ) -> None:
        """Attach a producer, honouring its access mode as a persistent topic does
        (``producer_access.py``; the epoch lives only as long as the topic).

        Raises:
            ServiceNotReady: the topic is being unloaded or deleted (the client retries).
            ProducerBusy: the name is connected already, or a shared producer while
                exclusive access is held or awaited.
            ProducerFenced: an exclusive producer refused.
        """
        try:
            await self._attach_producer(producer, on_queued)
        except Exception:
            self.unload_if_unused()
            raise

    def remove_producer(self, producer: Producer) -> None:
        self._detach_producer(producer)
        self.unload_if_unused()

    def last_sequence_id(self, producer_name: str) -> int:
        """Deduplication needs stored state: a non-persistent topic has none."""
        return -1

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
        """Offer one entry to every subscription, then answer ``callback(0:0, None)``.

        Refused (``callback(None, error)``): a transactional send, unreadable or
        out-of-bounds metadata (``InputBounds``), a marker entry.
        """
        if txn is not None:
            callback(None, NotAllowedError(f"Transactional publish {NOT_SUPPORTED}"))
            return
        try:
            info = self._published_info(data, num_messages)
        except RemoteProtocolError as e:
            callback(None, NotAllowedError(f"Unreadable message metadata: {e}"))
            return
        except NotAllowedError as e:
            callback(None, e)
            return
        if info.marker_type is not None or info.txn is not None:
            callback(None, NotAllowedError("Clients may not publish marker or transaction entries"))
            return
        n = info.num_messages
        self.msg_in += n
        self.bytes_in += len(data)
        producer.msg_in += n
        producer.bytes_in += len(data)
        for sub in self.subscriptions.values():
            sub.offer(data, info)
        callback(NON_PERSISTENT_POSITION, None)

    # -- consumers -----------------------------------------------------------------------
    def subscribe(
        self,
        consumer: Consumer,
        durable: bool,
        initial_position: int,
        start_message_id: Position | None,
    ) -> NonPersistentSubscription:
        """Attach a consumer to a (possibly new) subscription.

        Raises:
            ServiceNotReady: the topic is being unloaded or deleted.
            NotAllowedError: readCompacted, or a reader starting at a given message.
            ConsumerBusy: see ``NonPersistentSubscription.add_consumer``.
        """
        try:
            return self._subscribe(consumer, start_message_id)
        except Exception:
            self.unload_if_unused()
            raise

    def _subscribe(
        self, consumer: Consumer, start_message_id: Position | None
    ) -> NonPersistentSubscription:
        if self.closed:
            raise ServiceNotReady(f"Topic {self.name} is closing")
        if consumer.read_compacted:
            raise NotAllowedError("readCompacted only valid on persistent topics")
        if start_message_id is not None and start_message_id not in (EARLIEST, LATEST):
            raise NotAllowedError(
                f"Reading from message {start_message_id.ledger_id}:"
                f"{start_message_id.entry_id} {NOT_SUPPORTED}"
            )
        name = consumer.subscription_name
        sub = self.subscriptions.get(name)
        if sub is None:
            sub = NonPersistentSubscription(name, consumer.sub_type, self.partition_index)
            self.subscriptions[name] = sub
        try:
            sub.add_consumer(consumer)
        except Exception:
            if not sub.consumers:
                self.subscriptions.pop(name, None)
            raise
        return sub

    def consumer_count(self) -> int:
        return sum(s.consumer_count for s in self.subscriptions.values())

    def resume_dispatch(self, consumer: Consumer) -> None:
        """Nothing waits for a consumer: what it could not take was dropped."""

    def remove_consumer(self, consumer: Consumer) -> None:
        sub = self.subscriptions.get(consumer.subscription_name)
        if sub is None:
            return
        sub.remove_consumer(consumer)
        # A subscription holds nothing without consumers: it ends with the last one.
        if not sub.consumers and self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]
        self.unload_if_unused()

    def unsubscribe(self, consumer: Consumer) -> None:
        """Raises:
        SubscriptionNotFound: no such subscription.
        ConsumerBusy: other consumers are still connected.
        """
        sub = self.subscriptions.get(consumer.subscription_name)
        if sub is None:
            raise SubscriptionNotFound(f"Subscription {consumer.subscription_name} not found")
        if any(c is not consumer for c in sub.consumers):
            raise ConsumerBusy("Subscription has other connected consumers")
        self.remove_consumer(consumer)

    async def find_position_by_time(self, publish_time_ms: int) -> Position:
        """Raises: NotAllowedError: nothing is stored to seek in."""
        raise NotAllowedError(f"Seek {NOT_SUPPORTED}")

    async def last_message(self, read_compacted: bool) -> tuple[Position, EntryInfo | None]:
        """Raises: NotAllowedError: nothing is stored (Pulsar refuses it too)."""
        raise NotAllowedError(f"getLastMessageId {NOT_SUPPORTED}")

    # -- lifecycle -----------------------------------------------------------------------
    def is_idle(self) -> bool:
        # A waiting producer, or one just handed exclusive access (the holder) that has
        # not attached yet, keeps the topic loaded.
        access = self.access
        return (
            not self.producers
            and not self.subscriptions
            and not access.waiting_count
            and access.holder is None
        )

    def unload_if_unused(self) -> None:
        """Unload the topic if it has no producer and no subscription."""
        if not self.closed and self.is_idle():
            self.closed = True
            self._on_unused(self)

    async def close(self) -> None:
        """Disconnect every producer and consumer (clients reconnect) and unload."""
        self.closed = True
        for p in list(self.producers.values()):
            p.connection.close_producer(p.producer_id)
            self.remove_producer(p)
        for sub in list(self.subscriptions.values()):
            for c in list(sub.consumers):
                c.connection.close_consumer(c.consumer_id)
                sub.remove_consumer(c)
        self.subscriptions.clear()
        self._on_unused(self)

    # -- stats ---------------------------------------------------------------------------
    def refresh_rates(self, elapsed_s: float) -> None:
        """Counters into rates over the last ``elapsed_s`` seconds (the stats update)."""
        self.rate_in.update(self.msg_in, self.bytes_in, elapsed_s)
        for p in self.producers.values():
            p.rate_in.update(p.msg_in, p.bytes_in, elapsed_s)
        for sub in self.subscriptions.values():
            sub.refresh_rates(elapsed_s)

    def msg_drop_rate(self) -> float:
        """The topic's msgDropRate: its subscriptions' sum (producers never drop here:
        a publish is dispatched before the next one is read)."""
        return sum(s.rate_drop.msg_rate for s in self.subscriptions.values())

    def stats(self) -> dict[str, object]:
        """Pulsar's NonPersistentTopicStats (the fields quasar tracks)."""
        msg_out = bytes_out = 0
        rate_out = throughput_out = 0.0
        for sub in self.subscriptions.values():
            m, b = sub.out_counters()
            msg_out += m
            bytes_out += b
            rate_out += sub.rate_out.msg_rate
            throughput_out += sub.rate_out.byte_rate
        publishers = []
        for p in self.producers.values():
            publisher = p.stats()
            publisher["msgDropRate"] = 0.0
            publishers.append(publisher)
        return {
            "msgRateIn": self.rate_in.msg_rate,
            "msgThroughputIn": self.rate_in.byte_rate,
            "msgRateOut": rate_out,
            "msgThroughputOut": throughput_out,
            "averageMsgSize": average_msg_size(self.rate_in),
            "msgInCounter": self.msg_in,
            "bytesInCounter": self.bytes_in,
            "msgOutCounter": msg_out,
            "bytesOutCounter": bytes_out,
            "storageSize": 0,
            "backlogSize": 0,
            "msgDropRate": self.msg_drop_rate(),
            "publishers": publishers,
            "subscriptions": {n: s.stats() for n, s in self.subscriptions.items()},
            "replication": {},
            "deduplicationStatus": "Disabled",
            "topicEpoch": self.topic_epoch,
        }
