"""SUBSCRIBE, FLOW, ACK (plain and transactional), REDELIVER_UNACKNOWLEDGED_MESSAGES,
SEEK, UNSUBSCRIBE, CLOSE_CONSUMER, GET_LAST_MESSAGE_ID and CONSUMER_STATS on a client
connection."""

from __future__ import annotations

import asyncio
import logging

from quasar.broker.consumer import Consumer
from quasar.broker.key_shared import declared_ranges
from quasar.broker.non_persistent_topics import NON_PERSISTENT, ServedTopic
from quasar.errors import (
    REFUSED_SUBSCRIPTION_NAME,
    BrokerError,
    ConsumerBusy,
    ConsumerNotFound,
    NotAllowedError,
    QuasarError,
    StorageError,
    SubscriptionNotFound,
    TopicNotFound,
    tag_refusal,
)
from quasar.protocol import encode_command, pb
from quasar.protocol.int64 import to_uint64
from quasar.protocol.txn_id import TxnID
from quasar.transaction.coordinator.ownership import not_owner

from . import replies
from .context import CommandHandler, ConnectionContext
from .permissions import refuse_system_topic, require
from .schema_attach import attach_consumer_schema
from .txn_ownership import TxnOwnership
from .wire import (
    client_given_name,
    position_of,
    schema_info,
    subscription_name,
    topic_of,
)

log = logging.getLogger(__name__)

T = pb.BaseCommand


class ConsumerCommands:
    """Creates and closes the connection's consumers and relays their flow, acks,
    redelivery requests and seeks to the subscription."""

    def __init__(self, ctx: ConnectionContext) -> None:
        self._ctx = ctx
        # Read on every FLOW and ACK: the table is never replaced.
        self._consumers = ctx.consumers
        self._txn_ownership = TxnOwnership(ctx)

    def handlers(self) -> dict[int, CommandHandler]:
        spawn = self._ctx.spawn
        return {
            T.SUBSCRIBE: lambda c, f: self._start_subscribe(c.subscribe),
            T.FLOW: lambda c, f: self.on_flow(c.flow),
            T.ACK: lambda c, f: self.on_ack(c.ack),
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: lambda c, f: self.on_redeliver(
                c.redeliverUnacknowledgedMessages
            ),
            T.UNSUBSCRIBE: lambda c, f: self.on_unsubscribe(c.unsubscribe),
            T.CLOSE_CONSUMER: lambda c, f: self.on_close_consumer(c.close_consumer),
            T.SEEK: lambda c, f: spawn(self.on_seek(c.seek)),
            T.GET_LAST_MESSAGE_ID: lambda c, f: spawn(
                self.on_get_last_message_id(c.getLastMessageId)
            ),
            T.CONSUMER_STATS: lambda c, f: self.on_consumer_stats(c.consumerStats),
        }

    # -- SUBSCRIBE -----------------------------------------------------------------------
    def _start_subscribe(self, c: pb.CommandSubscribe) -> None:
        # The consumer is registered before the handler yields, in frame order: a
        # CLOSE_CONSUMER read right after the SUBSCRIBE then finds and cancels it.
        fut = self._register_consumer(c)
        if fut is not None:
            self._ctx.spawn(self._subscribe(c, fut))

    async def on_subscribe(self, c: pb.CommandSubscribe) -> None:
        fut = self._register_consumer(c)
        if fut is not None:
            await self._subscribe(c, fut)

    def _register_consumer(self, c: pb.CommandSubscribe) -> asyncio.Future[None] | None:
        """The new consumer's future, or None when the request is already answered
        (a retry of a consumer that exists or is being created)."""
        ctx = self._ctx
        cid = c.consumer_id
        existing = ctx.consumer_futures.get(cid)
        if existing is not None:
            if existing.done() and cid in ctx.consumers:
                ctx.send_command(replies.success(c.request_id))
            else:
                ctx.send_command(
                    replies.error(
                        c.request_id,
                        ConsumerBusy("Consumer is already present on the connection"),
                    )
                )
            return None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ctx.consumer_futures[cid] = fut
        return fut

    async def _subscribe(self, c: pb.CommandSubscribe, fut: asyncio.Future[None]) -> None:
        ctx = self._ctx
        service = ctx.service
        request_id = c.request_id
        cid = c.consumer_id
        try:
            ctx.limits.admit_consumer_on_connection(len(ctx.consumer_futures))
            name = topic_of(c.topic)
            if not c.subscription:  # Pulsar's code for it; counted as a bad name
                raise tag_refusal(
                    ConsumerBusy("Empty subscription name"), REFUSED_SUBSCRIPTION_NAME
                )
            subscription_name(c.subscription)
            client_given_name(c.consumer_name, "Consumer")
            refuse_system_topic(ctx, name, "subscribe to")
            require(
                ctx,
                ctx.authorization.can_consume(name, ctx.principal, c.subscription),
                "Subscribe",
                name.full,
            )
            topic: ServedTopic
            if name.domain == NON_PERSISTENT:
                topic = service.non_persistent.get_topic(name)
            else:
                topic = await service.get_topic(name, create=True)
            if c.HasField("schema"):
                attach_consumer_schema(service, topic, name, schema_info(c.schema))
            consumer = Consumer(
                consumer_id=cid,
                consumer_name=c.consumer_name or f"consumer-{cid}",
                subscription_name=c.subscription,
                sub_type=c.subType,
                connection=ctx,
                partition_index=name.partition_index,
                priority_level=c.priority_level,
                read_compacted=c.read_compacted,
                metadata={kv.key: kv.value for kv in c.metadata},
                key_shared_mode=c.keySharedMeta.keySharedMode if c.HasField("keySharedMeta") else None,
                key_shared_ranges=declared_ranges(
                    c.keySharedMeta.keySharedMode if c.HasField("keySharedMeta") else None,
                    c.keySharedMeta.hashRanges,
                ),
                allow_out_of_order_delivery=c.keySharedMeta.allowOutOfOrderDelivery,
                max_unacked_messages=service.config.dispatch.max_unacked_messages_per_consumer
                if c.subType in (pb.CommandSubscribe.Shared, pb.CommandSubscribe.Key_Shared)
                else 0,
                write_state=ctx.write_state,
            )
            durable = c.durable if c.HasField("durable") else True
            start = position_of(c.start_message_id) if c.HasField("start_message_id") else None
            if ctx.closed:
                return
            if ctx.consumer_futures.get(cid) is not fut:
                # CLOSE_CONSUMER arrived while the topic loaded (a client closes the
                # consumers of a partitioned subscribe that failed elsewhere):
                # attaching now would leave a consumer nobody owns holding the
                # subscription, and the client's next subscribe would get ConsumerBusy.
                raise ConsumerNotFound("Consumer was closed before its subscribe completed")
            ctx.limits.admit_consumer_on_topic(topic, c.subscription)
            topic.subscribe(consumer, durable, c.initialPosition, start)
            ctx.consumers[cid] = (consumer, topic)
            fut.set_result(None)
            ctx.send_command(replies.success(request_id))
        except QuasarError as e:
            if ctx.consumer_futures.get(cid) is fut:
                ctx.consumer_futures.pop(cid)
            fut.cancel()
            if isinstance(e, StorageError):
                log.error("cannot serve subscription on %s: %s", c.topic, e)
            ctx.send_command(replies.error(request_id, ctx.refusals.counted(e)))
        except Exception as e:
            if ctx.consumer_futures.get(cid) is fut:
                ctx.consumer_futures.pop(cid)
            fut.cancel()
            log.exception("subscribe failed")
            ctx.send_command(replies.error(request_id, e))

    # -- FLOW and ACK (hot) --------------------------------------------------------------
    def on_flow(self, c: pb.CommandFlow) -> None:
        entry = self._consumers.get(c.consumer_id)
        if entry is None:
            return
        consumer, topic = entry
        sub = topic.subscriptions.get(consumer.subscription_name)
        if sub is not None:
            sub.flow(consumer, c.messagePermits)

    def on_ack(self, c: pb.CommandAck) -> None:
        entry = self._consumers.get(c.consumer_id)
        error: BaseException | None = None
        if entry is None:
            error = ConsumerNotFound(f"Consumer {c.consumer_id} not found")
        elif c.HasField("txnid_most_bits") and c.HasField("txnid_least_bits"):
            self._ctx.spawn(self._ack_in_transaction(entry[0], entry[1], c))
            return
        else:
            consumer, topic = entry
            sub = topic.subscriptions.get(consumer.subscription_name)
            try:
                if sub is None:
                    raise ConsumerNotFound("Subscription is gone")
                if c.ack_type == pb.CommandAck.Cumulative:
                    if c.message_id:
                        sub.ack_cumulative(consumer, position_of(c.message_id[0]))
                else:
                    sub.ack_individual(
                        consumer,
                        [(position_of(m), list(m.ack_set) or None) for m in c.message_id],
                    )
            except BrokerError as e:
                error = e
        if c.HasField("request_id"):
            self._ctx.send_command(replies.ack_response(c, error))
        elif error is not None:
            log.debug("ack from %s failed: %s", self._ctx.remote_address, error)

    async def _ack_in_transaction(
        self, consumer: Consumer, topic: ServedTopic, c: pb.CommandAck
    ) -> None:
        """An ACK inside a transaction: held as pending until the transaction ends."""
        error: BaseException | None = None
        try:
            if self._ctx.service.transactions is None:
                raise NotAllowedError(replies.TRANSACTIONS_NOT_ENABLED)
            sub = topic.subscriptions.get(consumer.subscription_name)
            if sub is None:
                raise SubscriptionNotFound("Subscription is gone")
            txn = TxnID(c.txnid_most_bits, c.txnid_least_bits)
            # Only the transaction's owner (or a super-user) may acknowledge in it.
            if self._ctx.principal is not None and (
                caller := self._txn_ownership.refuses(txn)
            ):
                raise not_owner(txn, caller)
            if c.ack_type == pb.CommandAck.Cumulative:
                if c.message_id:
                    await sub.ack_cumulative_in_txn(consumer, txn, position_of(c.message_id[0]))
            else:
                await sub.ack_individual_in_txn(
                    consumer,
                    txn,
                    [(position_of(m), list(m.ack_set) or None) for m in c.message_id],
                )
        except (QuasarError, TopicNotFound) as e:
            error = e
        if c.HasField("request_id"):
            self._ctx.send_command(replies.ack_response(c, error))

    # -- REDELIVER, UNSUBSCRIBE, CLOSE_CONSUMER ------------------------------------------
    def on_redeliver(self, c: pb.CommandRedeliverUnacknowledgedMessages) -> None:
        entry = self._consumers.get(c.consumer_id)
        if entry is None:
            return
        consumer, topic = entry
        sub = topic.subscriptions.get(consumer.subscription_name)
        if sub is None:
            return
        positions = [position_of(m) for m in c.message_ids] if c.message_ids else None
        sub.redeliver(consumer, positions)

    def on_unsubscribe(self, c: pb.CommandUnsubscribe) -> None:
        ctx = self._ctx
        entry = self._consumer_or_reply(c.consumer_id, c.request_id)
        if entry is None:
            return
        consumer, topic = entry
        try:
            topic.unsubscribe(consumer)
        except BrokerError as e:
            ctx.send_command(replies.error(c.request_id, e))
            return
        ctx.consumers.pop(c.consumer_id, None)
        ctx.consumer_futures.pop(c.consumer_id, None)
        ctx.send_command(replies.success(c.request_id))

    def _consumer_or_reply(
        self, consumer_id: int, request_id: int
    ) -> tuple[Consumer, ServedTopic] | None:
        """The connection's consumer ``consumer_id``; if there is none, answer the
        request with ConsumerNotFound and return None."""
        entry = self._ctx.consumers.get(consumer_id)
        if entry is None:
            error = ConsumerNotFound(f"Consumer {consumer_id} not found")
            self._ctx.send_command(replies.error(request_id, error))
        return entry

    def on_close_consumer(self, c: pb.CommandCloseConsumer) -> None:
        ctx = self._ctx
        entry = ctx.consumers.pop(c.consumer_id, None)
        ctx.consumer_futures.pop(c.consumer_id, None)
        if entry is not None:
            consumer, topic = entry
            topic.remove_consumer(consumer)
        ctx.send_command(replies.success(c.request_id))

    def close_consumer(self, consumer_id: int) -> None:
        """Broker-initiated close: the client resubscribes (same consumer id)."""
        ctx = self._ctx
        ctx.consumers.pop(consumer_id, None)
        ctx.consumer_futures.pop(consumer_id, None)
        ctx.write(encode_command(replies.close_consumer(consumer_id)))

    # -- SEEK, GET_LAST_MESSAGE_ID, CONSUMER_STATS ---------------------------------------
    async def on_seek(self, c: pb.CommandSeek) -> None:
        ctx = self._ctx
        entry = self._consumer_or_reply(c.consumer_id, c.request_id)
        if entry is None:
            return
        consumer, topic = entry
        sub = topic.subscriptions.get(consumer.subscription_name)
        if sub is None:
            ctx.send_command(replies.error(c.request_id, ConsumerNotFound("Subscription is gone")))
            return
        try:
            if c.HasField("message_publish_time"):
                position = await topic.find_position_by_time(c.message_publish_time)
            elif c.HasField("message_id"):
                position = position_of(c.message_id)
            else:
                raise ConsumerNotFound("SEEK without a target")
            sub.reset_cursor(position)
        except BrokerError as e:  # e.g. seek on a non-persistent topic
            ctx.send_command(replies.error(c.request_id, e))
            return
        ctx.send_command(replies.success(c.request_id))

    async def on_get_last_message_id(self, c: pb.CommandGetLastMessageId) -> None:
        ctx = self._ctx
        entry = self._consumer_or_reply(c.consumer_id, c.request_id)
        if entry is None:
            return
        consumer, topic = entry
        try:
            position, info = await topic.last_message(consumer.read_compacted)
        except BrokerError as e:  # a non-persistent topic stores no last message
            ctx.send_command(replies.error(c.request_id, e))
            return
        cmd = T(type=T.GET_LAST_MESSAGE_ID_RESPONSE)
        r = cmd.getLastMessageIdResponse
        r.request_id = c.request_id
        r.last_message_id.ledgerId = to_uint64(position.ledger_id)
        r.last_message_id.entryId = to_uint64(position.entry_id)
        r.last_message_id.partition = topic.partition_index
        if info is not None and info.is_batch:
            r.last_message_id.batch_index = info.num_messages - 1
        sub = topic.subscriptions.get(consumer.subscription_name)
        if sub is not None:
            md = sub.cursor.mark_delete_position
            r.consumer_mark_delete_position.ledgerId = to_uint64(md.ledger_id)
            r.consumer_mark_delete_position.entryId = to_uint64(md.entry_id)
        ctx.send_command(cmd)

    def on_consumer_stats(self, c: pb.CommandConsumerStats) -> None:
        ctx = self._ctx
        cmd = T(type=T.CONSUMER_STATS_RESPONSE)
        r = cmd.consumerStatsResponse
        r.request_id = c.request_id
        entry = ctx.consumers.get(c.consumer_id)
        if entry is None:
            r.error_code = pb.ConsumerNotFound
            r.error_message = f"Consumer {c.consumer_id} not found"
        else:
            consumer, topic = entry
            r.consumerName = consumer.consumer_name
            r.availablePermits = max(consumer.permits, 0)
            r.unackedMessages = max(consumer.unacked_messages, 0)
            r.blockedConsumerOnUnackedMsgs = consumer.blocked_on_unacked
            r.address = ctx.remote_address
            sub = topic.subscriptions.get(consumer.subscription_name)
            r.msgBacklog = sub.backlog() if sub else 0
        ctx.send_command(cmd)
