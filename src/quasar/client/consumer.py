"""A consumer on one topic or one partition (asyncio core).

``start()`` looks the topic up, sends SUBSCRIBE and then FLOW(receiver_queue_size).
MESSAGE frames are decoded here (checksum, decompression, batch splitting, skipping
acked batch members and, for readers, messages before the start id) and pushed to the
receive queue. Taking a message from the queue returns a permit (see
:mod:`quasar.client.permits`). On connection loss or CLOSE_CONSUMER the consumer
resubscribes with the same consumer_id after a backoff, drops its queued messages (the
broker redelivers everything unacked) and grants fresh permits.

Acks in a transaction (:meth:`ConsumerImpl.acknowledge_txn`) are not grouped: the
(topic, subscription) is registered with the transaction once, then each ack is sent
at once with the transaction id and a request id, and its ACK_RESPONSE awaited (the
broker may refuse it, e.g. with TransactionConflict). Until the transaction commits the
broker holds them as *pending acks*; an abort makes the messages deliverable again.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import Any

from quasar.client.acks import (
    AckGroupingTracker,
    BatchAckTracker,
    EntryKey,
    RedeliveryTracker,
    all_unacked,
)
from quasar.client.backoff import Backoff
from quasar.client.chunk_receiver import ChunkReceiver
from quasar.client.connection import ClientConnection, ConnectionPool, make_command
from quasar.client.dead_letter import LetterTopics, ParkedMessages
from quasar.client.enums import ConsumerType
from quasar.client.exceptions import (
    CumulativeAcknowledgementNotAllowedError,
    NotConnected,
)
from quasar.client.incoming import assembled_message, decode_entry
from quasar.client.lookup import LookupService, retry_until
from quasar.client.message import Message
from quasar.client.message_crypto import MessageDecryptor
from quasar.client.message_id import ChunkMessageId, MessageId
from quasar.client.options import ConsumerOptions
from quasar.client.permits import PermitTracker
from quasar.client.receive_queue import ReceiveQueue
from quasar.client.transaction import TransactionImpl
from quasar.clock import Clock, SystemClock
from quasar.errors import (
    AlreadyClosed,
    AuthenticationError,
    AuthorizationError,
    NotAllowedError,
    QuasarError,
    Timeout,
    TopicNotFound,
    TopicTerminatedError,
)
from quasar.protocol import pb
from quasar.protocol.ack_set import bits_to_words
from quasar.protocol.int64 import INT64_MAX

log = logging.getLogger(__name__)
T = pb.BaseCommand

FATAL_ON_RESUBSCRIBE = (
    TopicNotFound,
    TopicTerminatedError,
    NotAllowedError,
    AuthenticationError,
    AuthorizationError,
)


# Every consumer of this client subscribes with the same priority (the C++ client's
# default); Pulsar uses it only to order Shared consumers.
PRIORITY_LEVEL = 0


class State(enum.Enum):
    INIT = "init"
    READY = "ready"
    CONNECTING = "connecting"
    CLOSED = "closed"


# Looking an Enum member up on its class costs ~0.1 us on CPython 3.11; the
# per-message check (receive, acknowledge) uses this instead.
_CLOSED = State.CLOSED


def _is_boundary(mid: MessageId | None) -> bool:
    return mid is None or mid.ledger_id() < 0 or mid.ledger_id() == INT64_MAX


class ConsumerImpl:
    """Consumer of a single topic name (a non-partitioned topic or one partition)."""

    def __init__(
        self,
        topic: str,
        partition: int,
        options: ConsumerOptions,
        pool: ConnectionPool,
        lookup: LookupService,
        queue: ReceiveQueue | None = None,
        clock: Clock | None = None,
        receiver_queue_size: int | None = None,
        start_message_id: MessageId | None = None,
        letters: LetterTopics | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.options = options
        # A reader's subscription: non-durable, starting at ``start_message_id``.
        self.durable = start_message_id is None
        self.pool = pool
        self.lookup = lookup
        self.config = pool.config
        self.clock = clock or SystemClock()
        self.consumer_id = self.config.next_consumer_id()
        self.consumer_name = options.consumer_name or _random_name()
        self.queue = queue if queue is not None else ReceiveQueue()
        self._owns_queue = queue is None
        self.state = State.INIT
        self._loop = asyncio.get_running_loop()
        self._conn: ClientConnection | None = None
        self.permits = PermitTracker(receiver_queue_size or options.receiver_queue_size)
        self.batch_acks = BatchAckTracker()
        self.ack_group = AckGroupingTracker(self.config.ack_group_max_ids)
        self.nacks = RedeliveryTracker()
        self.unacked = RedeliveryTracker()
        self._ack_timer: asyncio.TimerHandle | None = None
        self._redeliver_timer: asyncio.TimerHandle | None = None
        self._backoff = Backoff(
            self.config.initial_backoff_ms, self.config.max_backoff_ms
        )
        self._reconnect_task: asyncio.Task[None] | None = None
        self.last_dequeued: MessageId | None = None
        # Messages at or before this id are dropped (non-durable subscriptions only).
        self._start = start_message_id
        self._start_inclusive = options.start_message_id_inclusive
        self._seeked = False
        # After a seek by time (and until a seek by id) only the broker knows where the
        # subscription restarts: the C++ client's hasSoughtByTimestamp.
        self.seeked_by_time = False
        self.is_active: bool | None = None
        # Set while subscribed on a connection (transactional acks wait for it).
        self._ready = asyncio.Event()
        # The dead-letter topic of a Shared / Key_Shared subscription with a dead
        # letter policy, and the messages that go there instead of being redelivered
        # (received with a redelivery count at the policy's maximum), by entry.
        shared = options.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared)
        self.letters = letters if shared else None
        self._parked = ParkedMessages()
        reader = options.crypto_key_reader
        self._decryptor = None if reader is None else MessageDecryptor(reader)
        self.chunks = ChunkReceiver(
            options,
            self.clock,
            self._loop,
            acknowledge=lambda mid: self._queue_individual(mid.entry_key, None),
            track=self._track_chunk,
        )

    # --- subscribe / reconnect -------------------------------------------------------

    async def start(self) -> None:
        """Subscribe and grant the first permits.

        Raises:
            Timeout: not subscribed within the operation timeout.
            BrokerError subclass: e.g. ConsumerBusy, TopicNotFound, SubscriptionNotFound.
        """
        await retry_until(
            lambda: self._connect_once(None),
            self.config.operation_timeout_s,
            Backoff(self.config.initial_backoff_ms, self.config.max_backoff_ms),
            f"subscribe to {self.topic}",
        )

    def _subscribe_start_id(self) -> MessageId | None:
        """Where a (re)subscribing non-durable cursor starts."""
        if self.durable:
            return None
        if self.last_dequeued is not None:
            return self.last_dequeued
        return self._start or MessageId.latest

    async def _connect_once(self, url: str | None) -> None:
        broker_url = url or await self.lookup.lookup(self.topic)
        conn = await self.pool.get(broker_url)
        rid = self.config.next_request_id()
        conf = self.options
        cmd = make_command(
            T.SUBSCRIBE,
            "subscribe",
            topic=self.topic,
            subscription=conf.subscription_name,
            subType=int(conf.consumer_type),
            consumer_id=self.consumer_id,
            request_id=rid,
            consumer_name=self.consumer_name,
            priority_level=PRIORITY_LEVEL,
            durable=self.durable,
            read_compacted=conf.is_read_compacted,
            initialPosition=int(conf.initial_position),
            replicate_subscription_state=conf.replicate_subscription_state_enabled,
        )
        sub = cmd.subscribe
        start = self._subscribe_start_id()
        if start is not None:
            sub.start_message_id.CopyFrom(start.to_pb(include_batch=True))
        for k, v in (conf.properties or {}).items():
            sub.metadata.add(key=k, value=v)
        schema = conf.schema.schema_info()
        if schema is not None:
            sub.schema.CopyFrom(schema)
        ksp = conf.key_shared_policy
        if conf.consumer_type == ConsumerType.KeyShared:
            meta = sub.keySharedMeta
            meta.keySharedMode = int(ksp.key_shared_mode) if ksp else 0
            if ksp is not None:
                meta.allowOutOfOrderDelivery = ksp.allow_out_of_order_delivery
                for lo, hi in ksp.sticky_ranges:
                    meta.hashRanges.add(start=lo, end=hi)
        try:
            await conn.request(cmd, rid)
        except Timeout:
            self._send_close(conn)
            raise
        if self.state == State.CLOSED:
            self._send_close(conn)
            return
        # The broker redelivers everything unacked: what is queued would be duplicates.
        self.queue.remove_where(lambda m: m._consumer is self)
        self.chunks.clear()
        if not self.durable and self.last_dequeued is not None:
            self._start, self._start_inclusive = self.last_dequeued, False
        conn.consumers[self.consumer_id] = self
        self._conn = conn
        self.state = State.READY
        self._ready.set()
        self._backoff.reset()
        self._send_flow(self.permits.initial())
        self._flush_acks()

    def _send_close(self, conn: ClientConnection) -> None:
        conn.send_command(
            make_command(
                T.CLOSE_CONSUMER,
                "close_consumer",
                consumer_id=self.consumer_id,
                request_id=self.config.next_request_id(),
            )
        )

    def on_disconnected(self, conn: ClientConnection, assigned_url: str | None) -> None:
        """Connection lost or CLOSE_CONSUMER from the broker: resubscribe."""
        if conn is not self._conn:
            return
        self._conn = None
        self._ready.clear()
        if self.state != State.READY:
            return
        self.state = State.CONNECTING
        self._reconnect_task = self._loop.create_task(self._reconnect(assigned_url))

    async def _reconnect(self, assigned_url: str | None) -> None:
        delay_ms = 0.0 if assigned_url else self._backoff.next_delay_ms()
        while self.state == State.CONNECTING:
            await asyncio.sleep(delay_ms / 1000.0)
            if self.state != State.CONNECTING:
                return
            try:
                await self._connect_once(assigned_url)
                return
            except FATAL_ON_RESUBSCRIBE as exc:
                log.warning("consumer on %s cannot resubscribe: %s", self.topic, exc)
                self._mark_closed()
                return
            except QuasarError as exc:
                log.info("consumer on %s resubscribe failed: %s", self.topic, exc)
            assigned_url = None
            delay_ms = self._backoff.next_delay_ms()

    def on_active_consumer_change(self, is_active: bool) -> None:
        self.is_active = is_active

    @property
    def is_connected(self) -> bool:
        return self.state == State.READY and self._conn is not None

    # --- incoming messages -----------------------------------------------------------

    def _send_flow(self, permits: int) -> None:
        if permits > 0 and self._conn is not None:
            self._conn.send_command(
                make_command(
                    T.FLOW, "flow", consumer_id=self.consumer_id, messagePermits=permits
                )
            )

    def _return_permits(self, count: int) -> None:
        if count:
            self._send_flow(self.permits.processed(count))

    def _discard(
        self, ledger: int, entry: int, validation_error: int, permits: int
    ) -> None:
        """Ack a corrupt entry with its validation error, as the C++ client does."""
        if self._conn is not None:
            cmd = make_command(
                T.ACK,
                "ack",
                consumer_id=self.consumer_id,
                ack_type=pb.CommandAck.Individual,
                validation_error=validation_error,
            )
            cmd.ack.message_id.append(MessageId(-1, ledger, entry).to_pb())
            self._conn.send_command(cmd)
        self._return_permits(permits)

    def on_message(
        self, cmd: Any, payload: bytes | None, checksum_ok: bool | None
    ) -> None:
        if self.state != State.READY or payload is None:
            return
        decoded = decode_entry(
            cmd,
            payload,
            checksum_ok,
            topic=self.topic,
            partition=self.partition,
            schema=self.options.schema,
            consumer=self,
            skip=self._before_start,
            decryptor=self._decryptor,
            crypto_failure_action=self.options.crypto_failure_action,
        )
        key = (decoded.ledger_id, decoded.entry_id)
        if decoded.validation_error is not None:
            self._discard(key[0], key[1], decoded.validation_error, decoded.count)
            return
        if decoded.chunk is not None:
            self._on_chunk(decoded.chunk, key, cmd.redelivery_count)
            return
        if decoded.unacked_bits is not None:
            self.batch_acks.register(key, decoded.batch_size, decoded.unacked_bits)
        letters = self.letters
        if letters is not None and letters.is_candidate(cmd.redelivery_count):
            self._parked.add(key, decoded.messages)
        for msg in decoded.messages:
            self.queue.put(msg)
        # A message held back undecrypted stays unacknowledged on the broker (which
        # redelivers it to the next consumer or subscribe); its permits flow on.
        self._return_permits(decoded.skipped + decoded.held)

    def _on_chunk(
        self, chunk: tuple[Any, bytes], key: EntryKey, redelivery_count: int
    ) -> None:
        """One chunk of a chunked message. Each chunk used a permit: a chunk that
        completes no message returns it at once, a completed message when taken
        (as Pulsar's clients count them)."""
        md, body = chunk
        mid = MessageId(self.partition, key[0], key[1], -1, 0, self.topic)
        assembled = self.chunks.on_chunk(md, body, mid)
        if assembled is None:
            self._return_permits(1)
            return
        msg = assembled_message(
            assembled,
            redelivery_count=redelivery_count,
            topic=self.topic,
            schema=self.options.schema,
            consumer=self,
        )
        if msg is None:
            self._discard(key[0], key[1], pb.CommandAck.DecompressionError, 1)
            return
        if self._before_start(assembled.message_id):
            self._return_permits(1)
            return
        self.queue.put(msg)

    def _track_chunk(self, mid: MessageId) -> None:
        """Leave a chunk of a dropped message for redelivery: after the ack timeout
        when there is one, else with the next redelivery of everything unacked."""
        timeout = self.options.unacked_messages_timeout_ms
        if timeout:
            self.unacked.add_if_absent(mid, self.clock.monotonic_ms() + timeout)
            self._arm_redeliver_timer()

    def _before_start(self, mid: MessageId) -> bool:
        start = self._start
        # Durable subscriptions filter only after a seek (the broker restarts delivery
        # at the seek id itself, like the C++ client expects).
        if (self.durable and not self._seeked) or _is_boundary(start):
            return False
        assert start is not None
        here, there = mid.entry_key, start.entry_key
        if here != there:
            return here < there
        if start.batch_index() < 0:
            return not self._start_inclusive
        if self._start_inclusive:
            return mid.batch_index() < start.batch_index()
        return mid.batch_index() <= start.batch_index()

    def on_dequeued(self, msg: Message) -> None:
        """Called by the queue when the application takes ``msg``."""
        self.last_dequeued = msg.message_id()
        timeout = self.options.unacked_messages_timeout_ms
        if timeout:
            self.unacked.add_if_absent(
                msg.message_id(), self.clock.monotonic_ms() + timeout
            )
            self._arm_redeliver_timer()
        self._return_permits(1)

    # --- acknowledgements ------------------------------------------------------------

    def acknowledge(self, mid: MessageId) -> None:
        """Individual ack (grouped; sent within ``ack_group_time_ms``)."""
        self.check_open()
        key = mid.entry_key
        self.nacks.remove(mid)
        self.unacked.remove(mid)
        if self.letters is not None and self._parked:
            self._parked.forget(mid)
        if isinstance(mid, ChunkMessageId):
            for chunk_key in mid.chunk_keys:
                self._queue_individual(chunk_key, None)
        elif mid.is_batch_member():
            if self.batch_acks.ack(key, mid.batch_index(), mid.batch_size()):
                self._queue_individual(key, None)
            elif self.options.batch_index_ack_enabled:
                bits = self.batch_acks.unacked_bits(key, mid.batch_size())
                self._queue_individual(key, bits_to_words(bits))
        else:
            self._queue_individual(key, None)

    def acknowledge_cumulative(self, mid: MessageId) -> None:
        """Ack ``mid`` and everything before it.

        Raises:
            CumulativeAcknowledgementNotAllowedError: on Shared / Key_Shared.
        """
        self.check_open()
        if self.options.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise CumulativeAcknowledgementNotAllowedError(
                "cumulative acks are not allowed on Shared and Key_Shared subscriptions"
            )
        key = mid.entry_key
        self.nacks.remove_up_to(mid)
        self.unacked.remove_up_to(mid)
        if mid.is_batch_member():
            if self.batch_acks.ack_up_to(key, mid.batch_index(), mid.batch_size()):
                self.ack_group.set_cumulative(key)
            elif self.options.batch_index_ack_enabled:
                bits = self.batch_acks.unacked_bits(key, mid.batch_size())
                self.ack_group.set_cumulative(key, bits_to_words(bits))
            elif self.batch_acks.claim_cumulative_prev(key):
                # Partly acked batch: acknowledge up to the previous entry only.
                self.ack_group.set_cumulative((key[0], key[1] - 1))
        else:
            self.ack_group.set_cumulative(key)
        self._arm_ack_timer()

    async def acknowledge_txn(
        self, mid: MessageId, txn: TransactionImpl, cumulative: bool = False
    ) -> None:
        """Ack ``mid`` (cumulative: and everything before it) in transaction ``txn``.

        Registers (topic, subscription) with the transaction first (once per
        transaction), then sends the ACK with the transaction id and waits for the
        broker's ACK_RESPONSE. A batch member is acked by index: the ACK carries the
        entry's ack set (a set bit = not acked by this ack) and the batch size.
        Waits up to the operation timeout for a connection; once the ACK is sent it
        is never sent again (a lost answer fails the ack, and so the commit).

        Raises:
            AlreadyClosed: the consumer is closed.
            CumulativeAcknowledgementNotAllowedError: cumulative on Shared / Key_Shared.
            InvalidTxnStatus: the transaction is not OPEN (nothing was sent).
            TransactionConflict: the message is acked already or pending in another
                transaction.
            TransactionNotFound, TransactionCoordinatorNotFound, NotConnected,
            ConnectError, Timeout, ...: the ack did not (certainly) take effect.
        """
        self.check_open()
        if cumulative and self.options.consumer_type in (
            ConsumerType.Shared,
            ConsumerType.KeyShared,
        ):
            raise CumulativeAcknowledgementNotAllowedError(
                "cumulative acks are not allowed on Shared and Key_Shared subscriptions"
            )
        op = txn.begin_op(self._loop)
        # As for plain acks: the message is no longer due for redelivery. If the
        # transaction aborts, the broker makes it deliverable again.
        if cumulative:
            self.nacks.remove_up_to(mid)
            self.unacked.remove_up_to(mid)
            txn.add_abort_listener(self)
        else:
            self.nacks.remove(mid)
            self.unacked.remove(mid)
        try:
            await txn.register_subscription(self.topic, self.options.subscription_name)
            conn = await self._wait_connected()
            rid = self.config.next_request_id()
            cmd = make_command(
                T.ACK,
                "ack",
                consumer_id=self.consumer_id,
                ack_type=pb.CommandAck.Cumulative
                if cumulative
                else pb.CommandAck.Individual,
                txnid_most_bits=txn.txn_id.most_bits,
                txnid_least_bits=txn.txn_id.least_bits,
                request_id=rid,
            )
            cmd.ack.message_id.append(_txn_ack_position(mid, cumulative))
            if isinstance(mid, ChunkMessageId) and not cumulative:
                # Every chunk of a chunked message, the last one already added.
                cmd.ack.message_id.extend(
                    MessageId(-1, *key).to_pb() for key in mid.chunk_keys[:-1]
                )
            await conn.request(cmd, rid)
        except BaseException as exc:
            op.finish(exc)
            raise
        op.finish(None)

    async def _wait_connected(self) -> ClientConnection:
        """The current connection, waiting up to the operation timeout for one.

        Raises:
            AlreadyClosed: the consumer closed meanwhile.
            NotConnected: still reconnecting after the operation timeout.
        """
        self.check_open()
        if self._conn is not None:
            return self._conn  # the usual case: no timeout scope to set up (~6 µs)
        try:
            async with asyncio.timeout(self.config.operation_timeout_s):
                while True:
                    self.check_open()
                    if self._conn is not None:
                        return self._conn
                    await self._ready.wait()
        except TimeoutError:
            raise NotConnected(f"consumer on {self.topic} is reconnecting") from None

    def on_transaction_aborted(self) -> None:
        """A transaction with a cumulative ack of this consumer was aborted.

        The broker moves the subscription back to where it was before that ack:
        drop the messages queued here (they come again) and ask for everything
        unacknowledged, so that nothing after the old position is skipped.
        """
        if self.state == State.READY:
            self.redeliver(None)

    def _queue_individual(self, key: EntryKey, ack_set: list[int] | None) -> None:
        if self.ack_group.add_individual(key, ack_set):
            self._flush_acks()
        else:
            self._arm_ack_timer()

    def _arm_ack_timer(self) -> None:
        if self.config.ack_group_time_ms <= 0:
            self._flush_acks()
        elif self._ack_timer is None:
            self._ack_timer = self._loop.call_later(
                self.config.ack_group_time_ms / 1000.0, self._flush_acks
            )

    def _flush_acks(self) -> None:
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        if not self.ack_group or self._conn is None:
            return  # kept until connected: acks after a reconnect still save redeliveries
        individual, cumulative = self.ack_group.drain()
        if individual:
            cmd = make_command(
                T.ACK,
                "ack",
                consumer_id=self.consumer_id,
                ack_type=pb.CommandAck.Individual,
            )
            for (ledger, entry), words in individual:
                data = MessageId(-1, ledger, entry).to_pb()
                data.ack_set.extend(words)
                cmd.ack.message_id.append(data)
            self._conn.send_command(cmd)
        if cumulative is not None:
            (ledger, entry), words = cumulative
            cmd = make_command(
                T.ACK,
                "ack",
                consumer_id=self.consumer_id,
                ack_type=pb.CommandAck.Cumulative,
            )
            data = MessageId(-1, ledger, entry).to_pb()
            data.ack_set.extend(words)
            cmd.ack.message_id.append(data)
            self._conn.send_command(cmd)

    # --- negative acks and redelivery ------------------------------------------------

    def negative_acknowledge(self, mid: MessageId) -> None:
        """Ask for redelivery of ``mid`` after ``negative_ack_redelivery_delay_ms``."""
        self.check_open()
        self.unacked.remove(mid)
        self.nacks.add(
            mid, self.clock.monotonic_ms() + self.options.negative_ack_redelivery_delay_ms
        )
        self._arm_redeliver_timer()

    def _arm_redeliver_timer(self) -> None:
        due = [
            d
            for d in (self.nacks.next_due_ms(), self.unacked.next_due_ms())
            if d is not None
        ]
        if not due or self.state == State.CLOSED:
            return
        if self._redeliver_timer is not None:
            self._redeliver_timer.cancel()
        delay = max(0.0, min(due) - self.clock.monotonic_ms()) / 1000.0
        self._redeliver_timer = self._loop.call_later(delay, self._on_redeliver_timer)

    def _on_redeliver_timer(self) -> None:
        self._redeliver_timer = None
        now = self.clock.monotonic_ms()
        ids = [
            m
            for m in self.nacks.pop_due(now) + self.unacked.pop_due(now)
            if isinstance(m, MessageId)
        ]
        if ids and self._parked:
            ids = self._dead_letter(ids)
        if ids:
            self.redeliver(ids)
        self._arm_redeliver_timer()

    # --- dead letters ----------------------------------------------------------------

    def _dead_letter(self, ids: list[MessageId]) -> list[MessageId]:
        """Start dead-lettering the candidates among ``ids``; returns the others,
        which are redelivered as usual."""
        letters = self.letters
        assert letters is not None
        parked, others = self._parked.take(ids)
        if parked:
            self._loop.create_task(self._send_to_dead_letter(letters, parked))
        return others

    async def _send_to_dead_letter(
        self, letters: LetterTopics, messages: list[Message]
    ) -> None:
        try:
            await letters.dead_letter(messages)
        except Exception as exc:  # noqa: BLE001 - any failure: redeliver instead
            log.warning(
                "dead-lettering %d message(s) of %s to %s failed, redelivering: %s",
                len(messages), self.topic, letters.dead_letter_topic, exc,
            )
            if self.state is not _CLOSED:
                self.redeliver([m.message_id() for m in messages])
            return
        if self.state is not _CLOSED:
            for m in messages:
                self.acknowledge(m.message_id())

    def redeliver(self, ids: list[MessageId] | None) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES: given entries (Shared / Key_Shared) or all.

        Exclusive and Failover subscriptions always ask for everything unacked, and the
        local queue is emptied first (its messages come again), returning its permits.
        """
        if self._conn is None:
            return
        shared = self.options.consumer_type in (
            ConsumerType.Shared,
            ConsumerType.KeyShared,
        )
        cmd = make_command(
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
            "redeliverUnacknowledgedMessages",
            consumer_id=self.consumer_id,
        )
        if ids is not None and shared:
            keys = sorted({k for m in ids for k in _entry_keys(m)})
            cmd.redeliverUnacknowledgedMessages.message_ids.extend(
                MessageId(-1, ledger, entry).to_pb() for ledger, entry in keys
            )
            self._conn.send_command(cmd)
            return
        cleared = self.queue.remove_where(lambda m: m._consumer is self)
        self.unacked.clear()
        self._parked.clear()
        self.chunks.clear()
        self._conn.send_command(cmd)
        self._return_permits(cleared)

    def redeliver_unacknowledged_messages(self) -> None:
        self._flush_acks()
        self.nacks.clear()
        self.redeliver(None)

    # --- requests --------------------------------------------------------------------

    async def _request(
        self, type_: int, field_: str, **fields: Any
    ) -> tuple[ClientConnection, Any]:
        """Send a request on the current connection: (that connection, response).

        Raises:
            AlreadyClosed: the consumer is closed.
            NotConnected: the consumer is between connections (retry later).
        """
        conn = self._conn
        if conn is None:
            if self.state == State.CLOSED:
                raise AlreadyClosed(f"consumer on {self.topic} is closed")
            raise NotConnected(f"consumer on {self.topic} is reconnecting")
        rid = self.config.next_request_id()
        cmd = make_command(
            type_, field_, consumer_id=self.consumer_id, request_id=rid, **fields
        )
        return conn, await conn.request(cmd, rid)

    async def seek(self, target: MessageId | int) -> None:
        """Move the subscription to a message id (inclusive) or a publish time in ms.

        The broker answers by closing the consumer; like the C++ client, this returns
        once it has resubscribed, so what is read next comes from the new position.

        Raises:
            Timeout, BrokerError: the broker did not confirm the seek.
            NotConnected: the seek was confirmed but the consumer is still
                resubscribing after the operation timeout.
        """
        self.check_open()
        self._flush_acks()
        if isinstance(target, MessageId):
            fields: dict[str, Any] = {"message_id": target.to_pb()}
            new_start: MessageId | None = target
            # Like the C++ client: the seek id itself is delivered only when the
            # consumer was configured with start_message_id_inclusive.
            inclusive = self.options.start_message_id_inclusive
        else:
            fields = {"message_publish_time": int(target)}
            new_start = MessageId.earliest
            inclusive = True
        old = (self._start, self._start_inclusive, self.last_dequeued)
        # Set before the request: the broker may disconnect us before it answers, and
        # the resubscribe must then already start from the new position.
        self._start, self._start_inclusive, self.last_dequeued = new_start, inclusive, None
        self._seeked = True
        by_time = self.seeked_by_time
        self.seeked_by_time = not isinstance(target, MessageId)
        try:
            conn, _ = await self._request(T.SEEK, "seek", **fields)
        except BaseException:
            self._start, self._start_inclusive, self.last_dequeued = old
            self.seeked_by_time = by_time
            raise
        self.batch_acks.clear()
        self.ack_group.reset_cumulative_floor()
        self.nacks.clear()
        self.unacked.clear()
        self.chunks.clear()
        if conn is self._conn:
            # Still on the same session: drop what came from the old position.
            self._return_permits(self.queue.remove_where(lambda m: m._consumer is self))
        elif self.state != State.READY:
            # The broker closed us for the seek (as Pulsar does) and the resubscribe has
            # not completed: what is queued is from before the seek and must not be
            # handed out. (A resubscribe that already completed cleared it itself.)
            self.queue.remove_where(lambda m: m._consumer is self)
        await self._wait_connected()

    async def get_last_message_id(self) -> tuple[MessageId, MessageId | None]:
        """(last message id of the topic, subscription mark-delete position or None).

        Waits up to the operation timeout for a connection, as the C++ client does.

        Raises:
            AlreadyClosed, NotConnected, Timeout, BrokerError.
        """
        await self._wait_connected()
        _, resp = await self._request(T.GET_LAST_MESSAGE_ID, "getLastMessageId")
        r = resp.getLastMessageIdResponse
        last = MessageId.from_pb(r.last_message_id, self.topic)
        if self.partition >= 0:
            last = last.with_topic(self.topic, self.partition)
        mark = (
            MessageId.from_pb(r.consumer_mark_delete_position)
            if r.HasField("consumer_mark_delete_position")
            else None
        )
        return last, mark

    async def unsubscribe(self) -> None:
        """Delete the subscription; the consumer is closed afterwards.

        Raises:
            BrokerError: e.g. the subscription has other consumers.
        """
        self.check_open()
        await self._request(T.UNSUBSCRIBE, "unsubscribe")
        self._mark_closed()

    async def close(self) -> None:
        """Flush acks and close on the broker. Idempotent."""
        if self.state == State.CLOSED:
            return
        self._flush_acks()
        conn = self._conn
        self._mark_closed()
        if conn is not None and not conn.is_closed:
            rid = self.config.next_request_id()
            cmd = make_command(
                T.CLOSE_CONSUMER,
                "close_consumer",
                consumer_id=self.consumer_id,
                request_id=rid,
            )
            try:
                await conn.request(cmd, rid)
            except QuasarError as exc:
                log.debug("close of consumer on %s: %s", self.topic, exc)

    def _mark_closed(self) -> None:
        self.state = State.CLOSED
        self._ready.set()  # wakes waiters of _wait_connected; they see CLOSED
        if (
            self._reconnect_task is not None
            and self._reconnect_task is not asyncio.current_task()
        ):
            self._reconnect_task.cancel()
        for timer in (self._ack_timer, self._redeliver_timer):
            if timer is not None:
                timer.cancel()
        self.chunks.close()
        if self._conn is not None:
            self._conn.consumers.pop(self.consumer_id, None)
            self._conn = None
        self.queue.remove_where(lambda m: m._consumer is self)
        if self._owns_queue:
            self.queue.close()

    @property
    def start_message_id(self) -> MessageId | None:
        """Where a reader reads from (None for a durable subscription); after
        messages were handed out, the last one of them."""
        return self._start

    @property
    def start_message_id_inclusive(self) -> bool:
        """Whether :attr:`start_message_id` itself is to be read."""
        return self._start_inclusive

    def check_open(self) -> None:
        """Raises AlreadyClosed once the consumer is closed."""
        if self.state is _CLOSED:
            raise AlreadyClosed(f"consumer on {self.topic} is closed")

    async def receive(self, timeout_s: float | None) -> Message:
        """The next message of this consumer's queue (the API of MultiTopicsConsumer).

        Raises:
            AlreadyClosed: the consumer is closed.
            Timeout: nothing arrived within ``timeout_s``.
        """
        self.check_open()
        return await self.queue.get(timeout_s)


def _txn_ack_position(mid: MessageId, cumulative: bool) -> Any:
    """The ``MessageIdData`` of a transactional ack of ``mid``.

    For a batch member the broker needs the ack set: every member except the acked
    one (individual) or except members ``0..index`` (cumulative) stays set, meaning
    "not acknowledged by this ack". Without it, the ack would cover the whole entry.
    """
    data = MessageId(-1, mid.ledger_id(), mid.entry_id()).to_pb()
    if mid.is_batch_member():
        size, index = mid.batch_size(), mid.batch_index()
        acked = (1 << (index + 1)) - 1 if cumulative else 1 << index
        data.ack_set.extend(bits_to_words(all_unacked(size) & ~acked))
        data.batch_size = size
    return data


def _entry_keys(mid: MessageId) -> tuple[EntryKey, ...]:
    """The entries holding ``mid``: every chunk of a chunked message."""
    return mid.chunk_keys if isinstance(mid, ChunkMessageId) else (mid.entry_key,)


def _random_name() -> str:
    import secrets

    return secrets.token_hex(5)
