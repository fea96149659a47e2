"""A small in-process broker for tests that need to control the broker's side.

It speaks just enough of the protocol for one consumer per topic and any producers:
CONNECT, PARTITIONED_METADATA, LOOKUP (always Connect to itself), PRODUCER, SEND
(stores the entry, answers SEND_RECEIPT), SUBSCRIBE, FLOW (dispatches entries in
order, counting permits in messages), ACK (individual and cumulative), REDELIVER,
GET_LAST_MESSAGE_ID, CLOSE_*, PING, and plays transaction coordinator
(:mod:`tests.fakes.coordinator`), with ACK_RESPONSE for acks with a request id.

Tests reach in to drop connections, send CLOSE_PRODUCER, hold back receipts or
coordinator answers, queue error answers, or inspect what arrived: every frame is
kept verbatim in ``frames`` (so a wire test can check a client's checksums and
payloads byte for byte) and its command in ``received``. A topic's ``deliveries`` are
prepared raw entries (any bytes, chosen entry ids and ack sets, deliberately corrupt
ones too) dispatched on FLOW ahead of the entries producers stored.

It runs on the test's event loop; :mod:`tests.fakes.threaded` runs it on a loop of
its own for blocking clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from quasar.protocol import (
    Frame,
    FrameDecoder,
    encode_command,
    encode_message_frame,
    encode_payload_command,
    parse_entry,
    pb,
)

from .coordinator import TXN_REQUESTS, FakeCoordinator

T = pb.BaseCommand
U64 = 1 << 64
TC_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"
# Every stored entry lives in this one ledger (prepared deliveries choose their own).
LEDGER_ID = 1


def command(type_: Any, field: str, **fields: Any) -> Any:
    """A ``BaseCommand`` of ``type_`` whose sub-message ``field`` gets ``fields``.

    The fake builds its answers itself rather than with the client's helpers, so the
    client under test never shapes what its broker says.
    """
    cmd = pb.BaseCommand(type=type_)
    sub = getattr(cmd, field)
    sub.SetInParent()
    for name, value in fields.items():
        setattr(sub, name, value)
    return cmd


@dataclass
class Delivery:
    """A prepared entry to push as a MESSAGE frame, exactly as given."""

    entry: bytes
    entry_id: int
    ack_set: list[int] | None = None  # indexes of a batch still to deliver (bit set)
    ledger_id: int = LEDGER_ID


@dataclass
class FakeTopic:
    entries: list[bytes] = field(default_factory=list)
    acked: set[int] = field(default_factory=set)
    cursor: int = 0  # next entry to dispatch
    partitions: int = 0
    deliveries: list[Delivery] = field(default_factory=list)  # sent once, first


class FakeConnection(asyncio.Protocol):
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.decoder = FrameDecoder(10 * 1024 * 1024)
        self.transport: asyncio.Transport | None = None
        self.consumers: dict[int, tuple[str, int]] = {}  # id -> (topic, permits)
        self.producers: dict[int, str] = {}
        self.mute = False  # drop everything written (the answer is "lost")

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.broker.connections.append(self)
        self.broker.changed()

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
        self.broker.changed()

    def send(self, cmd: Any) -> None:
        if self.mute:
            return
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(encode_command(cmd))

    def data_received(self, data: bytes) -> None:
        try:
            self.receive(data)
        except Exception as exc:
            # asyncio logs the error and closes the connection; keeping it lets a
            # test fail on a fake that could not handle what a client sent.
            self.broker.errors.append(exc)
            raise
        finally:
            self.broker.changed()

    def receive(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
            self.broker.frames.append(frame)
            self.broker.received.append(frame.command)
            drop = self.broker.drop_on.get(frame.command.type, 0)
            if drop:
                # Lose the connection on this command, after applying it or not.
                self.broker.drop_on[frame.command.type] = drop - 1
                if self.broker.apply_before_drop:
                    self.mute = True
                    self.handle(frame.command, frame.payload)
                if self.transport is not None:
                    self.transport.abort()
                return
            self.handle(frame.command, frame.payload)

    def handle_txn(self, cmd: Any) -> None:
        resp_type, req_field, resp_field = TXN_REQUESTS[cmd.type]
        error, message, fields = self.broker.coordinator.handle(cmd)
        out = command(resp_type, resp_field)
        resp = getattr(out, resp_field)
        resp.request_id = getattr(cmd, req_field).request_id
        for k, v in fields.items():
            setattr(resp, k, v)
        if error is not None:
            resp.error = error
            resp.message = message
        if cmd.type in self.broker.hold_txn_answers:
            self.broker.held.append(lambda: self.send(out))
        else:
            self.send(out)

    def handle(self, cmd: Any, payload: bytes | None) -> None:
        b = self.broker
        t = cmd.type
        if t == T.CONNECT:
            self.send(
                command(
                    T.CONNECTED,
                    "connected",
                    server_version="fake",
                    protocol_version=b.protocol_version,
                    max_message_size=5 * 1024 * 1024,
                )
            )
        elif t == T.PING:
            self.send(command(T.PONG, "pong"))
        elif t == T.PARTITIONED_METADATA:
            r = cmd.partitionMetadata
            parts = b.topic(r.topic).partitions if "-partition-" not in r.topic else 0
            self.send(
                command(
                    T.PARTITIONED_METADATA_RESPONSE,
                    "partitionMetadataResponse",
                    request_id=r.request_id,
                    partitions=parts,
                    response=0,
                )
            )
        elif t in TXN_REQUESTS:
            self.handle_txn(cmd)
        elif t == T.LOOKUP:
            r = cmd.lookupTopic
            owner = b.owners.get(r.topic, b.url)
            if b.redirects > 0:
                b.redirects -= 1
                self.send(
                    command(
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
                command(
                    T.LOOKUP_RESPONSE,
                    "lookupTopicResponse",
                    request_id=r.request_id,
                    response=1,
                    brokerServiceUrl=owner,
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
                command(
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
            if b.send_errors:
                self.send(
                    command(
                        T.SEND_ERROR,
                        "send_error",
                        producer_id=s.producer_id,
                        sequence_id=s.sequence_id,
                        error=b.send_errors.pop(0),
                        message="injected",
                    )
                )
                return
            topic = b.topic(self.producers[s.producer_id])
            topic.entries.append(payload)
            if s.HasField("txnid_most_bits"):
                txn = b.coordinator.txns.get((s.txnid_most_bits, s.txnid_least_bits))
                if txn is not None:
                    txn.sends.append(s)
            receipt = command(
                T.SEND_RECEIPT,
                "send_receipt",
                producer_id=s.producer_id,
                sequence_id=s.sequence_id,
            )
            receipt.send_receipt.message_id.ledgerId = LEDGER_ID
            receipt.send_receipt.message_id.entryId = len(topic.entries) - 1
            if b.hold_receipts:
                b.held.append(lambda: self.send(receipt))
            else:
                self.send(receipt)
            b.dispatch()
        elif t == T.SUBSCRIBE:
            s = cmd.subscribe
            self.consumers[s.consumer_id] = (s.topic, 0)
            self.send(command(T.SUCCESS, "success", request_id=s.request_id))
        elif t == T.FLOW:
            f = cmd.flow
            name, permits = self.consumers[f.consumer_id]
            self.consumers[f.consumer_id] = (name, permits + f.messagePermits)
            b.dispatch()
        elif t == T.ACK:
            a = cmd.ack
            if a.HasField("request_id"):
                self.answer_ack(a)
                if a.HasField("txnid_most_bits"):
                    return  # pending until the transaction ends: not applied here
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
            resp = command(
                T.GET_LAST_MESSAGE_ID_RESPONSE,
                "getLastMessageIdResponse",
                request_id=g.request_id,
            )
            resp.getLastMessageIdResponse.last_message_id.ledgerId = LEDGER_ID
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
            self.send(command(T.SUCCESS, "success", request_id=sub.request_id))

    def answer_ack(self, a: Any) -> None:
        b = self.broker
        resp = command(
            T.ACK_RESPONSE,
            "ackResponse",
            consumer_id=a.consumer_id,
            request_id=a.request_id,
        )
        if a.HasField("txnid_most_bits"):
            resp.ackResponse.txnid_most_bits = a.txnid_most_bits
            resp.ackResponse.txnid_least_bits = a.txnid_least_bits
            txn = b.coordinator.txns.get((a.txnid_most_bits, a.txnid_least_bits))
            if txn is not None:
                txn.acks.append(a)
        if b.ack_errors:
            resp.ackResponse.error = b.ack_errors.pop(0)
            resp.ackResponse.message = "injected"
        if b.hold_ack_responses:
            b.held.append(lambda: self.send(resp))
        else:
            self.send(resp)


class FakeBroker:
    def __init__(self) -> None:
        self.topics: dict[str, FakeTopic] = {}
        self.connections: list[FakeConnection] = []
        self.frames: list[Frame] = []  # every frame received, verbatim
        self.received: list[Any] = []  # the commands of those frames
        self.errors: list[Exception] = []  # what the fake failed on, see data_received
        self._waiters: set[asyncio.Event] = set()
        self.server: asyncio.AbstractServer | None = None
        self.url = ""
        self.drop_sends = False
        self.redirects = 0  # answer this many LOOKUPs with Redirect (to itself)
        self.last_sequence_id = -1
        self.protocol_version = 20  # in CONNECTED; TC_CLIENT_CONNECT needs > 18
        self.owners: dict[str, str] = {}  # LOOKUP answers: topic -> broker URL
        self.coordinator = FakeCoordinator()
        # command type -> how many of the next ones make the connection drop.
        self.drop_on: dict[int, int] = {}
        self.apply_before_drop = False
        self.hold_receipts = False  # keep SEND_RECEIPTs in `held` until released
        self.hold_ack_responses = False
        # Coordinator request types whose answers (applied already) wait in `held`.
        self.hold_txn_answers: set[int] = set()
        self.held: list[Callable[[], None]] = []
        self.ack_errors: list[int] = []  # ServerError codes for the next ACK_RESPONSEs
        self.send_errors: list[int] = []  # answer the next SENDs with SEND_ERROR(code)

    def topic(self, name: str) -> FakeTopic:
        return self.topics.setdefault(name, FakeTopic())

    def changed(self) -> None:
        """Wake the ``wait_until`` calls: a frame was handled or a connection came
        or went."""
        for waiter in self._waiters:
            waiter.set()

    async def wait_until(
        self, predicate: Callable[[], bool], timeout_s: float = 10.0
    ) -> bool:
        """Whether ``predicate`` (about the fake's state) held within ``timeout_s``.

        It is checked now and after every change, on the fake's loop, so it sees a
        consistent state without polling.
        """
        woken = asyncio.Event()
        self._waiters.add(woken)
        try:
            async with asyncio.timeout(timeout_s):
                while not predicate():
                    await woken.wait()
                    woken.clear()
            return True
        except TimeoutError:
            return False
        finally:
            self._waiters.discard(woken)

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
                while permits > 0 and topic.deliveries:
                    d = topic.deliveries.pop(0)
                    # Prepared entries may be corrupt on purpose: count their
                    # messages without checking the checksum.
                    permits -= _messages_in(d.entry, verify_checksum=False)
                    conn.transport.write(  # type: ignore[union-attr]
                        encode_message_frame(
                            cid, d.ledger_id, d.entry_id, -1, 0, d.ack_set, d.entry
                        )
                    )
                while permits > 0 and topic.cursor < len(topic.entries):
                    index = topic.cursor
                    topic.cursor += 1
                    if index in topic.acked:
                        continue
                    entry = topic.entries[index]
                    permits -= _messages_in(entry)
                    msg = command(T.MESSAGE, "message", consumer_id=cid)
                    msg.message.message_id.ledgerId = LEDGER_ID
                    msg.message.message_id.entryId = index
                    conn.transport.write(encode_payload_command(msg, entry))  # type: ignore[union-attr]
                conn.consumers[cid] = (topic_name, permits)

    def commands(self, type_: int) -> list[Any]:
        return [c for c in self.received if c.type == type_]

    def frames_of(self, type_: int) -> list[Frame]:
        return [f for f in self.frames if f.command.type == type_]

    def enable_transactions(self, coordinators: int = 1) -> None:
        """Make the coordinator-assign topic have ``coordinators`` partitions."""
        self.topic(TC_ASSIGN).partitions = coordinators

    def release_held(self) -> None:
        held, self.held = self.held, []
        for answer in held:
            answer()


def _messages_in(entry: bytes, verify_checksum: bool = True) -> int:
    """The permits an entry takes: its batch size, or 1."""
    md = parse_entry(entry, verify_checksum).metadata
    return md.num_messages_in_batch if md.HasField("num_messages_in_batch") else 1
