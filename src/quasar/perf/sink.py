"""A null broker: the baseline that shows what the load generator can do by itself.

It speaks just enough of the Pulsar protocol for ``quasar perf`` with either client:
CONNECT, PING, PARTITIONED_METADATA (always 0 partitions), LOOKUP (always itself),
PRODUCER, SEND, SUBSCRIBE, FLOW, ACK, CLOSE_PRODUCER, CLOSE_CONSUMER. Anything else
that carries a request id gets an error answer.

A SEND is receipted at once, with no storage and no fsync, and its entry is handed
unchanged to every subscription of the topic that has a consumer, within the
consumer's permits (counted in messages, as the broker does). Entries that no
consumer can take yet wait in the subscription's backlog; when all backlogs hold more
than ``BACKLOG_HIGH_BYTES`` the sink stops reading from producers until they drain
below ``BACKLOG_LOW_BYTES``, so a slow consumer slows producers down instead of
filling memory. A topic without subscriptions drops what it receives. Acks are
ignored: nothing is ever redelivered.

This is a measuring instrument, not a broker: one process, in memory, no durability.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import signal
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from quasar.errors import QuasarError
from quasar.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    PROTOCOL_VERSION_MAX,
    FrameDecoder,
    encode_command,
    encode_message_frame,
    encode_send_receipt,
    pb,
)

__all__ = ["Sink", "serve"]

log = logging.getLogger(__name__)
T = pb.BaseCommand
SERVER_VERSION = "quasar-perf-sink"
BACKLOG_HIGH_BYTES = 64 * 1024 * 1024
BACKLOG_LOW_BYTES = 32 * 1024 * 1024
_LEDGER_ID = 1


@dataclass
class SinkConsumer:
    conn: SinkConnection
    consumer_id: int
    permits: int = 0


@dataclass
class Subscription:
    consumers: list[SinkConsumer] = field(default_factory=list)
    # (entry id, message count, entry bytes) not yet delivered.
    backlog: deque[tuple[int, int, bytes]] = field(default_factory=deque)


@dataclass
class SinkTopic:
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    next_entry_id: int = 0


class Sink:
    """The shared state of all connections: topics, backlog size, paused producers."""

    def __init__(self, service_url: str) -> None:
        self.service_url = service_url
        self.topics: dict[str, SinkTopic] = {}
        self.backlog_bytes = 0
        self.paused: set[SinkConnection] = set()
        self._names = itertools.count()

    def topic(self, name: str) -> SinkTopic:
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics[name] = SinkTopic()
        return topic

    def producer_name(self) -> str:
        return f"sink-{next(self._names)}"

    def publish(self, topic: SinkTopic, count: int, entry: bytes) -> tuple[int, int]:
        """Hand an entry to every subscription; its (ledger id, entry id)."""
        entry_id = topic.next_entry_id
        topic.next_entry_id += 1
        for sub in topic.subscriptions.values():
            if not sub.consumers:
                continue
            sub.backlog.append((entry_id, count, entry))
            self.backlog_bytes += len(entry)
            self.dispatch(sub)
        return _LEDGER_ID, entry_id

    def dispatch(self, sub: Subscription) -> None:
        backlog = sub.backlog
        for consumer in sub.consumers:
            conn = consumer.conn
            while backlog and consumer.permits > 0:
                entry_id, count, entry = backlog.popleft()
                self.backlog_bytes -= len(entry)
                consumer.permits -= count
                conn.write(
                    encode_message_frame(
                        consumer.consumer_id, _LEDGER_ID, entry_id, -1, 0, None, entry
                    )
                )
            if not backlog:
                break
        if self.paused and self.backlog_bytes < BACKLOG_LOW_BYTES:
            for paused in list(self.paused):
                paused.resume()
            self.paused.clear()

    def check_backlog(self, conn: SinkConnection) -> None:
        if self.backlog_bytes > BACKLOG_HIGH_BYTES and conn not in self.paused:
            self.paused.add(conn)
            conn.pause()


class SinkConnection(asyncio.Protocol):
    """One client connection to the sink."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.decoder = FrameDecoder(DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING)
        self.transport: Any = None
        self.producers: dict[int, SinkTopic] = {}
        self.consumers: dict[int, tuple[Subscription, SinkConsumer]] = {}
        self._out: list[bytes] | None = None

    # -- transport ---------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        for sub, consumer in self.consumers.values():
            if consumer in sub.consumers:
                sub.consumers.remove(consumer)
        self.consumers.clear()
        self.sink.paused.discard(self)

    def write(self, data: bytes) -> None:
        if self._out is not None:
            self._out.append(data)  # answered together at the end of data_received
        elif self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def pause(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        out: list[bytes] = []
        self._out = out
        try:
            for frame in self.decoder.feed(data):
                self.handle(frame.command, frame.payload)
        except QuasarError as exc:
            log.warning("closing a sink connection: %s", exc)
            self.transport.close()
        finally:
            self._out = None
            if out and not self.transport.is_closing():
                self.transport.write(b"".join(out))

    # -- commands ----------------------------------------------------------------------
    def send_command(self, cmd: Any) -> None:
        self.write(encode_command(cmd))

    def handle(self, cmd: Any, payload: bytes | None) -> None:
        kind = cmd.type
        if kind == T.SEND:
            self.on_send(cmd.send, payload)
        elif kind == T.FLOW:
            entry = self.consumers.get(cmd.flow.consumer_id)
            if entry is not None:
                sub, consumer = entry
                consumer.permits += cmd.flow.messagePermits
                self.sink.dispatch(sub)
        elif kind == T.ACK or kind == T.PONG:
            pass
        elif kind == T.PING:
            self.send_command(T(type=T.PONG, pong=pb.CommandPong()))
        elif kind == T.CONNECT:
            reply = T(type=T.CONNECTED)
            reply.connected.server_version = SERVER_VERSION
            reply.connected.protocol_version = min(
                PROTOCOL_VERSION_MAX, cmd.connect.protocol_version
            )
            reply.connected.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
            self.send_command(reply)
        elif kind == T.PARTITIONED_METADATA:
            reply = T(type=T.PARTITIONED_METADATA_RESPONSE)
            meta = reply.partitionMetadataResponse
            meta.request_id = cmd.partitionMetadata.request_id
            meta.partitions = 0
            meta.response = pb.CommandPartitionedTopicMetadataResponse.Success
            self.send_command(reply)
        elif kind == T.LOOKUP:
            reply = T(type=T.LOOKUP_RESPONSE)
            r = reply.lookupTopicResponse
            r.request_id = cmd.lookupTopic.request_id
            r.response = pb.CommandLookupTopicResponse.Connect
            r.brokerServiceUrl = self.sink.service_url
            r.authoritative = True
            self.send_command(reply)
        elif kind == T.PRODUCER:
            p = cmd.producer
            self.producers[p.producer_id] = self.sink.topic(p.topic)
            reply = T(type=T.PRODUCER_SUCCESS)
            s = reply.producer_success
            s.request_id = p.request_id
            s.producer_name = p.producer_name or self.sink.producer_name()
            s.last_sequence_id = -1
            self.send_command(reply)
        elif kind == T.SUBSCRIBE:
            s = cmd.subscribe
            topic = self.sink.topic(s.topic)
            sub = topic.subscriptions.setdefault(s.subscription, Subscription())
            consumer = SinkConsumer(self, s.consumer_id)
            sub.consumers.append(consumer)
            self.consumers[s.consumer_id] = (sub, consumer)
            self._success(s.request_id)
        elif kind == T.CLOSE_PRODUCER:
            self.producers.pop(cmd.close_producer.producer_id, None)
            self._success(cmd.close_producer.request_id)
        elif kind == T.CLOSE_CONSUMER:
            entry = self.consumers.pop(cmd.close_consumer.consumer_id, None)
            if entry is not None and entry[1] in entry[0].consumers:
                entry[0].consumers.remove(entry[1])
            self._success(cmd.close_consumer.request_id)
        else:
            self._unsupported(cmd)

    def on_send(self, send: Any, payload: bytes | None) -> None:
        topic = self.producers.get(send.producer_id)
        if topic is None or payload is None:
            reply = T(type=T.SEND_ERROR)
            e = reply.send_error
            e.producer_id, e.sequence_id = send.producer_id, send.sequence_id
            e.error, e.message = pb.NotAllowedError, "unknown producer"
            self.send_command(reply)
            return
        count = send.num_messages if send.HasField("num_messages") else 1
        ledger_id, entry_id = self.sink.publish(topic, count, payload)
        self.write(
            encode_send_receipt(
                send.producer_id,
                send.sequence_id,
                ledger_id,
                entry_id,
                send.highest_sequence_id,
            )
        )
        self.sink.check_backlog(self)

    def _success(self, request_id: int) -> None:
        self.send_command(
            T(type=T.SUCCESS, success=pb.CommandSuccess(request_id=request_id))
        )

    def _unsupported(self, cmd: Any) -> None:
        name = pb.BaseCommand.Type.Name(cmd.type)
        sub = None
        for field_desc, value in cmd.ListFields():
            if field_desc.name != "type":
                sub = value
        request_id = getattr(sub, "request_id", None) if sub is not None else None
        if request_id is None:
            log.debug("sink ignores %s", name)
            return
        reply = T(type=T.ERROR)
        reply.error.request_id = request_id
        reply.error.error = pb.NotAllowedError
        reply.error.message = f"{name} is not supported by the perf sink"
        self.send_command(reply)


async def run_sink(host: str, port: int, ready: asyncio.Event | None = None) -> None:
    """Serve until cancelled or SIGINT/SIGTERM."""
    loop = asyncio.get_running_loop()
    sink = Sink(f"pulsar://{host}:{port}")
    server = await loop.create_server(lambda: SinkConnection(sink), host, port)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (RuntimeError, ValueError):
            pass
    print(f"sink listening on pulsar://{host}:{port}", file=sys.stderr, flush=True)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        server.close()
        await server.wait_closed()


def serve(host: str, port: int) -> int:
    """Run the sink in this process (``quasar perf sink``); the exit status."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(run_sink(host, port))
    else:
        uvloop.run(run_sink(host, port))
    return 0
