"""PRODUCER, SEND and CLOSE_PRODUCER with hostile fields against a real broker: each
bad request gets Pulsar's error on that request (``SEND_ERROR`` for a SEND), the
connection stays open, and the broker logs no traceback (the ``client`` fixture checks
both after every test)."""

from __future__ import annotations

import pytest

from quasar.errors import ServerError
from quasar.protocol import encode_command, encode_payload_command, make_entry, pb
from quasar.protocol._wire import U32
from quasar.testing.hostile import HostileClient, LogWatch, topic_name
from quasar.testing.process import BrokerProcess

from ._commands import (
    U64_MAX,
    UNKNOWN,
    T,
    error_of,
    flow,
    new_txn,
    not_unknown,
    subscribe_cmd,
)

pytestmark = pytest.mark.usefixtures("close_raw")


def test_producer_id_reused_for_another_topic_is_busy_or_answered_again(
    client: HostileClient,
) -> None:
    pid = client.producer(topic_name())
    answer = client.raw.producer(topic_name(), producer_id=pid, request_id=client.new_id())
    # A second PRODUCER with a live id is a retry: Pulsar answers it again.
    assert answer.type in (T.PRODUCER_SUCCESS, T.ERROR)
    if answer.type == T.ERROR:
        assert answer.error.error == ServerError.ProducerBusy


@pytest.mark.parametrize("producer_id", [0, U64_MAX])
def test_producer_ids_at_the_ends_of_the_range_are_served(
    client: HostileClient, producer_id: int
) -> None:
    answer = client.raw.producer(topic_name(), producer_id=producer_id, request_id=U64_MAX)
    assert answer.type == T.PRODUCER_SUCCESS
    assert answer.producer_success.request_id == U64_MAX


def test_producer_in_a_namespace_that_does_not_exist(client: HostileClient) -> None:
    answer = client.raw.producer("persistent://public/nowhere/t", client.new_id(), 1)
    assert error_of(answer) in (ServerError.TopicNotFound, ServerError.NotAllowedError)


def test_producer_with_a_schema_the_broker_cannot_read(client: HostileClient) -> None:
    cmd = T(type=T.PRODUCER)
    p = cmd.producer
    p.topic, p.producer_id, p.request_id = topic_name(), client.new_id(), 7
    p.schema.name, p.schema.type, p.schema.schema_data = "bad", pb.Schema.Avro, b"\xff{not json"
    answer = client.answer(cmd)
    # Quasar stores schemas as given; an unreadable one must not break the request.
    assert answer.type in (T.PRODUCER_SUCCESS, T.ERROR), answer
    if answer.type == T.ERROR:
        assert answer.error.error == ServerError.IncompatibleSchema


@pytest.mark.parametrize("producer_id", [UNKNOWN, 0, U64_MAX])
def test_send_for_an_unknown_producer_is_a_send_error(
    client: HostileClient, producer_id: int
) -> None:
    answer = client.send_message(producer_id, 5)
    assert answer.type == T.SEND_ERROR
    assert (answer.send_error.producer_id, answer.send_error.sequence_id) == (producer_id, 5)
    assert answer.send_error.error == ServerError.NotAllowedError


def test_send_after_close_producer_is_a_send_error(client: HostileClient) -> None:
    pid = client.producer(topic_name())
    close = T(type=T.CLOSE_PRODUCER)
    close.close_producer.producer_id, close.close_producer.request_id = pid, client.new_id()
    assert client.answer(close).type == T.SUCCESS
    answer = client.send_message(pid, 1)
    assert answer.type == T.SEND_ERROR
    assert answer.send_error.error == ServerError.NotAllowedError


def test_send_with_a_wrong_checksum_is_a_checksum_error(client: HostileClient) -> None:
    pid = client.producer(topic_name())
    md = pb.MessageMetadata(producer_name="h", sequence_id=1, publish_time=1)
    entry = bytearray(make_entry(md, b"payload"))
    entry[-1] ^= 0xFF
    answer = client.send_message(pid, 1, entry=bytes(entry))
    assert answer.type == T.SEND_ERROR
    assert answer.send_error.error == ServerError.ChecksumError


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(U32.pack(1000) + b"\x0a\x01", id="metadata-size-past-the-end"),
        pytest.param(U32.pack(4) + b"\xff\xff\xff\xff", id="metadata-garbage"),
        pytest.param(U32.pack(2) + b"\x08\x01", id="metadata-missing-required"),
        pytest.param(U32.pack(0xFFFFFFFF), id="metadata-size-u32-max"),
    ],
)
def test_send_with_unreadable_metadata_is_answered(client: HostileClient, entry: bytes) -> None:
    pid = client.producer(topic_name())
    answer = client.send_message(pid, 1, entry=entry)
    # Quasar stores the entry as sent (as Pulsar does) or refuses it; either way the
    # request is answered and the connection stays.
    if answer.type == T.SEND_ERROR:
        assert not_unknown(answer.send_error), answer


@pytest.mark.parametrize(
    "entry",
    [pytest.param(b"", id="empty"), pytest.param(b"\x0e\x01\x00\x00", id="truncated-checksum")],
)
def test_send_without_room_for_metadata_is_a_framing_error(
    broker: BrokerProcess, entry: bytes
) -> None:
    """A payload frame too short to hold a metadata size is a malformed frame, not a
    bad message: it closes that connection (as an undecodable frame does)."""
    watch = LogWatch(broker.log_path)
    victim = HostileClient(broker.port)
    pid = victim.producer(topic_name())
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = pid, 1
    victim.raw.send_bytes(encode_payload_command(cmd, entry))
    assert victim.raw.is_closed_by_peer()
    HostileClient(broker.port).ping()
    assert watch.unexpected_failures() == [], watch.new_text()


@pytest.mark.parametrize("num_messages", [0, -1, 2**31 - 1])
def test_send_with_a_bad_batch_count_is_answered(client: HostileClient, num_messages: int) -> None:
    pid = client.producer(topic_name())
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id, cmd.send.num_messages = pid, 1, num_messages
    md = pb.MessageMetadata(producer_name="h", sequence_id=1, publish_time=1,
                            num_messages_in_batch=num_messages)
    client.raw.send_bytes(encode_payload_command(cmd, make_entry(md, b"not a batch")))
    answer = client.next_answer()
    assert answer.type in (T.SEND_RECEIPT, T.SEND_ERROR), answer
    if answer.type == T.SEND_ERROR:
        assert not_unknown(answer.send_error), answer


def test_send_in_an_unknown_transaction_is_refused(client: HostileClient) -> None:
    pid = client.producer(topic_name())
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = pid, 1
    cmd.send.txnid_most_bits, cmd.send.txnid_least_bits = UNKNOWN, UNKNOWN
    md = pb.MessageMetadata(producer_name="h", sequence_id=1, publish_time=1)
    client.raw.send_bytes(encode_payload_command(cmd, make_entry(md, b"x")))
    answer = client.next_answer()
    assert answer.type == T.SEND_ERROR, answer
    assert not_unknown(answer.send_error), answer


@pytest.mark.parametrize("producer_id", [UNKNOWN, U64_MAX])
def test_close_producer_unknown_succeeds(client: HostileClient, producer_id: int) -> None:
    cmd = T(type=T.CLOSE_PRODUCER)
    cmd.close_producer.producer_id, cmd.close_producer.request_id = producer_id, 3
    answer = client.answer(cmd)
    assert (answer.type, answer.success.request_id) == (T.SUCCESS, 3)


def test_producer_with_odd_fields(client: HostileClient) -> None:
    cmd = T(type=T.PRODUCER)
    p = cmd.producer
    p.topic, p.producer_id, p.request_id = topic_name(), client.new_id(), 21
    p.producer_name, p.user_provided_producer_name = "p" * 100_000, True
    p.epoch = U64_MAX
    p.metadata.add(key="", value="v" * 10_000)
    p.initial_subscription_name = ""
    answer = client.answer(cmd)
    assert answer.type == T.PRODUCER_SUCCESS or error_of(answer) != ServerError.UnknownError


def test_two_producers_with_the_same_name(client: HostileClient) -> None:
    topic = topic_name()
    answers = []
    for _ in range(2):
        cmd = T(type=T.PRODUCER)
        p = cmd.producer
        p.topic, p.producer_id = topic, client.new_id()
        p.request_id, p.producer_name, p.user_provided_producer_name = p.producer_id, "x", True
        answers.append(client.answer(cmd))
    assert answers[0].type == T.PRODUCER_SUCCESS
    assert error_of(answers[1]) == ServerError.ProducerBusy


def test_send_in_a_transaction_the_partition_was_not_added_to(client: HostileClient) -> None:
    most, least = new_txn(client)
    pid = client.producer(topic_name())
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = pid, 1
    cmd.send.txnid_most_bits, cmd.send.txnid_least_bits = most, least
    md = pb.MessageMetadata(producer_name="h", sequence_id=1, publish_time=1)
    client.raw.send_bytes(encode_payload_command(cmd, make_entry(md, b"x")))
    answer = client.next_answer()
    assert answer.type in (T.SEND_RECEIPT, T.SEND_ERROR), answer
    if answer.type == T.SEND_ERROR:
        assert not_unknown(answer.send_error), answer


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(U32.pack(1000) + b"\x0a\x01", id="metadata-size-past-the-end"),
        pytest.param(U32.pack(4) + b"\xff\xff\xff\xff", id="metadata-garbage"),
        pytest.param(U32.pack(2) + b"\x08\x01", id="metadata-missing-required"),
        pytest.param(U32.pack(0xFFFFFFFF), id="metadata-size-u32-max"),
        pytest.param(
            make_entry(pb.MessageMetadata(producer_name="h", sequence_id=1, publish_time=1,
                                          num_messages_in_batch=5), b"not a batch"),
            id="batch-of-garbage",
        ),
    ],
)
def test_what_a_broker_stored_from_a_bad_send_does_not_break_delivery(
    client: HostileClient, entry: bytes
) -> None:
    topic = topic_name()
    cmd = subscribe_cmd(client, topic, initialPosition=pb.CommandSubscribe.Earliest)
    cmd.subscribe.subType = pb.CommandSubscribe.Shared
    cid = cmd.subscribe.consumer_id
    assert client.answer(cmd).type == T.SUCCESS
    pid = client.producer(topic)
    bad = client.send_message(pid, 1, entry=entry)
    good = client.send_message(pid, 2, b"good")
    assert good.type == T.SEND_RECEIPT
    client.raw.send(flow(cid, 100))
    # The good message arrives; the bad one only if it was stored.
    delivered = []
    while True:
        got = client.raw.recv()
        if got.type == T.MESSAGE and got.message.consumer_id == cid:
            delivered.append(got.message.message_id.entryId)
            if got.message.message_id == good.send_receipt.message_id:
                break
    assert delivered == ([0, 1] if bad.type == T.SEND_RECEIPT else [0])


def test_schemas_that_disagree_with_the_topics(client: HostileClient) -> None:
    topic = topic_name()
    schemas = [(pb.Schema.String, b""), (pb.Schema.Avro, b'{"type": "record"'),
               (pb.Schema.Json, b"\xff"), (pb.Schema.KeyValue, b"\x00\x00\x00\x05ab")]
    for type_, data in schemas:
        cmd = T(type=T.PRODUCER)
        p = cmd.producer
        p.topic, p.producer_id = topic, client.new_id()
        p.request_id = p.producer_id
        p.schema.name, p.schema.type, p.schema.schema_data = "s", type_, data
        answer = client.answer(cmd)
        assert answer.type == T.PRODUCER_SUCCESS or error_of(answer) == ServerError.IncompatibleSchema, answer
        cmd = subscribe_cmd(client, topic, subType=pb.CommandSubscribe.Shared)
        s = cmd.subscribe
        s.schema.name, s.schema.type, s.schema.schema_data = "s", type_, data
        answer = client.answer(cmd)
        assert answer.type == T.SUCCESS or error_of(answer) == ServerError.IncompatibleSchema, answer


def test_the_same_producer_and_consumer_id_twice_in_one_write(client: HostileClient) -> None:
    """The second request arrives while the first is still being served: it is told
    the id is busy (or, once the first is done, answered as a retry)."""
    topic = topic_name()
    frames = b""
    for request_id in (61, 62):
        cmd = T(type=T.PRODUCER)
        cmd.producer.topic, cmd.producer.producer_id, cmd.producer.request_id = (
            topic, 7, request_id
        )
        frames += encode_command(cmd)
    for request_id in (63, 64):
        cmd = subscribe_cmd(client, topic)
        cmd.subscribe.consumer_id, cmd.subscribe.request_id = 8, request_id
        frames += encode_command(cmd)
    client.raw.send_bytes(frames)
    answers = {}
    while len(answers) < 4:
        got = client.next_answer()
        sub = got.producer_success if got.type == T.PRODUCER_SUCCESS else (
            got.success if got.type == T.SUCCESS else got.error
        )
        answers[sub.request_id] = got
    for first, second in ((61, 62), (63, 64)):
        assert answers[first].type in (T.PRODUCER_SUCCESS, T.SUCCESS), answers[first]
        busy = (ServerError.ProducerBusy, ServerError.ConsumerBusy)
        assert answers[second].type != T.ERROR or error_of(answers[second]) in busy
