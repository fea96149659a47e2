"""Who may produce to one topic: the producer access modes and the topic epoch.

Pulsar's rules (``AbstractTopic.incrementTopicEpochIfNeeded``), by the mode a new
producer asks for:

* ``Shared``: refused with ProducerBusy while a producer holds exclusive access or
  waits for it.
* ``Exclusive``: refused with ProducerFenced while another producer holds or waits
  for exclusive access, while shared producers are connected, or when the producer
  comes back with a topic epoch older than the topic's (someone else held the topic
  in between).
* ``ExclusiveWithFencing``: fails every waiting producer with ProducerFenced and
  closes every connected producer (CLOSE_PRODUCER; when they come back they meet the
  new holder and are fenced), then takes exclusive access.
* ``WaitForExclusive``: queued while any producer is connected; the client is told
  at once (PRODUCER_SUCCESS with ``producer_ready=false``) and gets access, in
  arrival order, once the topic has no producer left.

Each grant of exclusive access moves the topic epoch: to the epoch the producer
brings back from an earlier grant (a reconnect), otherwise one past the current
epoch (the first grant is epoch 0). The epoch is echoed in PRODUCER_SUCCESS, and the
client sends it back when it reconnects, which is how a fenced producer is told from
the holder coming back.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping

from quasar.errors import ProducerBusy, ProducerFenced, QuasarError, ServiceNotReady

from .producer import (
    ACCESS_EXCLUSIVE,
    ACCESS_EXCLUSIVE_WITH_FENCING,
    ACCESS_SHARED,
    ACCESS_WAIT_FOR_EXCLUSIVE,
    Producer,
)

__all__ = ["ProducerAccess"]


class ProducerAccess:
    """The exclusive holder, the producers waiting for exclusive access and the
    topic epoch of one topic."""

    def __init__(
        self,
        topic_epoch: int | None = None,
        save_epoch: Callable[[int], None] = lambda epoch: None,
    ) -> None:
        """``topic_epoch``: the epoch recorded for the topic (None until a producer
        first gets exclusive access, as in Pulsar); ``save_epoch`` records a new one
        durably before the grant is answered (``topic_epoch.py``)."""
        self.topic_epoch = topic_epoch
        self._save_epoch = save_epoch
        self.holder: Producer | None = None
        self._waiting: deque[tuple[Producer, asyncio.Future[int]]] = deque()

    @property
    def waiting_count(self) -> int:
        """Producers queued for exclusive access (they count against the topic's
        producer limit, which bounds this queue)."""
        return len(self._waiting)

    async def acquire(
        self,
        producer: Producer,
        connected: Mapping[int, Producer],
        fence: Callable[[Producer], None],
        on_queued: Callable[[], None],
    ) -> int | None:
        """Admit ``producer`` by its access mode; answer the topic epoch it holds
        (None for a shared producer on a topic never held exclusively).

        ``connected`` are the topic's producers (only counted, so that admitting
        one costs the same however many there are, except when fencing them all);
        ``fence`` closes one of them
        (ExclusiveWithFencing); ``on_queued`` runs when a WaitForExclusive producer
        is queued, before this waits.

        Raises:
            ProducerBusy: a shared producer while exclusive access is held or awaited.
            ProducerFenced: an Exclusive producer meets another producer, or any
                exclusive producer brings back a stale epoch; or a waiting producer
                is fenced out by an ExclusiveWithFencing one.
        """
        mode = producer.access_mode
        if mode == ACCESS_SHARED:
            if self.holder is not None or self._waiting:
                raise ProducerBusy(f"Topic has an existing exclusive producer: {self._holder_name}")
            return self.topic_epoch
        if mode == ACCESS_EXCLUSIVE:
            if self.holder is not None or self._waiting:
                raise ProducerFenced(
                    f"Topic has an existing exclusive producer: {self._holder_name}"
                )
            if connected:
                raise ProducerFenced("Topic has existing shared producers")
            return self._grant(producer)
        if mode == ACCESS_EXCLUSIVE_WITH_FENCING:
            if self.holder is not None or connected:
                # Waiters go first: otherwise closing the connected producers would
                # hand the topic to the next of them.
                waiting, self._waiting = self._waiting, deque()
                for _, waiter in waiting:
                    if not waiter.done():
                        waiter.set_exception(ProducerFenced("Fenced out"))
                for other in list(connected.values()):
                    fence(other)
                self.holder = None
            return self._grant(producer)
        if mode == ACCESS_WAIT_FOR_EXCLUSIVE:
            if self.holder is not None or connected:
                fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
                self._waiting.append((producer, fut))
                on_queued()
                return await fut
            return self._grant(producer)
        raise ProducerBusy(f"Invalid producer access mode: {mode}")

    def release(self, producer: Producer, producers_left: int) -> None:
        """``producer`` left the topic and ``producers_left`` remain: free exclusive
        access if it held it, and hand the topic to the first live waiter once no
        producer is left."""
        if self.holder is producer:
            self.holder = None
        if self.holder is not None or producers_left:
            return
        while self._waiting:
            waiter, fut = self._waiting.popleft()
            if fut.done():  # its connection closed while it waited
                continue
            epoch = self._epoch_for(waiter)
            try:
                self._move_epoch(epoch)
            except QuasarError as exc:  # the epoch could not be recorded
                fut.set_exception(exc)
                continue
            self.holder = waiter
            fut.set_result(epoch)
            return

    def _grant(self, producer: Producer) -> int:
        epoch = self._epoch_for(producer)
        if self.topic_epoch is not None and epoch < self.topic_epoch:
            raise ProducerFenced(
                f"Topic epoch has already moved. Current epoch: {self.topic_epoch}, "
                f"Producer epoch: {epoch}"
            )
        self._move_epoch(epoch)
        self.holder = producer
        return epoch

    def _move_epoch(self, epoch: int) -> None:
        """Record ``epoch`` (durably, when it changes), then make it the topic's."""
        if epoch != self.topic_epoch:
            self._save_epoch(epoch)
        self.topic_epoch = epoch

    def _epoch_for(self, producer: Producer) -> int:
        """The epoch a grant to ``producer`` moves the topic to."""
        if producer.requested_topic_epoch is not None:
            return producer.requested_topic_epoch
        return 0 if self.topic_epoch is None else self.topic_epoch + 1

    @property
    def _holder_name(self) -> str | None:
        return None if self.holder is None else self.holder.producer_name


class AccessControlledProducers:
    """The producers of a topic, attached through its ``ProducerAccess``: shared by
    persistent and non-persistent topics, which differ only in what they check
    before (termination) and do after (unloading)."""

    name: str
    closed: bool
    access: ProducerAccess
    producers: dict[int, Producer]
    _named_producers: dict[str, Producer]

    async def _attach_producer(
        self, producer: Producer, on_queued: Callable[[], None]
    ) -> None:
        """Raises:
        ServiceNotReady: the topic is closing (the client retries).
        ProducerBusy: the name is connected already, or a shared producer while
            exclusive access is held or awaited.
        ProducerFenced: an exclusive producer refused (``ProducerAccess``).
        """
        if self.closed:
            raise ServiceNotReady(f"Topic {self.name} is closing")
        if producer.producer_name in self._named_producers:
            raise ProducerBusy(
                f"Producer with name '{producer.producer_name}' is already connected"
            )
        producer.topic_epoch = await self.access.acquire(
            producer, self.producers, self._fence, on_queued
        )
        if self.closed:  # it closed while a WaitForExclusive producer waited
            self.access.release(producer, len(self.producers))
            raise ServiceNotReady(f"Topic {self.name} is closing")
        self.producers[id(producer)] = producer
        if producer.user_provided_name:
            self._named_producers[producer.producer_name] = producer

    def _detach_producer(self, producer: Producer) -> None:
        producer.closed = True
        key = id(producer)
        if self.producers.get(key) is producer:
            del self.producers[key]
            if self._named_producers.get(producer.producer_name) is producer:
                del self._named_producers[producer.producer_name]
        self.access.release(producer, len(self.producers))

    def remove_producer(self, producer: Producer) -> None:
        self._detach_producer(producer)

    def _fence(self, producer: Producer) -> None:
        """Close ``producer`` for an ExclusiveWithFencing one (CLOSE_PRODUCER)."""
        producer.connection.close_producer(producer.producer_id)
        self.remove_producer(producer)

    @property
    def topic_epoch(self) -> int | None:
        """The epoch of the latest grant of exclusive access (None: never held)."""
        return self.access.topic_epoch
