"""A tiny in-process broker for client tests that need to control the broker's side.

It speaks just enough of the protocol for one consumer per topic and any producers:
CONNECT, PARTITIONED_METADATA, LOOKUP (always Connect to itself), PRODUCER, SEND
(stores the entry, answers SEND_RECEIPT), SUBSCRIBE, FLOW (dispatches stored entries
in order, counting permits in messages), ACK (individual and cumulative), REDELIVER,
GET_LAST_MESSAGE_ID, CLOSE_*, PING. Tests reach in to drop connections, send
CLOSE_PRODUCER, hold back receipts or inspect what arrived.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from quasar.client.connection import make_command
from quasar.protocol import (
    FrameDecoder,
    encode_command,
    encode_payload_command,
    parse_entry,
    pb,
)

T = pb.BaseCommand
U64 = 1 << 64


@dataclass
class FakeTopic:
    entries: list[bytes] = field(default_factory=list)
    acked: set[int] = field(default_factory=set)
    cursor: int = 0  # next entry to dispatch
    partitions: int = 0


class FakeConnection(asyncio.Protocol):
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.decoder = FrameDecoder(10 * 1024 * 1024)
        self.transport: asyncio.Transport | None = None
        self.consumers: dict[int, tuple[str, int]] = {}  # id -> (topic, permits)
        self.producers: dict[int, str] = {}

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.broker.connections.append(self)

    def connection_lost(self, exc: Exception | None) -> None:
        if self in self.broker.connections:
            self.broker.connections.remove(self)
        for topic, _ in self.consumers.values():
            # Everything unacked is redelivered to the next consumer.
            t = self.broker.topic(topic)
            t.cursor = min(
                [i for i in range(len(t.entries)) if i not in t.acked],
                default=len(t.entries),
            )

    def send(self, cmd: Any) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(encode_command(cmd))

    def data_received(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
            self.broker.received.append(frame.command)
            self.handle(frame.command, frame.payload)

    def handle(self, cmd: Any, payload: bytes | None) -> None:
        b = self.broker
        t = cmd.type
        if t == T.CONNECT:
            self.send(
                make_command(
                    T.CONNECTED,
                    "connected",
                    server_version="fake",
                    protocol_version=20,
                    max_message_size=5 * 1024 * 1024,
                )
            )
        elif t == T.PING:
            self.send(make_command(T.PONG, "pong"))
        elif t == T.PARTITIONED_METADATA:
            r = cmd.partitionMetadata
            parts = b.topic(r.topic).partitions if "-partition-" not in r.topic else 0
            self.send(
                make_command(
                    T.PARTITIONED_METADATA_RESPONSE,
                    "partitionMetadataResponse",
                    request_id=r.request_id,
                    partitions=parts,
                    response=0,
                )
            )
        elif t == T.LOOKUP:
            r = cmd.lookupTopic
            if b.redirects > 0:
                b.redirects -= 1
                self.send(
                    make_command(
                        T.LOOKUP_RESPONSE,
                        "lookupTopicResponse",
                        request_id=r.request_id,
                        response=0,
                        brokerServiceUrl=b.url,
                        authoritative=True,
                    )
                )
                return
            self.send(
                make_command(
                    T.LOOKUP_RESPONSE,
                    "lookupTopicResponse",
                    request_id=r.request_id,
                    response=1,
                    brokerServiceUrl=b.url,
                    authoritative=True,
                )
            )
        elif t == T.PRODUCER:
            p = cmd.producer
            self.producers[p.producer_id] = p.topic
            name = (
                p.producer_name
                if p.HasField("producer_name")
                else f"fake-{p.producer_id}"
            )
            self.send(
                make_command(
                    T.PRODUCER_SUCCESS,
                    "producer_success",
                    request_id=p.request_id,
                    producer_name=name,
                    last_sequence_id=b.last_sequence_id,
                )
            )
        elif t == T.SEND:
            assert payload is not None
            s = cmd.send
            if b.drop_sends:
                return
            topic = b.topic(self.producers[s.producer_id])
            topic.entries.append(payload)
            receipt = make_command(
                T.SEND_RECEIPT,
                "send_receipt",
                producer_id=s.producer_id,
                sequence_id=s.sequence_id,
            )
            receipt.send_receipt.message_id.ledgerId = 1
            receipt.send_receipt.message_id.entryId = len(topic.entries) - 1
            self.send(receipt)
            b.dispatch()
        elif t == T.SUBSCRIBE:
            s = cmd.subscribe
            self.consumers[s.consumer_id] = (s.topic, 0)
            self.send(make_command(T.SUCCESS, "success", request_id=s.request_id))
        elif t == T.FLOW:
            f = cmd.flow
            topic, permits = self.consumers[f.consumer_id]
            self.consumers[f.consumer_id] = (topic, permits + f.messagePermits)
            b.dispatch()
        elif t == T.ACK:
            a = cmd.ack
            topic = b.topic(self.consumers[a.consumer_id][0])
            for mid in a.message_id:
                entry = mid.entryId - U64 if mid.entryId >= 1 << 63 else mid.entryId
                if a.ack_type == pb.CommandAck.Cumulative:
                    topic.acked.update(range(entry + 1))
                elif not len(mid.ack_set):
                    topic.acked.add(entry)
        elif t == T.REDELIVER_UNACKNOWLEDGED_MESSAGES:
            topic = b.topic(
                self.consumers[cmd.redeliverUnacknowledgedMessages.consumer_id][0]
            )
            topic.cursor = min(
                [i for i in range(len(topic.entries)) if i not in topic.acked],
                default=len(topic.entries),
            )
            b.dispatch()
        elif t == T.GET_LAST_MESSAGE_ID:
            g = cmd.getLastMessageId
            topic = b.topic(self.consumers[g.consumer_id][0])
            resp = make_command(
                T.GET_LAST_MESSAGE_ID_RESPONSE,
                "getLastMessageIdResponse",
                request_id=g.request_id,
            )
            resp.getLastMessageIdResponse.last_message_id.ledgerId = 1
            resp.getLastMessageIdResponse.last_message_id.entryId = (
                len(topic.entries) - 1
            ) % U64
            self.send(resp)
        elif t in (T.CLOSE_PRODUCER, T.CLOSE_CONSUMER, T.UNSUBSCRIBE, T.SEEK):
            sub = {
                T.CLOSE_PRODUCER: cmd.close_producer,
                T.CLOSE_CONSUMER: cmd.close_consumer,
                T.UNSUBSCRIBE: cmd.unsubscribe,
                T.SEEK: cmd.seek,
            }[t]
            if t == T.CLOSE_PRODUCER:
                self.producers.pop(sub.producer_id, None)
            else:
                self.consumers.pop(sub.consumer_id, None)
            self.send(make_command(T.SUCCESS, "success", request_id=sub.request_id))


class FakeBroker:
    def __init__(self) -> None:
        self.topics: dict[str, FakeTopic] = {}
        self.connections: list[FakeConnection] = []
        self.received: list[Any] = []
        self.server: asyncio.AbstractServer | None = None
        self.url = ""
        self.drop_sends = False
        self.redirects = 0  # answer this many LOOKUPs with Redirect (to itself)
        self.last_sequence_id = -1

    def topic(self, name: str) -> FakeTopic:
        return self.topics.setdefault(name, FakeTopic())

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: FakeConnection(self), "127.0.0.1", 0
        )
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"pulsar://127.0.0.1:{port}"

    async def stop(self) -> None:
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def drop_all_connections(self) -> None:
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()

    def dispatch(self) -> None:
        for conn in self.connections:
            for cid, (topic_name, permits) in list(conn.consumers.items()):
                topic = self.topic(topic_name)
                while permits > 0 and topic.cursor < len(topic.entries):
                    index = topic.cursor
                    topic.cursor += 1
                    if index in topic.acked:
                        continue
                    entry = topic.entries[index]
                    md = parse_entry(entry).metadata
                    permits -= (
                        md.num_messages_in_batch
                        if md.HasField("num_messages_in_batch")
                        else 1
                    )
                    msg = make_command(T.MESSAGE, "message", consumer_id=cid)
                    msg.message.message_id.ledgerId = 1
                    msg.message.message_id.entryId = index
                    conn.transport.write(encode_payload_command(msg, entry))  # type: ignore[union-attr]
                conn.consumers[cid] = (topic_name, permits)

    def commands(self, type_: int) -> list[Any]:
        return [c for c in self.received if c.type == type_]
