"""SUBSCRIBE, FLOW, ACK, REDELIVER, SEEK, UNSUBSCRIBE, CLOSE_CONSUMER, GET_LAST_MESSAGE_ID."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from quasar.broker.consumer import Consumer
from quasar.errors import (
    BrokerError,
    ConsumerBusy,
    ConsumerNotFound,
    QuasarError,
    StorageError,
)
from quasar.protocol import TopicName, encode_command, pb
from quasar.storage.api import Position, new_position

from .producer_commands import schema_info

if TYPE_CHECKING:
    from .connection import ServerConnection

log = logging.getLogger(__name__)

U64 = 1 << 64
U64_MAX = U64 - 1
_I64_LIMIT = 1 << 63


def _s64(v: int) -> int:
    return v - U64 if v >= 1 << 63 else v


def position_of(mid: pb.MessageIdData) -> Position:
    ledger, entry = mid.ledgerId, mid.entryId
    if ledger >= _I64_LIMIT or entry >= _I64_LIMIT:
        return Position(_s64(ledger), _s64(entry))
    return new_position((ledger, entry))


class ConsumerCommands:
    def consumer_handlers(self: ServerConnection) -> dict[int, Any]:  # type: ignore[misc]
        T = pb.BaseCommand
        return {
            T.SUBSCRIBE: lambda c, f: self.spawn(self._on_subscribe(c.subscribe)),
            T.FLOW: lambda c, f: self._on_flow(c.flow),
            T.ACK: lambda c, f: self._on_ack(c.ack),
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: lambda c, f: self._on_redeliver(
                c.redeliverUnacknowledgedMessages
            ),
            T.UNSUBSCRIBE: lambda c, f: self._on_unsubscribe(c.unsubscribe),
            T.CLOSE_CONSUMER: lambda c, f: self._on_close_consumer(c.close_consumer),
            T.SEEK: lambda c, f: self.spawn(self._on_seek(c.seek)),
            T.GET_LAST_MESSAGE_ID: lambda c, f: self.spawn(
                self._on_get_last_message_id(c.getLastMessageId)
            ),
            T.CONSUMER_STATS: lambda c, f: self._on_consumer_stats(c.consumerStats),
        }

    async def _on_subscribe(self: ServerConnection, c: pb.CommandSubscribe) -> None:  # type: ignore[misc]
        request_id = c.request_id
        cid = c.consumer_id
        existing = self.consumer_futures.get(cid)
        if existing is not None:
            if existing.done() and cid in self.consumers:
                self.send_success(request_id)
            else:
                self.send_error(request_id, ConsumerBusy("Consumer is already present on the connection"))
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.consumer_futures[cid] = fut
        try:
            name = TopicName.parse(c.topic)
            if not c.subscription:
                raise ConsumerBusy("Empty subscription name")
            topic = await self.service.get_topic(name, create=True)
            if c.HasField("schema"):
                self.service.schemas.check_compatible(
                    self.service.schema_key(name), schema_info(c.schema)
                )
            consumer = Consumer(
                consumer_id=cid,
                consumer_name=c.consumer_name or f"consumer-{cid}",
                subscription_name=c.subscription,
                sub_type=c.subType,
                connection=self,
                partition_index=name.partition_index,
                priority_level=c.priority_level,
                read_compacted=c.read_compacted,
                metadata={kv.key: kv.value for kv in c.metadata},
                key_shared_mode=c.keySharedMeta.keySharedMode if c.HasField("keySharedMeta") else None,
                max_unacked_messages=self.service.config.dispatch.max_unacked_messages_per_consumer
                if c.subType in (pb.CommandSubscribe.Shared, pb.CommandSubscribe.Key_Shared)
                else 0,
            )
            durable = c.durable if c.HasField("durable") else True
            start = position_of(c.start_message_id) if c.HasField("start_message_id") else None
            if self.closed:
                return
            topic.subscribe(consumer, durable, c.initialPosition, start)
            self.consumers[cid] = (consumer, topic)
            fut.set_result(None)
            self.send_success(request_id)
        except QuasarError as e:
            self.consumer_futures.pop(cid, None)
            fut.cancel()
            if isinstance(e, StorageError):
                log.error("cannot serve subscription on %s: %s", c.topic, e)
            self.send_error(request_id, e)
        except Exception as e:
            self.consumer_futures.pop(cid, None)
            fut.cancel()
            log.exception("subscribe failed")
            self.send_error(request_id, e)

    def _on_flow(self: ServerConnection, c: pb.CommandFlow) -> None:  # type: ignore[misc]
        entry = self.consumers.get(c.consumer_id)
        if entry is None:
            return
        consumer, topic = entry
        sub = topic.subscriptions.get(consumer.subscription_name)
        if sub is not None:
            sub.flow(consumer, c.messagePermits)

    def _on_ack(self: ServerConnection, c: pb.CommandAck) -> None:  # type: ignore[misc]
        entry = self.consumers.get(c.consumer_id)
        error: BaseException | None = None
        if entry is None:
            error = ConsumerNotFound(f"Consumer {c.consumer_id} not found")
        elif c.HasField("txnid_most_bits") and c.HasField("txnid_least_bits"):
            self.ack_transactional(entry[0], entry[1], c)
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
            self.send_ack_response(c, error)
        elif error is not None:
            log.debug("ack from %s failed: %s", self.remote_address, error)

    def send_ack_response(  # type: ignore[misc]
        self: ServerConnection, c: pb.CommandAck, error: BaseException | None
    ) -> None:
        from .connection import error_code_and_message

        cmd = pb.BaseCommand(type=pb.BaseCommand.ACK_RESPONSE)
        r = cmd.ackResponse
        r.consumer_id = c.consumer_id
        r.request_id = c.request_id
        if c.HasField("txnid_most_bits"):
            r.txnid_most_bits = c.txnid_most_bits
            r.txnid_least_bits = c.txnid_least_bits
        if error is not None:
            code, message = error_code_and_message(error)
            r.error = code
            r.message = message
        self.send_command(cmd)

    def _on_redeliver(  # type: ignore[misc]
        self: ServerConnection, c: pb.CommandRedeliverUnacknowledgedMessages
    ) -> None:
        entry = self.consumers.get(c.consumer_id)
        if entry is None:
            return
        consumer, topic = entry
        sub = topic.subscriptions.get(consumer.subscription_name)
        if sub is None:
            return
        positions = [position_of(m) for m in c.message_ids] if c.message_ids else None
        sub.redeliver(consumer, positions)

    def _on_unsubscribe(self: ServerConnection, c: pb.CommandUnsubscribe) -> None:  # type: ignore[misc]
        entry = self.consumers.get(c.consumer_id)
        if entry is None:
            self.send_error(c.request_id, ConsumerNotFound(f"Consumer {c.consumer_id} not found"))
            return
        consumer, topic = entry
        try:
            topic.unsubscribe(consumer)
        except BrokerError as e:
            self.send_error(c.request_id, e)
            return
        self.consumers.pop(c.consumer_id, None)
        self.consumer_futures.pop(c.consumer_id, None)
        self.send_success(c.request_id)

    def _on_close_consumer(self: ServerConnection, c: pb.CommandCloseConsumer) -> None:  # type: ignore[misc]
        entry = self.consumers.pop(c.consumer_id, None)
        self.consumer_futures.pop(c.consumer_id, None)
        if entry is not None:
            consumer, topic = entry
            topic.remove_consumer(consumer)
        self.send_success(c.request_id)

    def close_consumer(self: ServerConnection, consumer_id: int) -> None:  # type: ignore[misc]
        """Broker-initiated close: the client resubscribes (same consumer id)."""
        self.consumers.pop(consumer_id, None)
        self.consumer_futures.pop(consumer_id, None)
        cmd = pb.BaseCommand(type=pb.BaseCommand.CLOSE_CONSUMER)
        cmd.close_consumer.consumer_id = consumer_id
        cmd.close_consumer.request_id = U64_MAX
        self.write(encode_command(cmd))

    async def _on_seek(self: ServerConnection, c: pb.CommandSeek) -> None:  # type: ignore[misc]
        entry = self.consumers.get(c.consumer_id)
        if entry is None:
            self.send_error(c.request_id, ConsumerNotFound(f"Consumer {c.consumer_id} not found"))
            return
        consumer, topic = entry
        sub = topic.subscriptions.get(consumer.subscription_name)
        if sub is None:
            self.send_error(c.request_id, ConsumerNotFound("Subscription is gone"))
            return
        if c.HasField("message_publish_time"):
            position = await topic.find_position_by_time(c.message_publish_time)
        elif c.HasField("message_id"):
            position = position_of(c.message_id)
        else:
            self.send_error(c.request_id, ConsumerNotFound("SEEK without a target"))
            return
        sub.reset_cursor(position)
        self.send_success(c.request_id)

    async def _on_get_last_message_id(  # type: ignore[misc]
        self: ServerConnection, c: pb.CommandGetLastMessageId
    ) -> None:
        entry = self.consumers.get(c.consumer_id)
        if entry is None:
            self.send_error(c.request_id, ConsumerNotFound(f"Consumer {c.consumer_id} not found"))
            return
        consumer, topic = entry
        position, info = await topic.last_message(consumer.read_compacted)
        cmd = pb.BaseCommand(type=pb.BaseCommand.GET_LAST_MESSAGE_ID_RESPONSE)
        r = cmd.getLastMessageIdResponse
        r.request_id = c.request_id
        r.last_message_id.ledgerId = position.ledger_id % U64
        r.last_message_id.entryId = position.entry_id % U64
        r.last_message_id.partition = topic.partition_index
        if info is not None and info.is_batch:
            r.last_message_id.batch_index = info.num_messages - 1
        sub = topic.subscriptions.get(consumer.subscription_name)
        if sub is not None:
            md = sub.cursor.mark_delete_position
            r.consumer_mark_delete_position.ledgerId = md.ledger_id % U64
            r.consumer_mark_delete_position.entryId = md.entry_id % U64
        self.send_command(cmd)

    def _on_consumer_stats(self: ServerConnection, c: pb.CommandConsumerStats) -> None:  # type: ignore[misc]
        cmd = pb.BaseCommand(type=pb.BaseCommand.CONSUMER_STATS_RESPONSE)
        r = cmd.consumerStatsResponse
        r.request_id = c.request_id
        entry = self.consumers.get(c.consumer_id)
        if entry is None:
            r.error_code = pb.ConsumerNotFound
            r.error_message = f"Consumer {c.consumer_id} not found"
        else:
            consumer, topic = entry
            r.consumerName = consumer.consumer_name
            r.availablePermits = max(consumer.permits, 0)
            r.unackedMessages = consumer.unacked_messages
            r.blockedConsumerOnUnackedMsgs = consumer.blocked_on_unacked
            r.address = self.remote_address
            sub = topic.subscriptions.get(consumer.subscription_name)
            r.msgBacklog = sub.backlog() if sub else 0
        self.send_command(cmd)
