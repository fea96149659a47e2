"""Bad input against a real broker process: each bad connection is refused or closed,
everyone else keeps being served, and nothing already stored is lost."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from quasar.protocol import (
    encode_message,
    pb,
)
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, close_all

T = pb.BaseCommand


@pytest.fixture(autouse=True)
def _close_raw_connections() -> Iterator[None]:
    yield
    close_all()


def send_frame(producer_id: int, seq: int, payload: bytes, corrupt_crc: bool = False) -> bytes:
    cmd = pb.BaseCommand(type=T.SEND)
    cmd.send.producer_id = producer_id
    cmd.send.sequence_id = seq
    md = pb.MessageMetadata(producer_name="raw", sequence_id=seq, publish_time=1)
    frame = bytearray(encode_message(cmd, md, payload))
    if corrupt_crc:
        frame[-1] ^= 0xFF  # flip a payload byte after the checksum was computed
    return bytes(frame)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("bad") / "data").start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def _healthy(broker: BrokerProcess, topic: str, expect: list[bytes]) -> None:
    """A fresh connection can still read everything stored on ``topic``."""
    r = Raw(broker.port)
    r.connect()
    sub = pb.BaseCommand(type=T.SUBSCRIBE)
    s = sub.subscribe
    s.topic, s.subscription, s.subType, s.consumer_id, s.request_id = topic, "check", 0, 7, 70
    s.durable = False
    s.start_message_id.ledgerId = (1 << 64) - 1
    s.start_message_id.entryId = (1 << 64) - 1
    r.send(sub)
    assert r.recv_type(T.SUCCESS).success.request_id == 70
    flow = pb.BaseCommand(type=T.FLOW)
    flow.flow.consumer_id, flow.flow.messagePermits = 7, 1000
    r.send(flow)
    got = []
    while len(got) < len(expect):
        frames = []
        while not frames:
            data = r.sock.recv(65536)
            assert data, "broker closed a healthy connection"
            frames = r.decoder.feed(data)
        for f in frames:
            if f.command.type == T.MESSAGE:
                assert f.payload is not None
                got.append(f.payload[-len(expect[len(got)]):])
    assert got == expect
    r.close()


@pytest.fixture(scope="module")
def stored(broker: BrokerProcess) -> tuple[str, list[bytes]]:
    """A topic with data written before any bad input arrives."""
    topic = "persistent://public/default/bad-input-survivor"
    r = Raw(broker.port)
    r.connect()
    assert r.producer(topic).type == T.PRODUCER_SUCCESS
    payloads = [f"keep-{i}".encode() for i in range(5)]
    for i, p in enumerate(payloads):
        r.send_bytes(send_frame(1, i, p))
        assert r.recv_type(T.SEND_RECEIPT).send_receipt.sequence_id == i
    r.close()
    return topic, payloads


GARBAGE = [
    pytest.param(b"\x00\x00\x00\x08\x00\x00\x00\x04\xff\xff\xff\xff", id="undecodable-command"),
    pytest.param(b"\x00\x00\x00\x04\x00\x00\x00\x09", id="command-size-beyond-frame"),
    pytest.param(struct.pack(">I", 512 * 1024 * 1024), id="oversize-frame"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http-on-binary-port"),
]


@pytest.mark.parametrize("garbage", GARBAGE)
def test_malformed_frames_close_only_that_connection(
    broker: BrokerProcess, stored: tuple[str, list[bytes]], garbage: bytes
) -> None:
    bystander = Raw(broker.port)
    bystander.connect()
    bad = Raw(broker.port)
    bad.connect()
    bad.send_bytes(garbage)
    assert bad.is_closed_by_peer()
    ping = pb.BaseCommand(type=T.PING, ping=pb.CommandPing())
    bystander.send(ping)
    assert bystander.recv_type(T.PONG).type == T.PONG
    _healthy(broker, *stored)


def test_command_before_connect_closes(broker: BrokerProcess) -> None:
    r = Raw(broker.port)
    r.send(pb.BaseCommand(type=T.PING, ping=pb.CommandPing()))
    assert r.is_closed_by_peer()


def test_truncated_frame_then_disconnect_is_harmless(
    broker: BrokerProcess, stored: tuple[str, list[bytes]]
) -> None:
    r = Raw(broker.port)
    r.connect()
    whole = send_frame(1, 0, b"x" * 100)
    r.send_bytes(whole[: len(whole) // 2])
    r.close()
    _healthy(broker, *stored)


def test_server_only_command_from_client_closes(broker: BrokerProcess) -> None:
    r = Raw(broker.port)
    r.connect()
    cmd = pb.BaseCommand(type=T.SEND_RECEIPT)
    cmd.send_receipt.producer_id = 1
    cmd.send_receipt.sequence_id = 1
    r.send(cmd)
    assert r.is_closed_by_peer()


def test_checksum_mismatch_gets_send_error_and_connection_stays(broker: BrokerProcess) -> None:
    r = Raw(broker.port)
    r.connect()
    topic = "persistent://public/default/bad-crc"
    assert r.producer(topic).type == T.PRODUCER_SUCCESS
    r.send_bytes(send_frame(1, 0, b"corrupted", corrupt_crc=True))
    err = r.recv_type(T.SEND_ERROR).send_error
    assert (err.sequence_id, err.error) == (0, pb.ChecksumError)
    r.send_bytes(send_frame(1, 1, b"fine"))
    assert r.recv_type(T.SEND_RECEIPT).send_receipt.sequence_id == 1
    _healthy(broker, topic, [b"fine"])


def test_send_for_unknown_producer_is_refused(broker: BrokerProcess) -> None:
    r = Raw(broker.port)
    r.connect()
    r.send_bytes(send_frame(99, 5, b"orphan"))
    err = r.recv_type(T.SEND_ERROR).send_error
    assert (err.producer_id, err.sequence_id, err.error) == (99, 5, pb.NotAllowedError)


def test_oversize_message_is_refused(broker: BrokerProcess) -> None:
    r = Raw(broker.port)
    r.connect()
    assert r.producer("persistent://public/default/too-big").type == T.PRODUCER_SUCCESS
    r.send_bytes(send_frame(1, 0, b"x" * (5 * 1024 * 1024 + 1024)))
    err = r.recv_type(T.SEND_ERROR).send_error
    assert err.error == pb.NotAllowedError and "maxMessageSize" in err.message


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        ("persistent://public/no-such-namespace/t", pb.TopicNotFound),
        ("persistent://bad tenant!/ns/t", pb.InvalidTopicName),
        ("two/tokens", pb.InvalidTopicName),
    ],
)
def test_producer_on_bad_topic_gets_error(broker: BrokerProcess, topic: str, code: int) -> None:
    r = Raw(broker.port)
    r.connect()
    answer = r.producer(topic)
    assert answer.type == T.ERROR
    assert answer.error.error == code and answer.error.request_id == 1


def test_wrong_state_commands_get_errors_not_crashes(broker: BrokerProcess) -> None:
    r = Raw(broker.port)
    r.connect()
    # FLOW and ACK for consumers that do not exist are ignored or answered.
    flow = pb.BaseCommand(type=T.FLOW)
    flow.flow.consumer_id, flow.flow.messagePermits = 42, 10
    r.send(flow)
    ack = pb.BaseCommand(type=T.ACK)
    ack.ack.consumer_id, ack.ack.ack_type, ack.ack.request_id = 42, 0, 5
    ack.ack.message_id.add(ledgerId=1, entryId=1)
    r.send(ack)
    resp = r.recv_type(T.ACK_RESPONSE).ackResponse
    assert resp.request_id == 5 and resp.error == pb.ConsumerNotFound
    # UNSUBSCRIBE, SEEK and GET_LAST_MESSAGE_ID for an unknown consumer.
    unsub = pb.BaseCommand(type=T.UNSUBSCRIBE)
    unsub.unsubscribe.consumer_id, unsub.unsubscribe.request_id = 42, 6
    r.send(unsub)
    assert r.recv_type(T.ERROR).error.error == pb.ConsumerNotFound
    last = pb.BaseCommand(type=T.GET_LAST_MESSAGE_ID)
    last.getLastMessageId.consumer_id, last.getLastMessageId.request_id = 42, 7
    r.send(last)
    assert r.recv_type(T.ERROR).error.request_id == 7
    # A duplicate producer id on one connection while the first is live.
    topic = "persistent://public/default/dup-producer-id"
    assert r.producer(topic, producer_id=3, request_id=8).type == T.PRODUCER_SUCCESS
    again = r.producer(topic, producer_id=3, request_id=9)
    assert again.type in (T.PRODUCER_SUCCESS, T.ERROR)
    # Still alive and answering.
    r.send(pb.BaseCommand(type=T.PING, ping=pb.CommandPing()))
    assert r.recv_type(T.PONG).type == T.PONG


def test_transaction_commands_get_typed_errors(broker: BrokerProcess) -> None:
    r = Raw(broker.port)
    r.connect()
    cmd = pb.BaseCommand(type=T.NEW_TXN)
    cmd.newTxn.request_id = 11
    cmd.newTxn.tc_id = 0
    r.send(cmd)
    resp = r.recv_type(T.NEW_TXN_RESPONSE).newTxnResponse
    assert resp.request_id == 11 and resp.HasField("error")


def test_broker_log_has_no_tracebacks(broker: BrokerProcess, stored: tuple[str, list[bytes]]) -> None:
    # Runs last in this module: all the bad input above was logged as warnings, not bugs.
    _healthy(broker, *stored)
    log = broker.read_log()
    assert "Traceback" not in log, log[-4000:]


__all__ = ["Path"]
