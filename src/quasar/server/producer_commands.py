"""PRODUCER, SEND and CLOSE_PRODUCER handling for a server connection."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from quasar.broker.producer import ACCESS_WAIT_FOR_EXCLUSIVE, Producer
from quasar.broker.schema import SchemaInfo, encode_version
from quasar.errors import (
    ChecksumError,
    NotAllowedError,
    ProducerBusy,
    QuasarError,
    ServerError,
    StorageError,
)
from quasar.protocol import Frame, TopicName, encode_command, encode_send_receipt, pb
from quasar.storage.api import Position

if TYPE_CHECKING:
    from .connection import ServerConnection

log = logging.getLogger(__name__)

U64_MAX = (1 << 64) - 1
# The stored entry holds the checksum and metadata besides the payload; the client
# checks payload + metadata against maxMessageSize, so allow room for the checksum.
MESSAGE_METADATA_ALLOWANCE = 6


def schema_info(schema: pb.Schema) -> SchemaInfo:
    return SchemaInfo(
        schema.name,
        int(schema.type),
        bytes(schema.schema_data),
        tuple((kv.key, kv.value) for kv in schema.properties),
    )


class ProducerCommands:
    def producer_handlers(self: ServerConnection) -> dict[int, Any]:  # type: ignore[misc]
        T = pb.BaseCommand
        return {
            T.PRODUCER: lambda c, f: self.spawn(self._on_producer(c.producer)),
            T.SEND: self._on_send,
            T.CLOSE_PRODUCER: lambda c, f: self._on_close_producer(c.close_producer),
        }

    async def _on_producer(self: ServerConnection, c: pb.CommandProducer) -> None:  # type: ignore[misc]
        request_id = c.request_id
        pid = c.producer_id
        existing = self.producer_futures.get(pid)
        if existing is not None:
            if existing.done() and pid in self.producers:
                # A retry of a request that already succeeded: answer it again.
                producer, topic = self.producers[pid]
                self._producer_success(request_id, producer, topic)
            else:
                self.send_error(request_id, ProducerBusy("Producer is already present on the connection"))
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.producer_futures[pid] = fut
        try:
            name = TopicName.parse(c.topic)
            topic = await self.service.get_topic(name, create=True)
            schema_version = b""
            if c.HasField("schema"):
                version = self.service.schemas.put_if_absent(
                    self.service.schema_key(name), schema_info(c.schema)
                )
                schema_version = encode_version(version)
            user_named = c.HasField("producer_name") and bool(c.producer_name)
            producer = Producer(
                producer_id=pid,
                producer_name=c.producer_name if user_named else self.service.generate_producer_name(),
                connection=self,
                access_mode=c.producer_access_mode,
                epoch=c.epoch,
                user_provided_name=user_named and c.user_provided_producer_name,
                metadata={kv.key: kv.value for kv in c.metadata},
                schema_version=schema_version,
            )
            if producer.access_mode == ACCESS_WAIT_FOR_EXCLUSIVE and topic.producers:
                # Tell the client it is queued; the real success follows later.
                self._producer_success(request_id, producer, topic, ready=False)
            # A producer starts only after the transaction buffer recovered, so its
            # first message cannot overtake data the buffer is still replaying.
            await topic.check_transactions_recovered(c.txn_enabled)
            await topic.add_producer(producer)
            if self.closed:
                topic.remove_producer(producer)
                return
            self.producers[pid] = (producer, topic)
            fut.set_result(None)
            self._producer_success(request_id, producer, topic)
        except QuasarError as e:
            self.producer_futures.pop(pid, None)
            fut.cancel()
            if isinstance(e, StorageError):
                log.error("cannot serve producer on %s: %s", c.topic, e)
            self.send_error(request_id, e)
        except Exception as e:
            self.producer_futures.pop(pid, None)
            fut.cancel()
            log.exception("producer creation failed")
            self.send_error(request_id, e)

    def _producer_success(  # type: ignore[misc]
        self: ServerConnection,
        request_id: int,
        producer: Producer,
        topic: Any,
        ready: bool = True,
    ) -> None:
        cmd = pb.BaseCommand(type=pb.BaseCommand.PRODUCER_SUCCESS)
        s = cmd.producer_success
        s.request_id = request_id
        s.producer_name = producer.producer_name
        s.last_sequence_id = topic.last_sequence_id(producer.producer_name)
        if producer.schema_version:
            s.schema_version = producer.schema_version
        if producer.exclusive:
            s.topic_epoch = topic.topic_epoch
        s.producer_ready = ready
        self.send_command(cmd)

    def _on_send(self: ServerConnection, cmd: pb.BaseCommand, frame: Frame) -> None:  # type: ignore[misc]
        c = cmd.send
        pid = c.producer_id
        seq = c.sequence_id
        entry = self.producers.get(pid)
        if entry is None:
            self._send_error(pid, seq, NotAllowedError("Producer not found on this connection"))
            return
        producer, topic = entry
        if frame.payload is None:
            self._send_error(pid, seq, NotAllowedError("SEND without a payload"))
            return
        if len(frame.payload) > self.settings.max_message_size + MESSAGE_METADATA_ALLOWANCE:
            self._send_error(
                pid,
                seq,
                NotAllowedError(
                    f"Message of {len(frame.payload)} bytes exceeds maxMessageSize "
                    f"{self.settings.max_message_size}"
                ),
            )
            return
        if frame.checksum_ok is False:
            self._send_error(pid, seq, ChecksumError("Checksum failed on the broker"))
            return
        if c.HasField("txnid_most_bits") and c.HasField("txnid_least_bits"):
            self.publish_transactional(producer, topic, c, frame.payload)
            return
        self._publish(producer, topic, c, frame.payload)

    def _publish(  # type: ignore[misc]
        self: ServerConnection,
        producer: Producer,
        topic: Any,
        c: pb.CommandSend,
        payload: bytes,
        txn: Any = None,
    ) -> None:
        pid = c.producer_id
        seq = c.sequence_id
        # Unset fields read as their declared defaults (0 and 1), as HasField would give.
        highest = c.highest_sequence_id
        num = c.num_messages
        self.publish_started()
        write = self.write

        def done(pos: Position | None, err: BaseException | None) -> None:
            self.publish_completed()
            if err is not None:
                self._send_error(pid, seq, err)
                return
            assert pos is not None
            write(encode_send_receipt(pid, seq, pos[0], pos[1], highest))

        topic.publish(producer, seq, highest, num, payload, done, txn)

    def _send_error(self: ServerConnection, pid: int, seq: int, err: BaseException) -> None:  # type: ignore[misc]
        from .connection import error_code_and_message

        code, message = error_code_and_message(err)
        if code == ServerError.UnknownError:
            log.error("publish failed: %s", message)
        cmd = pb.BaseCommand(type=pb.BaseCommand.SEND_ERROR)
        cmd.send_error.producer_id = pid
        cmd.send_error.sequence_id = seq
        cmd.send_error.error = code
        cmd.send_error.message = message
        self.send_command(cmd)

    def _on_close_producer(self: ServerConnection, c: pb.CommandCloseProducer) -> None:  # type: ignore[misc]
        entry = self.producers.pop(c.producer_id, None)
        self.producer_futures.pop(c.producer_id, None)
        if entry is not None:
            producer, topic = entry
            topic.remove_producer(producer)
        self.send_success(c.request_id)

    def close_producer(self: ServerConnection, producer_id: int) -> None:  # type: ignore[misc]
        """Broker-initiated close: the client reconnects the producer."""
        self.producers.pop(producer_id, None)
        self.producer_futures.pop(producer_id, None)
        cmd = pb.BaseCommand(type=pb.BaseCommand.CLOSE_PRODUCER)
        cmd.close_producer.producer_id = producer_id
        cmd.close_producer.request_id = U64_MAX
        self.write(encode_command(cmd))
