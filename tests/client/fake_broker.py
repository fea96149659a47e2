"""A tiny in-process broker for client tests that need to control the broker's side.

It speaks just enough of the protocol for one consumer per topic and any producers:
CONNECT, PARTITIONED_METADATA, LOOKUP (always Connect to itself), PRODUCER, SEND
(stores the entry, answers SEND_RECEIPT), SUBSCRIBE, FLOW (dispatches stored entries
in order, counting permits in messages), ACK (individual and cumulative), REDELIVER,
GET_LAST_MESSAGE_ID, CLOSE_*, PING. Tests reach in to drop connections, send
CLOSE_PRODUCER, hold back receipts (or coordinator answers) or inspect what arrived.

It also plays transaction coordinator (:class:`FakeCoordinator`): TC_CLIENT_CONNECT,
NEW_TXN, ADD_PARTITION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN and END_TXN with Pulsar's
answers (TransactionNotFound for unknown transactions, InvalidTxnStatus for the
opposite end; with ``preserve``, PIP-255 answers from the ended transactions kept per
client name), ACK_RESPONSE for acks with a request id, and fault injection: queued
error answers per command type, connections dropped on a command (before or after
applying it), receipts held back, coordinators not hosted here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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
TC_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"

# request type -> (response type, request field, response field)
TXN_REQUESTS: dict[int, tuple[int, str, str]] = {
    T.TC_CLIENT_CONNECT_REQUEST: (
        T.TC_CLIENT_CONNECT_RESPONSE,
        "tcClientConnectRequest",
        "tcClientConnectResponse",
    ),
    T.NEW_TXN: (T.NEW_TXN_RESPONSE, "newTxn", "newTxnResponse"),
    T.ADD_PARTITION_TO_TXN: (
        T.ADD_PARTITION_TO_TXN_RESPONSE,
        "addPartitionToTxn",
        "addPartitionToTxnResponse",
    ),
    T.ADD_SUBSCRIPTION_TO_TXN: (
        T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE,
        "addSubscriptionToTxn",
        "addSubscriptionToTxnResponse",
    ),
    T.END_TXN: (T.END_TXN_RESPONSE, "endTxn", "endTxnResponse"),
}


@dataclass
class FakeTxn:
    status: str = "OPEN"  # OPEN, COMMITTED, ABORTED
    ttl_ms: int = 0
    client_name: str = ""  # PIP-255 client_name of NEW_TXN ("" when absent)
    partitions: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    acks: list[Any] = field(default_factory=list)  # CommandAck received in the txn
    sends: list[Any] = field(default_factory=list)  # CommandSend received in the txn


class FakeCoordinator:
    """The transaction coordinators hosted by one fake broker."""

    def __init__(self) -> None:
        self.enabled = True  # False: NotAllowedError to everything, like today's broker
        self.hosted: set[int] | None = None  # coordinator ids hosted here (None: all)
        self.txns: dict[tuple[int, int], FakeTxn] = {}
        self.next_seq: dict[int, int] = {}
        # Pulsar today forgets ended transactions (a repeated END_TXN then gets
        # TransactionNotFound); False keeps them and answers the same action again
        # with success, as quasar's idempotent coordinator will.
        self.forget_ended = False
        # request type -> ServerError codes to answer the next requests with, in order.
        self.errors: dict[int, list[int]] = {}
        # PIP-255 preserver: with forget_ended, an ended transaction's outcome is kept
        # here (txn key -> (client name, status)) when preserve is on, and a repeated
        # END_TXN carrying the same client name is answered from it.
        self.preserve = False
        self.preserved: dict[tuple[int, int], tuple[str, str]] = {}

    def handle(self, cmd: Any) -> tuple[int | None, str, dict[str, Any]]:
        """(error code or None, error message, response fields) for a request."""
        t = cmd.type
        req = getattr(cmd, TXN_REQUESTS[t][1])
        queued = self.errors.get(t)
        if queued:
            return queued.pop(0), "injected", {}
        if not self.enabled:
            return pb.NotAllowedError, "Transactions are not enabled", {}
        if t == T.TC_CLIENT_CONNECT_REQUEST:
            if self.hosted is not None and req.tc_id not in self.hosted:
                return pb.TransactionCoordinatorNotFound, "not here", {}
            return None, "", {}
        if t == T.NEW_TXN:
            tc = req.tc_id
            if self.hosted is not None and tc not in self.hosted:
                return pb.TransactionCoordinatorNotFound, "not here", {}
            seq = self.next_seq.get(tc, 0)
            self.next_seq[tc] = seq + 1
            self.txns[(tc, seq)] = FakeTxn(
                ttl_ms=req.txn_ttl_seconds, client_name=req.client_name
            )
            return None, "", {"txnid_most_bits": tc, "txnid_least_bits": seq}
        key = (req.txnid_most_bits, req.txnid_least_bits)
        ids = {"txnid_most_bits": key[0], "txnid_least_bits": key[1]}
        txn = self.txns.get(key)
        if txn is None:
            kept = self.preserved.get(key)
            if t == T.END_TXN and kept is not None and req.client_name == kept[0]:
                target = "COMMITTED" if req.txn_action == pb.COMMIT else "ABORTED"
                if kept[1] == target:
                    return None, "", ids
                return pb.InvalidTxnStatus, f"{key} is {kept[1]}", ids
            return pb.TransactionNotFound, f"transaction {key} not found", ids
        if t == T.END_TXN:
            target = "COMMITTED" if req.txn_action == pb.COMMIT else "ABORTED"
            if txn.status == "OPEN":
                txn.status = target
                if self.forget_ended:
                    del self.txns[key]
                    if self.preserve and txn.client_name:
                        self.preserved[key] = (txn.client_name, target)
                return None, "", ids
            if txn.status == target:
                return None, "", ids
            return pb.InvalidTxnStatus, f"{key} is {txn.status}", ids
        if txn.status != "OPEN":
            return pb.InvalidTxnStatus, f"{key} is {txn.status}", ids
        if t == T.ADD_PARTITION_TO_TXN:
            txn.partitions.extend(req.partitions)
        else:
            txn.subscriptions.extend((s.topic, s.subscription) for s in req.subscription)
        return None, "", ids


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
        self.mute = False  # drop everything written (the answer is "lost")

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
        if self.mute:
            return
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(encode_command(cmd))

    def data_received(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
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
        out = pb.BaseCommand(type=resp_type)
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
                make_command(
                    T.CONNECTED,
                    "connected",
                    server_version="fake",
                    protocol_version=b.protocol_version,
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
        elif t in TXN_REQUESTS:
            self.handle_txn(cmd)
        elif t == T.LOOKUP:
            r = cmd.lookupTopic
            owner = b.owners.get(r.topic, b.url)
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
            if b.send_errors:
                self.send(
                    make_command(
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
            receipt = make_command(
                T.SEND_RECEIPT,
                "send_receipt",
                producer_id=s.producer_id,
                sequence_id=s.sequence_id,
            )
            receipt.send_receipt.message_id.ledgerId = 1
            receipt.send_receipt.message_id.entryId = len(topic.entries) - 1
            if b.hold_receipts:
                b.held.append(lambda: self.send(receipt))
            else:
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

    def answer_ack(self, a: Any) -> None:
        b = self.broker
        resp = make_command(
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
        self.received: list[Any] = []
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

    def enable_transactions(self, coordinators: int = 1) -> None:
        """Make the coordinator-assign topic have ``coordinators`` partitions."""
        self.topic(TC_ASSIGN).partitions = coordinators

    def release_held(self) -> None:
        held, self.held = self.held, []
        for answer in held:
            answer()
