"""The asyncio API: ``quasar.client.aio.Client`` and its producers, consumers, readers.

Names and parameters follow ``pulsar.asyncio`` / ``pulsar.Client``; every I/O method is
a coroutine. Everything runs on the event loop of the caller: create the client inside
a running loop.

    client = Client("pulsar://127.0.0.1:6650")
    producer = await client.create_producer("my-topic")
    await producer.send(b"hello")
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from quasar.client.backoff import Backoff
from quasar.client.config import ClientConfig, parse_service_url
from quasar.client.connection import ConnectionPool
from quasar.client.consumer import ConsumerConfig, ConsumerImpl
from quasar.client.enums import (
    BatchingType,
    CompressionType,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
)
from quasar.client.exceptions import InvalidConfiguration
from quasar.client.lookup import LookupService, retry_until
from quasar.client.message import Message
from quasar.client.message_id import MessageId
from quasar.client.multi_consumer import MultiTopicsConsumer
from quasar.client.outgoing import OutgoingMessage
from quasar.client.partitioned_producer import PartitionedProducerImpl
from quasar.client.producer import ProducerConfig, ProducerImpl
from quasar.client.reader import child_has_message_available, reader_subscription_name
from quasar.client.receipts import SendCallback
from quasar.client.receive_queue import ReceiveQueue
from quasar.client.schema import BytesSchema, Schema
from quasar.errors import AlreadyClosed
from quasar.protocol import TopicName

log = logging.getLogger(__name__)

__all__ = ["Client", "Consumer", "Message", "MessageId", "Producer", "Reader"]


def _full_name(topic: str) -> str:
    """Normalised topic name; raises InvalidTopicName before any I/O."""
    return TopicName.parse(topic).full


def _message_id_of(message: Message | MessageId) -> MessageId:
    if isinstance(message, Message):
        return message.message_id()
    if isinstance(message, MessageId):
        return message
    raise TypeError(f"expected a Message or MessageId, got {type(message).__name__}")


def build_outgoing(
    schema: Schema,
    content: Any,
    properties: dict[str, str] | None = None,
    partition_key: str | None = None,
    ordering_key: str | None = None,
    sequence_id: int | None = None,
    replication_clusters: list[str] | None = None,
    disable_replication: bool = False,
    event_timestamp: int | None = None,
    deliver_at: int | None = None,
    deliver_after: timedelta | None = None,
) -> OutgoingMessage:
    """Validate ``send`` arguments and encode the content with the schema.

    Raises:
        TypeError / ValueError: content or arguments of the wrong type.
    """
    null_value = content is None
    payload = b"" if null_value else schema.encode(content)
    for k, v in (properties or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError("message properties must map str to str")
    if deliver_after is not None:
        if not isinstance(deliver_after, timedelta):
            raise ValueError("deliver_after must be a datetime.timedelta")
        import time

        deliver_at = int(time.time() * 1000 + deliver_after.total_seconds() * 1000)
    replicate_to = (
        ["__local__"] if disable_replication else list(replication_clusters or [])
    )
    return OutgoingMessage(
        payload=payload,
        properties=dict(properties or {}),
        partition_key=partition_key,
        ordering_key=ordering_key.encode("utf-8")
        if isinstance(ordering_key, str)
        else ordering_key,
        sequence_id=sequence_id,
        replicate_to=replicate_to,
        event_time=event_timestamp,
        deliver_at_ms=deliver_at,
        null_value=null_value,
    )


class Producer:
    """Asyncio producer (one topic, partitioned or not)."""

    def __init__(
        self, impl: ProducerImpl | PartitionedProducerImpl, topic: str, schema: Schema
    ) -> None:
        self._impl = impl
        self._topic = topic
        self._schema = schema

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str | None:
        return self._impl.producer_name

    def last_sequence_id(self) -> int:
        return self._impl.last_sequence_id_published

    def is_connected(self) -> bool:
        return self._impl.is_connected

    async def send(self, content: Any, **kwargs: Any) -> MessageId:
        """Publish and wait for the broker's receipt; returns the message id.

        Keyword arguments are those of ``pulsar.Producer.send`` (properties,
        partition_key, ordering_key, sequence_id, replication_clusters,
        disable_replication, event_timestamp, deliver_at, deliver_after).

        Raises:
            AlreadyClosed, ProducerQueueIsFull, MessageTooBig, Timeout, BrokerError.
        """
        return await self._impl.send(build_outgoing(self._schema, content, **kwargs))

    async def send_async(
        self, content: Any, callback: SendCallback, **kwargs: Any
    ) -> None:
        """Queue a message; ``callback(error_or_None, message_id)`` runs on the loop.

        Raises:
            AlreadyClosed, ProducerQueueIsFull, MessageTooBig: not queued.
        """
        await self._impl.send_async(
            build_outgoing(self._schema, content, **kwargs), callback
        )

    async def flush(self) -> None:
        """Send any open batch and wait for every outstanding receipt."""
        await self._impl.flush()

    async def close(self) -> None:
        """Flush and close. Idempotent."""
        await self._impl.close()


class Consumer:
    """Asyncio consumer over one or more topics."""

    def __init__(
        self,
        impl: ConsumerImpl | MultiTopicsConsumer,
        topic: str,
        conf: ConsumerConfig,
        listener: Callable[[Consumer, Message], Any] | None = None,
    ) -> None:
        self._impl = impl
        self._topic = topic
        self._conf = conf
        self._listener_task: asyncio.Task[None] | None = None
        if listener is not None:
            self._listener_task = asyncio.get_running_loop().create_task(
                self._run_listener(listener)
            )

    async def _run_listener(self, listener: Callable[[Consumer, Message], Any]) -> None:
        while True:
            try:
                msg = await self._receive(None)
            except (AlreadyClosed, asyncio.CancelledError):
                return
            try:
                result = listener(self, msg)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # a failing listener must not stop delivery
                log.exception("message listener failed")

    async def _receive(self, timeout_s: float | None) -> Message:
        if isinstance(self._impl, MultiTopicsConsumer):
            return await self._impl.receive(timeout_s)
        self._impl._check_open()
        return await self._impl.queue.get(timeout_s)

    def topic(self) -> str:
        return self._topic

    def subscription_name(self) -> str:
        return self._conf.subscription

    def consumer_name(self) -> str:
        return self._impl.consumer_name

    def is_connected(self) -> bool:
        return self._impl.is_connected

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message, waiting up to ``timeout_millis`` (None: forever).

        Raises:
            Timeout: nothing arrived in time.
            AlreadyClosed: the consumer is closed.
            InvalidConfiguration: a message listener is set.
        """
        if self._listener_task is not None:
            raise InvalidConfiguration(
                "receive() cannot be used with a message_listener"
            )
        return await self._receive(
            None if timeout_millis is None else timeout_millis / 1000.0
        )

    async def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge one message (sent in a group within ~100 ms).

        Raises:
            AlreadyClosed: the consumer is closed.
        """
        self._impl.acknowledge(_message_id_of(message))

    async def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge a message and all before it.

        Raises:
            CumulativeAcknowledgementNotAllowedError: Shared / Key_Shared subscription.
        """
        self._impl.acknowledge_cumulative(_message_id_of(message))

    async def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Have the message redelivered after ``negative_ack_redelivery_delay_ms``."""
        self._impl.negative_acknowledge(_message_id_of(message))

    async def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to redeliver every unacknowledged message now."""
        self._impl.redeliver_unacknowledged_messages()

    async def seek(self, messageid: MessageId | int) -> None:
        """Reset the subscription to a message id or a publish timestamp (ms).

        Raises:
            Timeout, BrokerError: the broker did not confirm.
        """
        await self._impl.seek(messageid)

    async def get_last_message_id(self) -> MessageId:
        """The id of the last message stored on the topic (entry -1 if empty)."""
        last, _ = await self._impl.get_last_message_id()
        return last

    async def unsubscribe(self) -> None:
        """Delete the subscription and close the consumer."""
        await self._impl.unsubscribe()
        await self._stop_listener()

    async def close(self) -> None:
        """Close; unacked messages will be redelivered to other consumers. Idempotent."""
        await self._impl.close()
        await self._stop_listener()

    async def _stop_listener(self) -> None:
        task, self._listener_task = self._listener_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class Reader:
    """Asyncio reader: reads a topic from a start id without a durable subscription."""

    def __init__(self, impl: ConsumerImpl | MultiTopicsConsumer, topic: str) -> None:
        self._impl = impl
        self._topic = topic

    def topic(self) -> str:
        return self._topic

    def is_connected(self) -> bool:
        return self._impl.is_connected

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message.

        Raises:
            Timeout: nothing arrived within ``timeout_millis``.
            AlreadyClosed: the reader is closed.
        """
        timeout_s = None if timeout_millis is None else timeout_millis / 1000.0
        if isinstance(self._impl, MultiTopicsConsumer):
            return await self._impl.receive(timeout_s)
        self._impl._check_open()
        return await self._impl.queue.get(timeout_s)

    async def has_message_available(self) -> bool:
        """Whether ``read_next`` would return a message now or once it arrives."""
        if isinstance(self._impl, MultiTopicsConsumer):
            return await self._impl.has_message_available(child_has_message_available)
        self._impl._check_open()
        return await child_has_message_available(self._impl)

    async def seek(self, messageid: MessageId | int) -> None:
        """Restart reading at a message id (inclusive) or a publish timestamp (ms)."""
        await self._impl.seek(messageid)

    async def close(self) -> None:
        await self._impl.close()


class Client:
    """Asyncio client: the factory for producers, consumers and readers.

    Raises:
        InvalidUrl: ``service_url`` is not ``pulsar://host:port``.
    """

    def __init__(
        self,
        service_url: str,
        operation_timeout_seconds: float = 30,
        connection_timeout_ms: int = 10_000,
        listener_name: str | None = None,
        keep_alive_interval_seconds: float = 30,
        **kwargs: Any,
    ) -> None:
        parse_service_url(service_url)
        # Options of pulsar.Client this client does not use (TLS, auth, threads,
        # logging) are accepted so that code written for pulsar keeps working.
        self._ignored = kwargs
        self.config = ClientConfig(
            service_url=service_url,
            operation_timeout_seconds=operation_timeout_seconds,
            connection_timeout_ms=connection_timeout_ms,
            keep_alive_interval_seconds=keep_alive_interval_seconds,
            listener_name=listener_name or "",
        )
        self.pool = ConnectionPool(self.config)
        self.lookup = LookupService(self.config, self.pool)
        self._handles: list[Any] = []
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("client is closed")

    async def _partitions(self, topic: str) -> int:
        return await retry_until(
            lambda: self.lookup.partitioned_metadata(topic),
            self.config.operation_timeout_s,
            Backoff(self.config.initial_backoff_ms, self.config.max_backoff_ms),
            f"partition metadata of {topic}",
        )

    async def get_topic_partitions(self, topic: str) -> list[str]:
        """Partition names of ``topic`` (or the topic itself when not partitioned)."""
        self._check_open()
        full = _full_name(topic)
        n = await self._partitions(full)
        return [f"{full}-partition-{i}" for i in range(n)] if n > 0 else [full]

    async def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        schema: Schema | None = None,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30000,
        compression_type: CompressionType = CompressionType.NONE,
        max_pending_messages: int = 1000,
        max_pending_messages_across_partitions: int = 50000,
        block_if_queue_full: bool = False,
        batching_enabled: bool = False,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10,
        chunking_enabled: bool = False,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        lazy_start_partitioned_producers: bool = False,
        properties: dict[str, str] | None = None,
        batching_type: BatchingType = BatchingType.Default,
        encryption_key: str | None = None,
        crypto_key_reader: Any = None,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
        message_router: Callable[[Message, int], int] | None = None,
    ) -> Producer:
        """Create a producer (see ``pulsar.Client.create_producer``).

        Raises:
            InvalidTopicName, InvalidConfiguration, Timeout, ProducerBusy,
            TopicNotFound, IncompatibleSchema, ...
        """
        self._check_open()
        if chunking_enabled and batching_enabled:
            raise InvalidConfiguration("chunking and batching cannot both be enabled")
        if encryption_key or crypto_key_reader:
            raise InvalidConfiguration("end-to-end encryption is not supported")
        full = _full_name(topic)
        schema = schema or BytesSchema()
        conf = ProducerConfig(
            producer_name=producer_name,
            schema=schema,
            initial_sequence_id=initial_sequence_id,
            send_timeout_millis=send_timeout_millis,
            compression_type=CompressionType(compression_type),
            max_pending_messages=max_pending_messages,
            max_pending_messages_across_partitions=max_pending_messages_across_partitions,
            block_if_queue_full=block_if_queue_full,
            batching_enabled=batching_enabled,
            batching_max_messages=batching_max_messages,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms,
            batching_type=BatchingType(batching_type),
            properties=dict(properties or {}),
            access_mode=ProducerAccessMode(access_mode),
        )
        n = await self._partitions(full)
        impl: ProducerImpl | PartitionedProducerImpl
        if n > 0:

            def make(name: str, index: int, max_pending: int) -> ProducerImpl:
                return ProducerImpl(
                    name, index, conf, self.pool, self.lookup, max_pending=max_pending
                )

            impl = PartitionedProducerImpl(
                full, n, conf, make, message_routing_mode, message_router
            )
        else:
            impl = ProducerImpl(full, -1, conf, self.pool, self.lookup)
        await impl.start()
        self._handles.append(impl)
        return Producer(impl, full, schema)

    async def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: Schema | None = None,
        message_listener: Callable[[Consumer, Message], Any] | None = None,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50000,
        consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None,
        broker_consumer_stats_cache_time_ms: int = 30000,
        negative_ack_redelivery_delay_ms: int = 60000,
        is_read_compacted: bool = False,
        properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: int = 60,
        initial_position: InitialPosition = InitialPosition.Latest,
        crypto_key_reader: Any = None,
        replicate_subscription_state_enabled: bool = False,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        start_message_id_inclusive: bool = False,
        batch_receive_policy: Any = None,
        key_shared_policy: ConsumerKeySharedPolicy | None = None,
        batch_index_ack_enabled: bool = False,
        regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
        dead_letter_policy: Any = None,
        crypto_failure_action: int = 0,
    ) -> Consumer:
        """Subscribe to a topic, a list of topics or a regex (see ``pulsar.Client.subscribe``).

        Raises:
            InvalidTopicName, InvalidConfiguration, Timeout, ConsumerBusy,
            TopicNotFound, SubscriptionNotFound, ...
        """
        self._check_open()
        if not subscription_name:
            raise InvalidConfiguration("subscription_name must not be empty")
        if receiver_queue_size < 1:
            raise InvalidConfiguration("receiver_queue_size must be at least 1")
        conf = ConsumerConfig(
            subscription=subscription_name,
            consumer_type=ConsumerType(consumer_type),
            schema=schema or BytesSchema(),
            receiver_queue_size=receiver_queue_size,
            max_total_receiver_queue_size_across_partitions=max_total_receiver_queue_size_across_partitions,
            consumer_name=consumer_name,
            unacked_messages_timeout_ms=unacked_messages_timeout_ms,
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            initial_position=InitialPosition(initial_position),
            properties=dict(properties or {}),
            is_read_compacted=is_read_compacted,
            batch_index_ack_enabled=batch_index_ack_enabled,
            key_shared_policy=key_shared_policy,
            replicate_subscription_state_enabled=replicate_subscription_state_enabled,
        )
        if isinstance(topic, re.Pattern):
            impl, name = await self._subscribe_pattern(
                topic,
                conf,
                RegexSubscriptionMode(regex_subscription_mode),
                pattern_auto_discovery_period,
            )
        elif isinstance(topic, (list, tuple)):
            names = [_full_name(t) for t in topic]
            impl = await self._multi(conf, names, ",".join(names))
            name = ",".join(names)
        else:
            name = _full_name(topic)
            impl = await self._single_or_partitioned(conf, name)
        self._handles.append(impl)
        return Consumer(impl, name, conf, message_listener)

    def _child_factory(
        self, conf: ConsumerConfig
    ) -> Callable[[str, int, ReceiveQueue, int], ConsumerImpl]:
        # Children share one consumer name, as the C++ client's multi-topic consumer does.
        if conf.consumer_name is None:
            import secrets

            conf.consumer_name = secrets.token_hex(5)

        def make(name: str, index: int, queue: ReceiveQueue, size: int) -> ConsumerImpl:
            return ConsumerImpl(
                name,
                index,
                conf,
                self.pool,
                self.lookup,
                queue=queue,
                receiver_queue_size=size,
            )

        return make

    async def _multi(
        self, conf: ConsumerConfig, topics: list[str], name: str
    ) -> MultiTopicsConsumer:
        multi = MultiTopicsConsumer(conf, self.lookup, self._child_factory(conf), name)
        await multi.add_topics(topics)
        return multi

    async def _single_or_partitioned(
        self, conf: ConsumerConfig, full: str
    ) -> ConsumerImpl | MultiTopicsConsumer:
        if await self._partitions(full) > 0:
            return await self._multi(conf, [full], full)
        impl = ConsumerImpl(full, -1, conf, self.pool, self.lookup)
        await impl.start()
        return impl

    async def _subscribe_pattern(
        self,
        pattern: re.Pattern[str],
        conf: ConsumerConfig,
        mode: RegexSubscriptionMode,
        period_s: float,
    ) -> tuple[MultiTopicsConsumer, str]:
        text = pattern.pattern
        # The namespace comes from the pattern's fixed prefix, as in pulsar.
        prefix = re.split(r"[\\^$.|?*+()\[\]{}]", text.split("://", 1)[-1], maxsplit=1)[
            0
        ]
        parts = prefix.split("/")
        namespace = "/".join(parts[:2]) if len(parts) >= 3 else "public/default"
        if "://" not in text:
            pattern = re.compile(
                f"persistent://{namespace}/{text}"
                if len(parts) < 3
                else f"persistent://{text}"
            )
        topics = await retry_until(
            lambda: self.lookup.topics_of_namespace(namespace, int(mode)),
            self.config.operation_timeout_s,
            Backoff(self.config.initial_backoff_ms, self.config.max_backoff_ms),
            f"topics of {namespace}",
        )
        matched = [t for t in topics if pattern.fullmatch(t)]
        multi = await self._multi(conf, matched, pattern.pattern)
        multi.start_pattern_discovery(pattern, namespace, mode, period_s)
        return multi, pattern.pattern

    async def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: Schema | None = None,
        reader_listener: Callable[[Reader, Message], Any] | None = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        crypto_key_reader: Any = None,
        start_message_id_inclusive: bool = False,
        crypto_failure_action: int = 0,
    ) -> Reader:
        """Create a reader starting at ``start_message_id`` (see ``pulsar.Client.create_reader``).

        Raises:
            InvalidTopicName, InvalidConfiguration, Timeout, TopicNotFound, ...
        """
        self._check_open()
        if not isinstance(start_message_id, MessageId):
            raise InvalidConfiguration("start_message_id must be a MessageId")
        if reader_listener is not None:
            raise InvalidConfiguration(
                "reader_listener is not supported; use read_next()"
            )
        full = _full_name(topic)
        conf = ConsumerConfig(
            subscription=reader_subscription_name(subscription_role_prefix),
            consumer_type=ConsumerType.Exclusive,
            schema=schema or BytesSchema(),
            receiver_queue_size=max(1, receiver_queue_size),
            consumer_name=reader_name,
            is_read_compacted=is_read_compacted,
            durable=False,
            start_message_id=start_message_id,
            start_message_id_inclusive=start_message_id_inclusive,
        )
        impl = await self._single_or_partitioned(conf, full)
        self._handles.append(impl)
        return Reader(impl, full)

    async def close(self) -> None:
        """Close every producer, consumer and reader, then the connections."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(
            *(h.close() for h in self._handles), return_exceptions=True
        )
        self._handles.clear()
        self.pool.close()

    async def shutdown(self) -> None:
        """Drop connections without closing producers and consumers politely."""
        self._closed = True
        self.pool.close()
