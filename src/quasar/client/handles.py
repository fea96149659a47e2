"""The asyncio handles the application holds: Producer, Consumer, Reader.

They wrap the internal implementations (single topic or partitioned/multi-topic) and
encode/decode through the schema; :mod:`quasar.client.aio` creates them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from quasar.client.batch_receive import batch_receive
from quasar.client.consumer import ConsumerImpl
from quasar.client.dead_letter import ConsumerLetters
from quasar.client.exceptions import InvalidConfiguration
from quasar.client.message import Message
from quasar.client.message_id import MessageId
from quasar.client.multi_consumer import MultiTopicsConsumer
from quasar.client.options import ConsumerOptions, ProducerOptions
from quasar.client.outgoing import OutgoingMessage
from quasar.client.partitioned_producer import PartitionedProducerImpl
from quasar.client.producer import ProducerImpl
from quasar.client.reader import child_has_message_available
from quasar.client.receipts import SendCallback, checked_send_callback
from quasar.client.schema import Schema
from quasar.client.schema_basic import BytesSchema
from quasar.client.transaction import TransactionHandle, transaction_impl
from quasar.errors import AlreadyClosed
from quasar.protocol import TopicName

log = logging.getLogger(__name__)


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
    txn: Any = None,
) -> OutgoingMessage:
    """Validate ``send`` arguments and encode the content with the schema.

    ``txn`` is a transaction handle (asyncio or blocking) or None.

    Raises:
        TypeError / ValueError: content or arguments of the wrong type.
    """
    impl = None if txn is None else transaction_impl(txn)
    null_value = content is None
    payload = b"" if null_value else schema.encode(content)
    for k, v in (properties or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError("message properties must map str to str")
    if deliver_after is not None:
        if not isinstance(deliver_after, timedelta):
            raise ValueError("deliver_after must be a datetime.timedelta")
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
        txn=impl,
    )


class Producer:
    """Asyncio producer (one topic, partitioned or not)."""

    def __init__(
        self,
        impl: ProducerImpl | PartitionedProducerImpl,
        topic: str,
        options: ProducerOptions,
    ) -> None:
        self._impl = impl
        self._topic = topic
        self._options = options
        self._schema = options.schema

    @property
    def options(self) -> ProducerOptions:
        """The options the producer was created with."""
        return self._options

    @property
    def max_pending_messages(self) -> int:
        """How many messages may wait for receipts: ``max_pending_messages``, or
        ``max_pending_messages_across_partitions`` on a partitioned topic (0: no
        count limit)."""
        if isinstance(self._impl, PartitionedProducerImpl):
            return self._options.max_pending_messages_across_partitions
        return self._options.max_pending_messages

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
        disable_replication, event_timestamp, deliver_at, deliver_after), plus
        ``txn``: publish in that transaction (visible to consumers once it commits).

        Raises:
            AlreadyClosed, ProducerQueueIsFull, MessageTooBig, Timeout, BrokerError.
            InvalidTxnStatus: ``txn`` is no longer OPEN (timed out, ending, ended).
        """
        return await self._impl.send(build_outgoing(self._schema, content, **kwargs))

    def new_message(self, content: Any, **kwargs: Any) -> OutgoingMessage:
        """``content`` encoded with the producer's schema, with the keyword arguments
        of :meth:`send`, ready for :meth:`send_message_async`.

        Raises:
            TypeError / ValueError: content or arguments of the wrong type.
        """
        return build_outgoing(self._schema, content, **kwargs)

    async def send_message(self, message: OutgoingMessage) -> MessageId:
        """Publish a message made by :meth:`new_message` (or copied from a received
        one) and wait for its receipt; as :meth:`send`."""
        return await self._impl.send(message)

    async def send_message_async(
        self, message: OutgoingMessage, callback: SendCallback
    ) -> None:
        """Queue a message made by :meth:`new_message`; as :meth:`send_async`."""
        await self._impl.send_async(message, callback)

    async def send_async(
        self, content: Any, callback: SendCallback, txn: Any = None, **kwargs: Any
    ) -> None:
        """Queue a message; ``callback(error_or_None, message_id)`` runs on the loop.

        With ``txn=``, the message is an operation of that transaction from this call
        until its callback: ``txn.commit()`` waits for it and fails if it failed.

        Raises:
            AlreadyClosed, ProducerQueueIsFull, MessageTooBig: not queued.
            InvalidTxnStatus: ``txn`` is no longer OPEN.
            TransactionNotFound, TransactionCoordinatorNotFound, ...: the partition
                could not be registered with ``txn``.
            TypeError: ``callback`` is neither callable nor None (None: nobody is
                told, as in ``pulsar``).
        """
        callback = checked_send_callback(callback)
        if not kwargs and content is not None:
            # No options but maybe a transaction (the exactly-once sinks' and perf's
            # common case): what build_outgoing would produce, without its checks.
            msg = OutgoingMessage(
                self._schema.encode(content),
                txn=None if txn is None else transaction_impl(txn),
            )
        else:
            msg = build_outgoing(self._schema, content, txn=txn, **kwargs)
        await self._impl.send_async(msg, callback)

    async def send_payloads_async(
        self, payloads: Sequence[bytes], callback: SendCallback, txn: Any = None
    ) -> None:
        """Queue many messages, in order, each nothing but its already encoded
        payload (no key, properties or event time): batch entries are built from
        the payloads directly, so the cost is per entry rather than per message (a
        quasar extension; bulk writers such as the Spark sink use it).

        ``callback(error_or_None, message_id)`` runs once per entry, with the id of
        the entry's first message. With ``txn=``, each entry is an operation of that
        transaction until its callback.

        Raises:
            As :meth:`send_async`, for the first entry that could not be queued.
            InvalidConfiguration: chunking, or a custom message router.
            TypeError: the producer's schema is not bytes.
        """
        if not isinstance(self._schema, BytesSchema):
            raise TypeError("send_payloads_async needs a producer with the bytes schema")
        await self._impl.send_payloads_async(
            payloads,
            checked_send_callback(callback),
            None if txn is None else transaction_impl(txn),
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
        options: ConsumerOptions,
        letters: ConsumerLetters | None = None,
    ) -> None:
        self._impl = impl
        self._topic = topic
        self._options = options
        self._letters = letters
        self._listener_task: asyncio.Task[None] | None = None
        listener = options.message_listener
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
        return await self._impl.receive(timeout_s)

    def topic(self) -> str:
        return self._topic

    def subscription_name(self) -> str:
        return self._options.subscription_name

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

    async def batch_receive(self) -> list[Message]:
        """The next batch of messages under the consumer's ``batch_receive_policy``
        (see :mod:`quasar.client.batch_receive`); empty when its timeout passed
        with nothing received.

        Raises:
            AlreadyClosed: the consumer is closed.
            InvalidConfiguration: a message listener is set.
        """
        if self._listener_task is not None:
            raise InvalidConfiguration(
                "batch_receive() cannot be used with a message_listener"
            )
        self._impl.check_open()
        policy = self._options.batch_receive_policy
        assert policy is not None  # ConsumerOptions fills in the default
        return await batch_receive(self._impl.queue, policy)

    async def reconsume_later(
        self, message: Message, delay: timedelta | int
    ) -> None:
        """Have ``message`` delivered again after ``delay`` (a timedelta, or ms)
        through the retry topic, and acknowledge it here (Pulsar's Java client
        ``reconsumeLater``); after ``max_redeliver_count`` retries it goes to the
        dead-letter topic instead.

        Raises:
            InvalidConfiguration: the consumer was not subscribed with
                ``retry_enable=True``.
            ValueError: a negative delay.
            Whatever publishing raised (the message is then not acknowledged).
        """
        if self._letters is None or not self._options.retry_enable:
            raise InvalidConfiguration(
                "reconsume_later needs a consumer subscribed with retry_enable=True"
            )
        delay_ms = (
            int(delay.total_seconds() * 1000) if isinstance(delay, timedelta) else int(delay)
        )
        if delay_ms < 0:
            raise ValueError("delay must not be negative")
        letters = self._letters.for_topic(TopicName.parse(message.topic_name()).base.full)
        await letters.retry_later(message, delay_ms)
        self._impl.acknowledge(message.message_id())

    async def acknowledge(
        self, message: Message | MessageId, txn: TransactionHandle | None = None
    ) -> None:
        """Acknowledge one message (sent in a group within ~100 ms).

        With ``txn``: acknowledge it in that transaction. The ack is sent at once
        and awaited; it takes effect when the transaction commits.

        Raises:
            AlreadyClosed: the consumer is closed.
            With ``txn``: InvalidTxnStatus (not OPEN), TransactionConflict (acked
            already, or pending in another transaction), TransactionNotFound,
            Timeout, ConnectError, ... (the ack failed, so the commit will).
        """
        mid = _message_id_of(message)
        if txn is None:
            self._impl.acknowledge(mid)
        else:
            await self._impl.acknowledge_txn(mid, transaction_impl(txn), False)

    async def acknowledge_cumulative(
        self, message: Message | MessageId, txn: TransactionHandle | None = None
    ) -> None:
        """Acknowledge a message and all before it (with ``txn``: in that transaction;
        if it aborts, the subscription goes back and the messages come again).

        Raises:
            CumulativeAcknowledgementNotAllowedError: Shared / Key_Shared subscription.
            With ``txn``: as :meth:`acknowledge`.
        """
        mid = _message_id_of(message)
        if txn is None:
            self._impl.acknowledge_cumulative(mid)
        else:
            await self._impl.acknowledge_txn(mid, transaction_impl(txn), True)

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
        await self._close_letters()

    async def close(self) -> None:
        """Close; unacked messages will be redelivered to other consumers. Idempotent."""
        await self._impl.close()
        await self._stop_listener()
        await self._close_letters()

    async def _close_letters(self) -> None:
        letters, self._letters = self._letters, None
        if letters is not None:
            await letters.close()

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
        return await self._impl.receive(timeout_s)

    async def has_message_available(self) -> bool:
        """Whether ``read_next`` would return a message now or once it arrives."""
        if isinstance(self._impl, MultiTopicsConsumer):
            return await self._impl.has_message_available(child_has_message_available)
        self._impl.check_open()
        return await child_has_message_available(self._impl)

    async def seek(self, messageid: MessageId | int) -> None:
        """Restart reading at a message id (inclusive) or a publish timestamp (ms)."""
        await self._impl.seek(messageid)

    async def get_last_message_id(self) -> MessageId:
        """The id of the last message a reader of the topic can read (the C++ client's
        ``Reader::getLastMessageId``): committed, not a transaction marker, not
        aborted; a batch's last member carries its batch index. Entry id -1 when
        the topic has no such message.

        Raises:
            OperationNotSupported: the reader reads several partitions.
            AlreadyClosed: the reader is closed.
            NotConnected: still reconnecting after the operation timeout.
            Timeout, BrokerError: the broker did not answer.
        """
        last, _ = await self._impl.get_last_message_id()
        return last

    async def close(self) -> None:
        await self._impl.close()
