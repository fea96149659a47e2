"""Protocol violations against a real broker: a command clients never send (the
broker's own response types, a second CONNECT, an unasked AUTH_RESPONSE), a command
before CONNECT, a frame missing a required field. Each closes that connection only; a
new connection is served and the broker logs no traceback. A CONNECT with odd but
well-formed fields is served."""

from __future__ import annotations

import pytest

from quasar.protocol import encode_command, encode_payload_command, pb
from quasar.protocol._wire import U32
from quasar.testing.hostile import HostileClient, LogWatch, topic_name
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw

from ._commands import (
    T,
)

pytestmark = pytest.mark.usefixtures("close_raw")


# Commands the broker sends and never accepts, by their BaseCommand field; a second
# CONNECT after CONNECTED; AUTH_RESPONSE on a broker without authentication.
VIOLATIONS = {
    T.CONNECT: "connect",
    T.CONNECTED: "connected",
    T.SEND_RECEIPT: "send_receipt",
    T.SUCCESS: "success",
    T.ERROR: "error",
    T.PRODUCER_SUCCESS: "producer_success",
    T.MESSAGE: "message",
    T.LOOKUP_RESPONSE: "lookupTopicResponse",
    T.ACK_RESPONSE: "ackResponse",
    T.AUTH_CHALLENGE: "authChallenge",
    T.AUTH_RESPONSE: "authResponse",
    T.NEW_TXN_RESPONSE: "newTxnResponse",
    T.REACHED_END_OF_TOPIC: "reachedEndOfTopic",
    T.ACTIVE_CONSUMER_CHANGE: "active_consumer_change",
    T.GET_SCHEMA_RESPONSE: "getSchemaResponse",
}


@pytest.mark.parametrize("type_", list(VIOLATIONS), ids=lambda t: T.Type.Name(t))
def test_a_command_clients_never_send_closes_only_that_connection(
    broker: BrokerProcess, type_: int
) -> None:
    watch = LogWatch(broker.log_path)
    victim = HostileClient(broker.port)
    bystander = HostileClient(broker.port)
    victim.raw.send_bytes(_frame_of_type(type_))
    assert victim.raw.is_closed_by_peer()
    bystander.ping()
    HostileClient(broker.port).ping()
    assert watch.unexpected_failures() == [], watch.new_text()


def _frame_of_type(type_: int) -> bytes:
    """A frame of ``type_`` whose sub-message has every required field set."""
    cmd = T(type=type_)
    sub = getattr(cmd, VIOLATIONS[type_])
    _fill_required(sub)
    sub.SetInParent()
    return encode_payload_command(cmd, b"") if type_ == T.MESSAGE else encode_command(cmd)


def _fill_required(msg: object) -> None:
    for field in msg.DESCRIPTOR.fields:  # type: ignore[attr-defined]
        if not field.is_required:
            continue
        if field.message_type is not None:
            _fill_required(getattr(msg, field.name))
        elif field.type == field.TYPE_STRING:
            setattr(msg, field.name, "x")
        elif field.type == field.TYPE_BYTES:
            setattr(msg, field.name, b"x")
        elif field.enum_type is not None:
            setattr(msg, field.name, field.enum_type.values[0].number)
        else:
            setattr(msg, field.name, 1)


def test_a_command_before_connect_closes_only_that_connection(broker: BrokerProcess) -> None:
    watch = LogWatch(broker.log_path)
    raw = Raw(broker.port)
    raw.send(T(type=T.PING))
    assert raw.is_closed_by_peer()
    HostileClient(broker.port).ping()
    assert watch.unexpected_failures() == [], watch.new_text()


def test_a_frame_missing_a_required_field_closes_only_that_connection(
    broker: BrokerProcess,
) -> None:
    """Required fields are part of the frame's shape: without one the frame cannot
    be read as the command it claims to be."""
    watch = LogWatch(broker.log_path)
    victim = HostileClient(broker.port)
    # BaseCommand{type=LOOKUP, lookupTopic{topic="t"}}: request_id (required) missing.
    lookup = pb.CommandLookupTopic(topic="t").SerializePartialToString()
    body = b"\x08" + bytes([T.LOOKUP]) + b"\xba\x01" + bytes([len(lookup)]) + lookup
    victim.raw.send_bytes(U32.pack(len(body) + 4) + U32.pack(len(body)) + body)
    assert victim.raw.is_closed_by_peer()
    HostileClient(broker.port).ping()
    assert watch.unexpected_failures() == [], watch.new_text()


@pytest.mark.parametrize(
    "fields",
    [
        {"protocol_version": -5},
        {"protocol_version": 2**31 - 1},
        {"client_version": "v" * 100_000},
        {"auth_method_name": "token", "auth_data": b"\xff" * 1000},
        {"proxy_to_broker_url": "pulsar://elsewhere:1"},
        {"original_principal": "root", "original_auth_data": "x"},
    ],
    ids=["negative-version", "huge-version", "long-client-version", "auth-when-off",
         "proxy-url", "original-principal"],
)
def test_connect_with_odd_fields_is_served(
    broker: BrokerProcess, fields: dict[str, object]
) -> None:
    """A broker without authentication ignores what it does not use in CONNECT; the
    connection then works as any other."""
    watch = LogWatch(broker.log_path)
    raw = Raw(broker.port)
    cmd = T(type=T.CONNECT)
    cmd.connect.client_version, cmd.connect.protocol_version = "odd", 20
    for key, value in fields.items():
        setattr(cmd.connect, key, value)
    raw.send(cmd)
    assert raw.recv().type == T.CONNECTED
    topic = topic_name()
    assert raw.producer(topic, 1, 1).type == T.PRODUCER_SUCCESS
    raw.send(T(type=T.PING))
    raw.recv_type(T.PONG)
    assert watch.unexpected_failures() == [], watch.new_text()
