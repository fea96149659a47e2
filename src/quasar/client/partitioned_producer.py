"""A producer over all partitions of a partitioned topic.

One :class:`ProducerImpl` per partition (each with its own producer_id); messages are
routed client-side, see :mod:`quasar.client.routing`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from quasar.client.enums import PartitionsRoutingMode
from quasar.client.exceptions import InvalidConfiguration
from quasar.client.message import Message
from quasar.client.message_id import MessageId
from quasar.client.options import ProducerOptions
from quasar.client.outgoing import OutgoingMessage
from quasar.client.producer import ProducerImpl
from quasar.client.receipts import SendCallback
from quasar.client.routing import CustomRouter, RoundRobinRouter, SinglePartitionRouter
from quasar.client.transaction import TransactionImpl
from quasar.protocol import TopicName


def partition_name(topic: str, index: int) -> str:
    """The full name of partition ``index`` of ``topic``."""
    return TopicName.parse(topic).partition(index).full


class PartitionedProducerImpl:
    """Routes each message to one partition's producer."""

    def __init__(
        self,
        topic: str,
        num_partitions: int,
        options: ProducerOptions,
        make_partition: Callable[[str, int, int], ProducerImpl],
    ) -> None:
        self.topic = topic
        self.num_partitions = num_partitions
        self.options = options
        routing_mode = options.message_routing_mode
        message_router = options.message_router
        # 0 (no count limit, the client's memory limit applies) stays 0.
        per_partition = (
            max(
                1,
                min(
                    options.max_pending_messages,
                    options.max_pending_messages_across_partitions // num_partitions,
                ),
            )
            if options.max_pending_messages > 0
            else 0
        )
        self.partitions = [
            make_partition(partition_name(topic, i), i, per_partition)
            for i in range(num_partitions)
        ]
        self._custom: CustomRouter | None = None
        self._router: RoundRobinRouter | SinglePartitionRouter
        if message_router is not None:
            self._custom = CustomRouter(message_router)
        elif routing_mode == PartitionsRoutingMode.CustomPartition:
            raise InvalidConfiguration("CustomPartition routing needs a message_router")
        if routing_mode == PartitionsRoutingMode.UseSinglePartition:
            self._router = SinglePartitionRouter(num_partitions)
        else:
            self._router = RoundRobinRouter(
                num_partitions,
                options.batching_enabled,
                options.batching_max_messages,
                options.batching_max_publish_delay_ms,
            )

    async def start(self) -> None:
        """Create every partition's producer; on failure close the ones created."""
        results = await asyncio.gather(
            *(p.start() for p in self.partitions), return_exceptions=True
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await asyncio.gather(
                *(p.close() for p in self.partitions), return_exceptions=True
            )
            raise errors[0]

    def choose(self, msg: OutgoingMessage) -> int:
        if self._custom is not None:
            view = Message(
                msg.payload,
                MessageId(),
                properties=msg.properties,
                partition_key=msg.partition_key or "",
                ordering_key=msg.ordering_key or b"",
                event_time=msg.event_time or 0,
                topic=self.topic,
            )
            return self._custom.choose_for(view, self.num_partitions)
        return self._router.choose(msg.routing_key, self.num_partitions)

    async def send(self, msg: OutgoingMessage) -> MessageId:
        return await self.partitions[self.choose(msg)].send(msg)

    async def send_async(self, msg: OutgoingMessage, callback: SendCallback) -> None:
        await self.partitions[self.choose(msg)].send_async(msg, callback)

    async def send_payloads_async(
        self,
        payloads: Sequence[bytes],
        callback: SendCallback,
        txn: TransactionImpl | None = None,
    ) -> None:
        """:meth:`ProducerImpl.send_payloads_async` over the partitions: each run of
        up to ``batching_max_messages`` payloads goes to the partition the router
        picks for its first (keyless) message.

        Raises:
            InvalidConfiguration: the producer has a custom message router (it
                decides per message).
            As :meth:`ProducerImpl.send_payloads_async`.
        """
        if self._custom is not None:
            raise InvalidConfiguration(
                "send_payloads_async routes runs of messages; a message_router decides "
                "per message"
            )
        run = 1
        if self.options.batching_enabled:
            # 0: no count limit on a batch, so one run takes them all.
            run = self.options.batching_max_messages or max(1, len(payloads))
        for start in range(0, len(payloads), run):
            chunk = payloads[start : start + run]
            partition = self._router.choose_keyless(len(chunk), self.num_partitions)
            await self.partitions[partition].send_payloads_async(chunk, callback, txn)

    async def flush(self) -> None:
        await asyncio.gather(*(p.flush() for p in self.partitions))

    async def close(self) -> None:
        await asyncio.gather(
            *(p.close() for p in self.partitions), return_exceptions=True
        )

    @property
    def producer_name(self) -> str | None:
        return self.partitions[0].producer_name if self.partitions else None

    @property
    def last_sequence_id_published(self) -> int:
        return max((p.last_sequence_id_published for p in self.partitions), default=-1)

    @property
    def is_connected(self) -> bool:
        return all(p.is_connected for p in self.partitions)
