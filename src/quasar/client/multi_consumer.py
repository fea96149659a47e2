"""A consumer over several topic names: partitions of a partitioned topic, a list of
topics, or every topic of a namespace matching a regex.

Each name gets a child :class:`ConsumerImpl` (own consumer_id, same subscription and
consumer name) and all children push into one shared receive queue. Acks and negative
acks are routed to the child that received the message.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

from quasar.client.consumer import ConsumerImpl
from quasar.client.enums import RegexSubscriptionMode
from quasar.client.exceptions import InvalidConfiguration, OperationNotSupported
from quasar.client.lookup import LookupService
from quasar.client.message import Message
from quasar.client.message_id import MessageId
from quasar.client.options import ConsumerOptions
from quasar.client.receive_queue import ReceiveQueue
from quasar.client.transaction import TransactionImpl
from quasar.errors import AlreadyClosed, QuasarError
from quasar.protocol import TopicName

log = logging.getLogger(__name__)

# make_child(topic_name, partition_index, queue, receiver_queue_size) -> ConsumerImpl
ChildFactory = Callable[[str, int, ReceiveQueue, int], ConsumerImpl]


class MultiTopicsConsumer:
    """Children per topic name behind one queue; the API of :class:`ConsumerImpl`."""

    def __init__(
        self,
        options: ConsumerOptions,
        lookup: LookupService,
        make_child: ChildFactory,
        name: str,
    ) -> None:
        self.options = options
        self.lookup = lookup
        self.make_child = make_child
        self.topic = name
        self.queue = ReceiveQueue()
        self.children: dict[str, ConsumerImpl] = {}
        self._closed = False
        self._discovery: asyncio.Task[None] | None = None

    @property
    def consumer_name(self) -> str:
        return (
            next(iter(self.children.values())).consumer_name
            if self.children
            else (self.options.consumer_name or "")
        )

    async def add_topics(self, topics: list[str]) -> None:
        """Subscribe to every partition of every topic; all or nothing.

        Raises:
            The first error of any child (the children created are closed again).
        """
        new: list[ConsumerImpl] = []
        for topic in topics:
            partitions = await self.lookup.partitioned_metadata(topic)
            if partitions > 0:
                size = max(
                    1,
                    min(
                        self.options.receiver_queue_size,
                        self.options.max_total_receiver_queue_size_across_partitions
                        // partitions,
                    ),
                )
                name = TopicName.parse(topic)
                for i in range(partitions):
                    new.append(
                        self.make_child(name.partition(i).full, i, self.queue, size)
                    )
            else:
                new.append(
                    self.make_child(
                        topic, -1, self.queue, self.options.receiver_queue_size
                    )
                )
        results = await asyncio.gather(
            *(c.start() for c in new), return_exceptions=True
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await asyncio.gather(*(c.close() for c in new), return_exceptions=True)
            raise errors[0]
        for child in new:
            self.children[child.topic] = child

    def start_pattern_discovery(
        self,
        pattern: re.Pattern[str],
        namespace: str,
        mode: RegexSubscriptionMode,
        period_s: float,
    ) -> None:
        """Re-list the namespace every ``period_s`` and subscribe to new matches."""

        async def poll() -> None:
            while not self._closed:
                await asyncio.sleep(period_s)
                try:
                    topics = await self.lookup.topics_of_namespace(namespace, int(mode))
                    known = {TopicName.parse(t).base.full for t in self.children}
                    fresh = [
                        t for t in topics if pattern.fullmatch(t) and t not in known
                    ]
                    if fresh and not self._closed:
                        await self.add_topics(fresh)
                except QuasarError as exc:
                    log.info("topic discovery for %s failed: %s", pattern.pattern, exc)

        self._discovery = asyncio.get_running_loop().create_task(poll())

    def child_for(self, mid: MessageId) -> ConsumerImpl:
        """The child that received ``mid``.

        Raises:
            InvalidConfiguration: the id names no topic this consumer subscribed.
        """
        topic = mid.topic_name()
        if topic is not None and topic in self.children:
            return self.children[topic]
        if mid.partition() >= 0:
            for child in self.children.values():
                if child.partition == mid.partition():
                    return child
        if len(self.children) == 1:
            return next(iter(self.children.values()))
        raise InvalidConfiguration(f"message id {mid} does not belong to {self.topic}")

    def check_open(self) -> None:
        """Raises AlreadyClosed once the consumer is closed."""
        self._check_open()

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed(f"consumer on {self.topic} is closed")

    # --- ConsumerImpl API ------------------------------------------------------------

    def acknowledge(self, mid: MessageId) -> None:
        self._check_open()
        self.child_for(mid).acknowledge(mid)

    def acknowledge_cumulative(self, mid: MessageId) -> None:
        self._check_open()
        self.child_for(mid).acknowledge_cumulative(mid)

    def negative_acknowledge(self, mid: MessageId) -> None:
        self._check_open()
        self.child_for(mid).negative_acknowledge(mid)

    async def acknowledge_txn(
        self, mid: MessageId, txn: TransactionImpl, cumulative: bool = False
    ) -> None:
        """Ack in a transaction through the child that received ``mid``: the
        subscription is registered with the transaction per partition, as Pulsar does.

        Raises:
            See :meth:`ConsumerImpl.acknowledge_txn`.
        """
        self._check_open()
        await self.child_for(mid).acknowledge_txn(mid, txn, cumulative)

    def redeliver_unacknowledged_messages(self) -> None:
        self._check_open()
        for child in self.children.values():
            child.redeliver_unacknowledged_messages()

    async def seek(self, target: MessageId | int) -> None:
        """Seek every child (time, earliest, latest) or the child owning the id."""
        self._check_open()
        if (
            isinstance(target, MessageId)
            and target.ledger_id() >= 0
            and target != MessageId.latest
        ):
            await self.child_for(target).seek(target)
            return
        await asyncio.gather(*(c.seek(target) for c in self.children.values()))

    async def get_last_message_id(self) -> tuple[MessageId, MessageId | None]:
        if len(self.children) == 1:
            return await next(iter(self.children.values())).get_last_message_id()
        raise OperationNotSupported("get_last_message_id on a multi-topic consumer")

    async def has_message_available(
        self, available: Callable[[ConsumerImpl], Any]
    ) -> bool:
        if len(self.queue):
            return True
        for child in self.children.values():
            if await available(child):
                return True
        return False

    async def unsubscribe(self) -> None:
        self._check_open()
        await asyncio.gather(*(c.unsubscribe() for c in self.children.values()))
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._discovery is not None:
            self._discovery.cancel()
        await asyncio.gather(
            *(c.close() for c in self.children.values()), return_exceptions=True
        )
        self.queue.close()

    @property
    def is_connected(self) -> bool:
        return bool(self.children) and all(
            c.is_connected for c in self.children.values()
        )

    async def receive(self, timeout_s: float | None) -> Message:
        self._check_open()
        return await self.queue.get(timeout_s)
