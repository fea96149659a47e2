"""Dead-letter and retry-letter topics: where a consumer parks messages it cannot process.

Pulsar implements both in the client; the broker only counts redeliveries
(``CommandMessage.redelivery_count``). With a :class:`ConsumerDeadLetterPolicy`:

* **Dead letter.** A message that arrives with a redelivery count of at least
  ``max_redeliver_count`` is a *candidate*. When the application negatively acks it, or
  its ack timeout expires, the consumer publishes it to the dead-letter topic
  (default ``<topic>-<subscription>-DLQ``) and acknowledges the original instead of
  asking for a redelivery. Like Pulsar, this applies to Shared and Key_Shared
  subscriptions, which redeliver single messages.
* **Retry letter** (Pulsar's Java client, ``enableRetry``). ``reconsume_later(msg,
  delay)`` publishes a copy to the retry topic (default ``<topic>-<subscription>-RETRY``)
  to be delivered after ``delay`` and acknowledges the original; the consumer also
  subscribes to the retry topic. Once a message was reconsumed ``max_redeliver_count``
  times, the next ``reconsume_later`` sends it to the dead-letter topic instead.

The copies keep payload, properties, keys and event time, and add Pulsar's properties
``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID`` (and ``RECONSUMETIMES`` and ``DELAY_TIME`` for
retries), so a dead-letter consumer knows where a message came from. The producers are
created on first use and closed with the consumer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from quasar.client.consumer_policies import ConsumerDeadLetterPolicy
from quasar.client.message import Message
from quasar.client.message_id import MessageId
from quasar.client.outgoing import OutgoingMessage

log = logging.getLogger(__name__)

# Pulsar's property names (RetryMessageUtil in the Java client).
REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIMES = "RECONSUMETIMES"
DELAY_TIME = "DELAY_TIME"
DLQ_SUFFIX = "-DLQ"
RETRY_SUFFIX = "-RETRY"


class LetterProducer(Protocol):
    async def send_message(self, message: OutgoingMessage) -> Any: ...

    async def close(self) -> None: ...


# make_producer(topic, initial_subscription_name or None) -> a started producer.
ProducerFactory = Callable[[str, str | None], Awaitable[LetterProducer]]


def forwarded(
    message: Message, extra: dict[str, str], deliver_at_ms: int | None = None
) -> OutgoingMessage:
    """A copy of ``message`` to publish elsewhere: same payload, properties, keys and
    event time, plus ``extra`` properties (which win over the originals)."""
    properties = dict(message.properties())
    properties.setdefault(REAL_TOPIC, message.topic_name())
    properties.setdefault(ORIGIN_MESSAGE_ID, str(message.message_id()))
    properties.update(extra)
    return OutgoingMessage(
        payload=message.data(),
        properties=properties,
        partition_key=message.partition_key() or None,
        ordering_key=message._ordering_key or None,
        event_time=message.event_timestamp() or None,
        deliver_at_ms=deliver_at_ms,
    )


class LetterTopics:
    """The dead-letter and retry topics of one consumer (shared by its children)."""

    def __init__(
        self,
        policy: ConsumerDeadLetterPolicy,
        topic: str,
        subscription: str,
        make_producer: ProducerFactory,
    ) -> None:
        self.policy = policy
        self.max_redeliver_count = policy.max_redeliver_count
        self.dead_letter_topic = (
            policy.dead_letter_topic or f"{topic}-{subscription}{DLQ_SUFFIX}"
        )
        self.retry_topic = f"{topic}-{subscription}{RETRY_SUFFIX}"
        self._make_producer = make_producer
        self._producers: dict[str, asyncio.Task[LetterProducer]] = {}

    def is_candidate(self, redelivery_count: int) -> bool:
        """Whether a message arriving with this count goes to the dead-letter topic on
        its next negative ack or ack timeout."""
        return redelivery_count >= self.max_redeliver_count

    async def _producer(self, topic: str, subscription: str | None) -> LetterProducer:
        # One creation per topic, even when several messages fail at once; a failed
        # creation is forgotten so that the next message tries again.
        task = self._producers.get(topic)
        if task is None or (task.done() and task.exception() is not None):
            task = asyncio.ensure_future(self._make_producer(topic, subscription))
            self._producers[topic] = task
        return await task

    async def dead_letter(self, messages: list[Message]) -> None:
        """Publish ``messages`` to the dead-letter topic and wait for every receipt.

        Raises:
            Whatever creating the producer or sending raised (the caller then
            redelivers instead of acknowledging).
        """
        producer = await self._producer(
            self.dead_letter_topic, self.policy.initial_subscription_name or None
        )
        for message in messages:
            await producer.send_message(forwarded(message, {}))

    async def retry_later(self, message: Message, delay_ms: int) -> None:
        """Publish ``message`` to the retry topic for delivery in ``delay_ms``, or to
        the dead-letter topic once it was reconsumed ``max_redeliver_count`` times."""
        times = _reconsume_times(message) + 1
        if times > self.max_redeliver_count:
            await self.dead_letter([message])
            return
        producer = await self._producer(self.retry_topic, None)
        await producer.send_message(
            forwarded(
                message,
                {RECONSUME_TIMES: str(times), DELAY_TIME: str(delay_ms)},
                deliver_at_ms=int(time.time() * 1000) + delay_ms,
            )
        )

    async def close(self) -> None:
        tasks, self._producers = list(self._producers.values()), {}
        for task in tasks:
            if not task.done():
                task.cancel()
            try:
                producer = await task
            except BaseException:  # noqa: BLE001 - a producer that never started
                continue
            try:
                await producer.close()
            except Exception:  # closing is best effort; the client closes the rest
                log.debug("closing a letter-topic producer failed", exc_info=True)


def _reconsume_times(message: Message) -> int:
    try:
        return int(message.properties().get(RECONSUME_TIMES, "0"))
    except ValueError:
        return 0


class ParkedMessages:
    """The messages one consumer sends to the dead-letter topic instead of asking for
    their redelivery: those received with a redelivery count at the policy's maximum,
    by entry, until acknowledged or dead-lettered. They are messages the consumer
    holds anyway (queued or handed out), so the map is as bounded as its queue."""

    def __init__(self) -> None:
        self._by_entry: dict[tuple[int, int], list[Message]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_entry)

    def add(self, key: tuple[int, int], messages: list[Message]) -> None:
        if messages:
            self._by_entry[key] = list(messages)

    def forget(self, mid: MessageId) -> None:
        """``mid`` was acknowledged: it goes nowhere."""
        messages = self._by_entry.get(mid.entry_key)
        if messages is None:
            return
        left = [m for m in messages if m.message_id().batch_index() != mid.batch_index()]
        if left and mid.is_batch_member():
            self._by_entry[mid.entry_key] = left
        else:
            del self._by_entry[mid.entry_key]

    def take(self, ids: list[MessageId]) -> tuple[list[Message], list[MessageId]]:
        """The parked messages among ``ids`` (no longer parked), and the other ids."""
        wanted = {(m.entry_key, m.batch_index()) for m in ids}
        parked: list[Message] = []
        for key in {m.entry_key for m in ids}:
            messages = self._by_entry.get(key)
            if messages is None:
                continue
            chosen = [m for m in messages if (key, m.message_id().batch_index()) in wanted]
            parked += chosen
            for m in chosen:
                self.forget(m.message_id())
        done = {m.message_id() for m in parked}
        return parked, [m for m in ids if m not in done]

    def clear(self) -> None:
        self._by_entry.clear()


class ConsumerLetters:
    """The letter topics of one subscribe call: one :class:`LetterTopics` per topic
    the consumer reads (partitions share their topic's), created on demand."""

    def __init__(
        self,
        policy: ConsumerDeadLetterPolicy,
        subscription: str,
        make_producer: ProducerFactory,
    ) -> None:
        self.policy = policy
        self._subscription = subscription
        self._make_producer = make_producer
        self._by_topic: dict[str, LetterTopics] = {}

    def for_topic(self, topic: str) -> LetterTopics:
        """``topic``'s letter topics; a retry topic's are its original topic's, so a
        message retried twice still dead-letters to ``<topic>-<subscription>-DLQ``."""
        suffix = f"-{self._subscription}{RETRY_SUFFIX}"
        if topic.endswith(suffix):
            topic = topic[: -len(suffix)]
        letters = self._by_topic.get(topic)
        if letters is None:
            letters = LetterTopics(
                self.policy, topic, self._subscription, self._make_producer
            )
            self._by_topic[topic] = letters
        return letters

    def retry_topic(self, topic: str) -> str:
        return self.for_topic(topic).retry_topic

    async def close(self) -> None:
        for letters in self._by_topic.values():
            await letters.close()
