"""A raw Pulsar connection for tests: quasar.protocol (sans-IO) over a blocking socket.

Tests use it to send exactly the frames they mean to, including malformed ones and
commands no client library sends (END_TXN_ON_PARTITION, ...). RawCoordinator speaks
the transaction-coordinator commands (TC_CLIENT_CONNECT, NEW_TXN, ..., END_TXN) on one;
RawTxnProducer is one connection that is both a coordinator client and a producer.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

from quasar.protocol import FrameDecoder, encode_command, encode_message, pb

T = pb.BaseCommand
_OPEN: list[Raw] = []


def close_all() -> None:
    """Close every connection opened so far (test teardown)."""
    while _OPEN:
        _OPEN.pop().close()


class Raw:
    """A raw Pulsar connection speaking through quasar.protocol (sans-IO) over a socket."""

    def __init__(self, port: int, tls: ssl.SSLContext | None = None) -> None:
        """``tls``: speak TLS (a broker's ``brokerServicePortTls``) with this context."""
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock = sock if tls is None else tls.wrap_socket(sock, server_hostname="localhost")
        _OPEN.append(self)
        self.decoder = FrameDecoder(16 * 1024 * 1024)
        self.pending: list[pb.BaseCommand] = []

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, cmd: pb.BaseCommand) -> None:
        self.sock.sendall(encode_command(cmd))

    def recv(self) -> pb.BaseCommand:
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by broker")
            self.pending.extend(f.command for f in self.decoder.feed(data))
        return self.pending.pop(0)

    def recv_type(self, type_: int) -> pb.BaseCommand:
        while True:
            cmd = self.recv()
            if cmd.type == type_:
                return cmd

    def is_closed_by_peer(self) -> bool:
        """True once the broker closed the connection (reads until EOF, bounded by timeout)."""
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True

    def connect(
        self, auth_method_name: str | None = None, auth_data: bytes | None = None
    ) -> pb.BaseCommand:
        """CONNECT, naming an authentication method (and its data) when given, and
        return the CONNECTED answer."""
        cmd = pb.BaseCommand(type=T.CONNECT)
        cmd.connect.client_version = "raw-test"
        cmd.connect.protocol_version = 20
        if auth_method_name is not None:
            cmd.connect.auth_method_name = auth_method_name
        if auth_data is not None:
            cmd.connect.auth_data = auth_data
        self.send(cmd)
        return self.recv_type(T.CONNECTED)

    def producer(self, topic: str, producer_id: int = 1, request_id: int = 1) -> pb.BaseCommand:
        cmd = pb.BaseCommand(type=T.PRODUCER)
        cmd.producer.topic = topic
        cmd.producer.producer_id = producer_id
        cmd.producer.request_id = request_id
        self.send(cmd)
        return self.recv()

    def close(self) -> None:
        self.sock.close()

    def request(self, cmd: pb.BaseCommand, response_type: int) -> pb.BaseCommand:
        """Send ``cmd`` and return the next command of ``response_type``."""
        self.send(cmd)
        return self.recv_type(response_type)


_TC_ANSWERS = {
    T.TC_CLIENT_CONNECT_RESPONSE: "tcClientConnectResponse",
    T.NEW_TXN_RESPONSE: "newTxnResponse",
    T.ADD_PARTITION_TO_TXN_RESPONSE: "addPartitionToTxnResponse",
    T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE: "addSubscriptionToTxnResponse",
    T.END_TXN_RESPONSE: "endTxnResponse",
}


class RawCoordinator:
    """Transaction-coordinator commands in raw frames over one :class:`Raw` connection.

    ``send_*`` sends a request and returns its request id; :meth:`wait` returns the
    answer to one request id (answers arriving meanwhile are kept, so requests can be
    pipelined). The other methods send and wait, returning the response protobuf
    (``CommandNewTxnResponse``, ...) unchecked: the tests assert on it. Other frames
    read while waiting are dropped, as by :meth:`Raw.request`. Given a port, it opens
    and CONNECTs its own :class:`Raw`.
    """

    def __init__(self, conn: Raw | int, first_request_id: int = 0) -> None:
        if isinstance(conn, int):
            conn = Raw(conn)
            conn.connect()
        self.raw = conn
        self.rid = first_request_id
        self.answers: dict[int, Any] = {}

    def next_request_id(self) -> int:
        """A fresh request id (shared with other requests the test sends on ``raw``)."""
        self.rid += 1
        return self.rid

    def wait(self, request_id: int) -> Any:
        """The coordinator's answer to ``request_id`` (its inner response message)."""
        while request_id not in self.answers:
            cmd = self.raw.recv()
            field = _TC_ANSWERS.get(cmd.type)
            if field is not None:
                answer = getattr(cmd, field)
                self.answers[answer.request_id] = answer
        return self.answers[request_id]

    def send_connect(self, tc_id: int) -> int:
        cmd = T(type=T.TC_CLIENT_CONNECT_REQUEST)
        c = cmd.tcClientConnectRequest
        c.request_id, c.tc_id = self.next_request_id(), tc_id
        self.raw.send(cmd)
        return c.request_id

    def send_new_txn(
        self, tc_id: int = 0, ttl_ms: int | None = 60_000, client_name: str | None = None
    ) -> int:
        """NEW_TXN; ``ttl_ms=None`` leaves the timeout unset."""
        cmd = T(type=T.NEW_TXN)
        c = cmd.newTxn
        c.request_id, c.tc_id = self.next_request_id(), tc_id
        if ttl_ms is not None:
            c.txn_ttl_seconds = ttl_ms  # milliseconds, as the Java client sends
        if client_name is not None:
            c.client_name = client_name
        self.raw.send(cmd)
        return c.request_id

    def send_add_partition(self, most: int, least: int, topic: str) -> int:
        cmd = T(type=T.ADD_PARTITION_TO_TXN)
        c = cmd.addPartitionToTxn
        c.request_id, c.txnid_most_bits, c.txnid_least_bits = self.next_request_id(), most, least
        c.partitions.append(topic)
        self.raw.send(cmd)
        return c.request_id

    def send_add_subscription(self, most: int, least: int, topic: str, sub: str) -> int:
        cmd = T(type=T.ADD_SUBSCRIPTION_TO_TXN)
        c = cmd.addSubscriptionToTxn
        c.request_id, c.txnid_most_bits, c.txnid_least_bits = self.next_request_id(), most, least
        c.subscription.append(pb.Subscription(topic=topic, subscription=sub))
        self.raw.send(cmd)
        return c.request_id

    def send_end(self, most: int, least: int, action: int, client_name: str | None = None) -> int:
        cmd = T(type=T.END_TXN)
        c = cmd.endTxn
        c.request_id, c.txnid_most_bits, c.txnid_least_bits = self.next_request_id(), most, least
        c.txn_action = action
        if client_name is not None:
            c.client_name = client_name
        self.raw.send(cmd)
        return c.request_id

    def connect(self, tc_id: int) -> pb.CommandTcClientConnectResponse:
        return self.wait(self.send_connect(tc_id))  # type: ignore[no-any-return]

    def new_txn(
        self, tc_id: int = 0, ttl_ms: int | None = 60_000, client_name: str | None = None
    ) -> pb.CommandNewTxnResponse:
        return self.wait(self.send_new_txn(tc_id, ttl_ms, client_name))  # type: ignore[no-any-return]

    def add_partition(self, most: int, least: int, topic: str) -> pb.CommandAddPartitionToTxnResponse:
        return self.wait(self.send_add_partition(most, least, topic))  # type: ignore[no-any-return]

    def add_subscription(
        self, most: int, least: int, topic: str, sub: str
    ) -> pb.CommandAddSubscriptionToTxnResponse:
        return self.wait(self.send_add_subscription(most, least, topic, sub))  # type: ignore[no-any-return]

    def end(
        self, most: int, least: int, action: int, client_name: str | None = None
    ) -> pb.CommandEndTxnResponse:
        return self.wait(self.send_end(most, least, action, client_name))  # type: ignore[no-any-return]


class RawTxnProducer:
    """One raw connection that is a transaction-coordinator client (``tc``) and a
    producer of ``topic`` (producer id 1)."""

    def __init__(self, port: int, topic: str, producer_name: str = "raw-txn") -> None:
        self.tc = RawCoordinator(port, first_request_id=1000)
        self.raw: Raw = self.tc.raw
        self.topic = topic
        self.producer_name = producer_name
        self.seq = 0
        assert not self.tc.connect(0).HasField("error")
        answer = self.raw.producer(topic, producer_id=1, request_id=self.tc.next_request_id())
        assert answer.type == T.PRODUCER_SUCCESS, answer

    def new_txn(self, ttl_ms: int | None = 60_000, *, add_topic: bool = True) -> tuple[int, int]:
        """A new transaction on coordinator 0, with the producer's topic added to it
        unless ``add_topic`` is False (a test that registers partitions itself)."""
        r = self.tc.new_txn(0, ttl_ms=ttl_ms)
        assert not r.HasField("error"), r.message
        txn = (r.txnid_most_bits, r.txnid_least_bits)
        if add_topic:
            assert not self.tc.add_partition(*txn, self.topic).HasField("error")
        return txn

    def send(self, payload: bytes, txn: tuple[int, int] | None = None) -> pb.BaseCommand:
        """Send one message (inside ``txn`` if given); the SEND_RECEIPT or SEND_ERROR."""
        cmd = T(type=T.SEND)
        cmd.send.producer_id = 1
        cmd.send.sequence_id = self.seq
        md = pb.MessageMetadata(
            producer_name=self.producer_name, sequence_id=self.seq, publish_time=1
        )
        if txn is not None:
            cmd.send.txnid_most_bits, cmd.send.txnid_least_bits = txn
            md.txnid_most_bits, md.txnid_least_bits = txn
        self.seq += 1
        self.raw.send_bytes(encode_message(cmd, md, payload))
        while True:
            answer = self.raw.recv()
            if answer.type in (T.SEND_RECEIPT, T.SEND_ERROR):
                return answer

    def end(self, txn: tuple[int, int], action: int) -> pb.CommandEndTxnResponse:
        return self.tc.end(*txn, action)
