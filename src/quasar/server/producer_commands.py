"""PRODUCER, SEND (plain and transactional) and CLOSE_PRODUCER on a client connection.

SEND is the broker's hottest command: its checks read only what the handler keeps
from construction, and the receipt is written by a callback from the topic once the
entry is stored, with no task per message.
"""

from __future__ import annotations

import asyncio
import logging

from quasar.broker.non_persistent_topics import NON_PERSISTENT, ServedTopic
from quasar.broker.producer import Producer
from quasar.broker.schema import encode_version
from quasar.errors import (
    ChecksumError,
    NotAllowedError,
    ProducerBusy,
    QuasarError,
    RemoteProtocolError,
    ServerError,
    StorageError,
)
from quasar.protocol import Frame, encode_command, encode_send_receipt, pb
from quasar.protocol.entry import parse_entry
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import Position
from quasar.transaction.coordinator.ownership import not_owner

from . import replies
from .context import CommandHandler, ConnectionContext
from .permissions import refuse_system_topic, require
from .txn_ownership import TxnOwnership
from .wire import client_given_name, schema_info, subscription_name, topic_of

log = logging.getLogger(__name__)

T = pb.BaseCommand
# The stored entry holds the checksum and metadata besides the payload; the client
# checks payload + metadata against maxMessageSize, so allow room for the checksum.
MESSAGE_METADATA_ALLOWANCE = 6


def _is_chunk(payload: bytes) -> bool:
    """Whether an oversized SEND's entry is a chunk of a chunked message.

    A client sizes a chunk's payload as ``maxMessageSize`` less its metadata *before*
    the chunk fields are added (Pulsar's clients do), so a chunk's metadata and
    payload exceed ``maxMessageSize`` by a few dozen bytes. Pulsar bounds chunks by
    the frame limit alone (``maxMessageSize`` plus ``FRAME_PADDING``, which the frame
    decoder enforced already), and so does quasar. Parsed only for oversized SENDs;
    the chunk's fields are checked in full when it is published (``batch_limits``).
    """
    try:
        return parse_entry(payload, verify_checksum=False).metadata.num_chunks_from_msg > 1
    except RemoteProtocolError:
        return False


class ProducerCommands:
    """Creates and closes the connection's producers and stores what they send."""

    def __init__(self, ctx: ConnectionContext) -> None:
        self._ctx = ctx
        # Read on every SEND: kept here (the table is never replaced, the limit fixed).
        self._producers = ctx.producers
        self._max_message_size = ctx.settings.max_message_size
        self._txn_ownership = TxnOwnership(ctx)
        # Creations waiting for exclusive access, by producer id: a CLOSE_PRODUCER
        # for one ends its wait (at most one per producer id, so the connection's
        # producer limit bounds this map).
        self._waiting: dict[int, asyncio.Task[object]] = {}

    def handlers(self) -> dict[int, CommandHandler]:
        spawn = self._ctx.spawn
        return {
            T.PRODUCER: lambda c, f: spawn(self.on_producer(c.producer)),
            T.SEND: self.on_send,
            T.CLOSE_PRODUCER: lambda c, f: self.on_close_producer(c.close_producer),
        }

    # -- PRODUCER ------------------------------------------------------------------------
    async def on_producer(self, c: pb.CommandProducer) -> None:
        ctx = self._ctx
        service = ctx.service
        request_id = c.request_id
        pid = c.producer_id
        existing = ctx.producer_futures.get(pid)
        if existing is not None:
            if existing.done() and pid in ctx.producers:
                # A retry of a request that already succeeded: answer it again.
                producer, topic = ctx.producers[pid]
                ctx.send_command(replies.producer_success(request_id, producer, topic))
            else:
                ctx.send_command(
                    replies.error(
                        request_id, ProducerBusy("Producer is already present on the connection")
                    )
                )
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ctx.producer_futures[pid] = fut
        try:
            ctx.limits.admit_producer_on_connection(len(ctx.producer_futures))
            name = topic_of(c.topic)
            refuse_system_topic(ctx, name, "produce to")
            authorization = ctx.authorization
            require(ctx, authorization.can_produce(name, ctx.principal), "Produce", name.full)
            if c.HasField("initial_subscription_name"):
                # The producer also creates a subscription: that is consuming.
                require(
                    ctx,
                    authorization.can_consume(
                        name, ctx.principal, c.initial_subscription_name
                    ),
                    "Subscribe",
                    name.full,
                )
            topic: ServedTopic
            if name.domain == NON_PERSISTENT:
                topic = service.non_persistent.get_topic(name)
            else:
                topic = await service.get_topic(name, create=True)
                if c.initial_subscription_name:
                    subscription_name(c.initial_subscription_name)
                    topic.ensure_initial_subscription(c.initial_subscription_name)
                # Pulsar refuses a producer while a producer-blocking backlog quota
                # is exceeded (backlog_quota.py).
                await service.backlog_quotas.check_new_producer(topic)
            schema_version = b""
            if c.HasField("schema"):
                version = service.schemas.put_if_absent(
                    service.schema_key(name), schema_info(c.schema)
                )
                schema_version = encode_version(version)
            else:
                service.schemas.check_schemaless_producer(service.schema_key(name))
            user_named = c.HasField("producer_name") and bool(c.producer_name)
            if user_named:
                client_given_name(c.producer_name, "Producer")
            producer = Producer(
                producer_id=pid,
                producer_name=c.producer_name if user_named else service.generate_producer_name(),
                connection=ctx,
                access_mode=c.producer_access_mode,
                epoch=c.epoch,
                requested_topic_epoch=c.topic_epoch if c.HasField("topic_epoch") else None,
                user_provided_name=user_named and c.user_provided_producer_name,
                metadata={kv.key: kv.value for kv in c.metadata},
                schema_version=schema_version,
            )
            # A producer starts only after the transaction buffer recovered, so its
            # first message cannot overtake data the buffer is still replaying.
            await topic.check_transactions_recovered(c.txn_enabled)
            ctx.limits.admit_producer_on_topic(topic)

            def queued() -> None:
                # A WaitForExclusive producer is told it is queued; the real success
                # follows once it has access.
                task = asyncio.current_task()
                assert task is not None
                self._waiting[pid] = task
                ctx.send_command(
                    replies.producer_success(request_id, producer, topic, ready=False)
                )

            try:
                await topic.add_producer(producer, on_queued=queued)
            finally:
                self._waiting.pop(pid, None)
            if ctx.closed or ctx.producer_futures.get(pid) is not fut:
                # The connection closed, or the client closed the producer while it
                # waited for exclusive access.
                topic.remove_producer(producer)
                return
            ctx.producers[pid] = (producer, topic)
            fut.set_result(None)
            ctx.send_command(replies.producer_success(request_id, producer, topic))
        except QuasarError as e:
            ctx.producer_futures.pop(pid, None)
            fut.cancel()
            if isinstance(e, StorageError):
                log.error("cannot serve producer on %s: %s", c.topic, e)
            ctx.send_command(replies.error(request_id, ctx.refusals.counted(e)))
        except Exception as e:
            ctx.producer_futures.pop(pid, None)
            fut.cancel()
            log.exception("producer creation failed")
            ctx.send_command(replies.error(request_id, e))

    # -- SEND ----------------------------------------------------------------------------
    def on_send(self, cmd: pb.BaseCommand, frame: Frame) -> None:
        c = cmd.send
        pid = c.producer_id
        seq = c.sequence_id
        entry = self._producers.get(pid)
        if entry is None:
            self._send_error(pid, seq, NotAllowedError("Producer not found on this connection"))
            return
        producer, topic = entry
        payload = frame.payload
        if payload is None:
            self._send_error(pid, seq, NotAllowedError("SEND without a payload"))
            return
        if (
            len(payload) > self._max_message_size + MESSAGE_METADATA_ALLOWANCE
            and not _is_chunk(payload)
        ):
            self._send_error(
                pid,
                seq,
                NotAllowedError(
                    f"Message of {len(payload)} bytes exceeds maxMessageSize "
                    f"{self._max_message_size}"
                ),
            )
            return
        if frame.checksum_ok is False:
            self._send_error(pid, seq, ChecksumError("Checksum failed on the broker"))
            return
        if c.HasField("txnid_most_bits") and c.HasField("txnid_least_bits"):
            if self._ctx.service.transactions is None:
                self._send_error(pid, seq, NotAllowedError(replies.TRANSACTIONS_NOT_ENABLED))
                return
            txn = TxnID(c.txnid_most_bits, c.txnid_least_bits)
            # Only the transaction's owner (or a super-user) may send in it. Refused
            # with NotAllowedError, not the coordinator's TransactionNotFound: the
            # clients fail just that message on NotAllowedError, whereas on most other
            # codes they drop the connection and send the message again, forever.
            if self._ctx.principal is not None and (
                caller := self._txn_ownership.refuses(txn)
            ):
                self._send_error(pid, seq, NotAllowedError(str(not_owner(txn, caller))))
                return
            self._publish(producer, topic, c, payload, txn)
            return
        self._publish(producer, topic, c, payload, None)

    def _publish(
        self,
        producer: Producer,
        topic: ServedTopic,
        c: pb.CommandSend,
        payload: bytes,
        txn: TxnID | None,
    ) -> None:
        pid = c.producer_id
        seq = c.sequence_id
        # Unset fields read as their declared defaults (0 and 1), as HasField would give.
        highest = c.highest_sequence_id
        num = c.num_messages
        ctx = self._ctx
        ctx.publish_started()
        write = ctx.write
        publish_completed = ctx.publish_completed

        def done(pos: Position | None, err: BaseException | None) -> None:
            publish_completed()
            if err is not None:
                self._send_error(pid, seq, err)
                return
            assert pos is not None
            write(encode_send_receipt(pid, seq, pos[0], pos[1], highest))

        topic.publish(producer, seq, highest, num, payload, done, txn)

    def _send_error(self, pid: int, seq: int, err: BaseException) -> None:
        cmd = replies.send_error(pid, seq, self._ctx.refusals.counted(err))
        if int(cmd.send_error.error) == ServerError.UnknownError:
            log.error("publish failed: %s", cmd.send_error.message)
        self._ctx.send_command(cmd)

    # -- CLOSE_PRODUCER ------------------------------------------------------------------
    def on_close_producer(self, c: pb.CommandCloseProducer) -> None:
        ctx = self._ctx
        entry = ctx.producers.pop(c.producer_id, None)
        ctx.producer_futures.pop(c.producer_id, None)
        waiting = self._waiting.pop(c.producer_id, None)
        if waiting is not None:
            # Closed while it waited for exclusive access: it leaves the queue, as
            # Pulsar fails a creation closed before it completed.
            waiting.cancel()
        if entry is not None:
            producer, topic = entry
            topic.remove_producer(producer)
        ctx.send_command(replies.success(c.request_id))

    def close_producer(self, producer_id: int) -> None:
        """Broker-initiated close: the client reconnects the producer."""
        ctx = self._ctx
        ctx.producers.pop(producer_id, None)
        ctx.producer_futures.pop(producer_id, None)
        ctx.write(encode_command(replies.close_producer(producer_id)))
