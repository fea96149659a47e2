"""A minimal in-test broker built only from quasar.protocol, for wire tests against
the official ``pulsar-client``.

It answers the handshake, lookups, producer and consumer commands on loopback,
stores every SEND payload verbatim, and on FLOW pushes a prepared list of entries as
MESSAGE frames. It is test scaffolding (threads and blocking sockets), not a broker.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field

from quasar.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    PROTOCOL_VERSION_MAX,
    Frame,
    FrameDecoder,
    encode_command,
    encode_message_frame,
    encode_send_receipt,
    pb,
)

T = pb.BaseCommand
LEDGER_ID = 77


@dataclass
class Delivery:
    entry: bytes
    entry_id: int
    ack_set: list[int] | None = None


@dataclass
class FakeBroker:
    deliveries: list[Delivery] = field(default_factory=list)
    stored: list[Frame] = field(default_factory=list)
    acks: list[pb.CommandAck] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"pulsar://127.0.0.1:{self._listener.getsockname()[1]}"
        self._changed = threading.Condition()
        self._conns: list[socket.socket] = []
        self._closing = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def wait_for(self, predicate: object, timeout: float = 10.0) -> bool:
        assert callable(predicate)
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def close(self) -> None:
        self._closing = True
        self._listener.close()
        for conn in list(self._conns):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder(DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING)
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                for frame in decoder.feed(data):
                    out = self._handle(frame)
                    if out:
                        conn.sendall(out)
        except OSError:
            return
        except BaseException as exc:  # surfaced by the test through .errors
            self.errors.append(exc)
            with self._changed:
                self._changed.notify_all()

    def _handle(self, frame: Frame) -> bytes:
        cmd = frame.command
        kind = cmd.type
        if kind == T.CONNECT:
            return encode_command(
                T(
                    type=T.CONNECTED,
                    connected=pb.CommandConnected(
                        server_version="quasar-protocol-test",
                        protocol_version=min(
                            PROTOCOL_VERSION_MAX, cmd.connect.protocol_version
                        ),
                        max_message_size=DEFAULT_MAX_MESSAGE_SIZE,
                    ),
                )
            )
        if kind == T.PARTITIONED_METADATA:
            return encode_command(
                T(
                    type=T.PARTITIONED_METADATA_RESPONSE,
                    partitionMetadataResponse=pb.CommandPartitionedTopicMetadataResponse(
                        request_id=cmd.partitionMetadata.request_id,
                        partitions=0,
                        response=pb.CommandPartitionedTopicMetadataResponse.Success,
                    ),
                )
            )
        if kind == T.LOOKUP:
            return encode_command(
                T(
                    type=T.LOOKUP_RESPONSE,
                    lookupTopicResponse=pb.CommandLookupTopicResponse(
                        request_id=cmd.lookupTopic.request_id,
                        response=pb.CommandLookupTopicResponse.Connect,
                        brokerServiceUrl=self.url,
                        authoritative=True,
                    ),
                )
            )
        if kind == T.PRODUCER:
            return encode_command(
                T(
                    type=T.PRODUCER_SUCCESS,
                    producer_success=pb.CommandProducerSuccess(
                        request_id=cmd.producer.request_id,
                        producer_name=cmd.producer.producer_name or "fake-0-1",
                        last_sequence_id=-1,
                    ),
                )
            )
        if kind == T.SEND:
            with self._changed:
                self.stored.append(frame)
                entry_id = len(self.stored) - 1
                self._changed.notify_all()
            return encode_send_receipt(
                cmd.send.producer_id, cmd.send.sequence_id, LEDGER_ID, entry_id
            )
        if kind == T.SUBSCRIBE:
            return self._success(cmd.subscribe.request_id)
        if kind == T.FLOW:
            out = [
                encode_message_frame(
                    cmd.flow.consumer_id,
                    LEDGER_ID,
                    d.entry_id,
                    -1,
                    0,
                    d.ack_set,
                    d.entry,
                )
                for d in self.deliveries
            ]
            self.deliveries = []
            return b"".join(out)
        if kind == T.ACK:
            with self._changed:
                self.acks.append(cmd.ack)
                self._changed.notify_all()
            return b""
        if kind == T.CLOSE_PRODUCER:
            return self._success(cmd.close_producer.request_id)
        if kind == T.CLOSE_CONSUMER:
            return self._success(cmd.close_consumer.request_id)
        if kind == T.PING:
            return encode_command(T(type=T.PONG, pong=pb.CommandPong()))
        return b""

    @staticmethod
    def _success(request_id: int) -> bytes:
        return encode_command(
            T(type=T.SUCCESS, success=pb.CommandSuccess(request_id=request_id))
        )
