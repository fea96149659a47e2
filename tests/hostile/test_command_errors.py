"""Every command a client may send, with hostile field values, against a real broker:
the broker answers the request with Pulsar's ``ServerError`` (or, where Pulsar
answers nothing, says nothing), the connection stays open (a PING round trip right
after), and the broker logs no traceback. Commands the broker never accepts from a
client (its own response types, a second CONNECT) are protocol violations: they
close that connection, and a new one is served.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest

from quasar.errors import ServerError
from quasar.protocol import encode_command, encode_payload_command, make_entry, pb
from quasar.protocol._wire import U32
from quasar.testing.hostile import HostileClient, LogWatch, topic_name
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
U64_MAX = (1 << 64) - 1
MINUS_ONE = U64_MAX  # -1 as the wire's uint64 carries it
UNKNOWN = 987_654_321  # an id no request created


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[HostileClient]:
    """A connection to the broker; after the test, the broker must have logged no
    failure and still serve the connection."""
    watch = LogWatch(broker.log_path)
    c = HostileClient(broker.port)
    yield c
    c.ping()
    assert watch.unexpected_failures() == [], watch.new_text()


def not_unknown(response: object) -> bool:
    """Whether a response carries no error or one other than UnknownError (a bug's)."""
    for field in ("error", "error_code"):
        if hasattr(response, field):
            return not response.HasField(field) or (  # type: ignore[attr-defined]
                getattr(response, field) != ServerError.UnknownError
            )
    raise AssertionError(f"no error field in {response}")


def error_of(answer: pb.BaseCommand) -> int:
    assert answer.type == T.ERROR, answer
    return int(answer.error.error)


def message_id(ledger: int, entry: int) -> pb.MessageIdData:
    return pb.MessageIdData(ledgerId=ledger, entryId=entry)


# -- PRODUCER, SEND, CLOSE_PRODUCER ---------------------------------------------------
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


# -- SUBSCRIBE -------------------------------------------------------------------------
def subscribe_cmd(client: HostileClient, topic: str, **fields: object) -> pb.BaseCommand:
    cmd = T(type=T.SUBSCRIBE)
    s = cmd.subscribe
    s.topic, s.subscription, s.subType = topic, "s", pb.CommandSubscribe.Exclusive
    s.consumer_id = s.request_id = client.new_id()
    for key, value in fields.items():
        if isinstance(value, pb.MessageIdData):
            getattr(s, key).CopyFrom(value)
        else:
            setattr(s, key, value)
    return cmd


def test_subscribe_with_an_empty_subscription_name(client: HostileClient) -> None:
    answer = client.answer(subscribe_cmd(client, topic_name(), subscription=""))
    assert error_of(answer) != ServerError.UnknownError


def test_second_exclusive_consumer_is_busy(client: HostileClient) -> None:
    topic = topic_name()
    client.subscribe(topic, sub_type=pb.CommandSubscribe.Exclusive)
    assert error_of(client.answer(subscribe_cmd(client, topic))) == ServerError.ConsumerBusy


def test_consumer_id_reused_on_another_subscription(client: HostileClient) -> None:
    cid = client.subscribe(topic_name())
    cmd = subscribe_cmd(client, topic_name())
    cmd.subscribe.consumer_id = cid
    answer = client.answer(cmd)
    # As for producers: the live id answers again (retry) or is busy.
    assert answer.type == T.SUCCESS or error_of(answer) == ServerError.ConsumerBusy


@pytest.mark.parametrize(
    "start",
    [message_id(MINUS_ONE, MINUS_ONE), message_id(U64_MAX - 5, 3), message_id(2**63, 0),
     message_id(UNKNOWN, UNKNOWN)],
    ids=["earliest", "negative", "int64-min", "far-future"],
)
def test_subscribe_at_an_odd_start_message_id(
    client: HostileClient, start: pb.MessageIdData
) -> None:
    answer = client.answer(
        subscribe_cmd(client, topic_name(), start_message_id=start, durable=False)
    )
    assert answer.type == T.SUCCESS or error_of(answer) != ServerError.UnknownError


def test_subscribe_with_odd_numbers(client: HostileClient) -> None:
    answer = client.answer(
        subscribe_cmd(
            client,
            topic_name(),
            priority_level=-(2**31),
            consumer_name="c" * 10_000,
            start_message_rollback_duration_sec=U64_MAX,
        )
    )
    assert answer.type == T.SUCCESS or error_of(answer) != ServerError.UnknownError


def test_key_shared_with_bad_hash_ranges(client: HostileClient) -> None:
    cmd = subscribe_cmd(client, topic_name(), subType=pb.CommandSubscribe.Key_Shared)
    meta = cmd.subscribe.keySharedMeta
    meta.keySharedMode = pb.STICKY
    meta.hashRanges.add(start=100, end=10)  # inverted
    meta.hashRanges.add(start=-5, end=2**31 - 1)  # negative and beyond the hash space
    answer = client.answer(cmd)
    assert answer.type == T.SUCCESS or error_of(answer) != ServerError.UnknownError


def test_subscribe_with_a_schema_the_broker_cannot_read(client: HostileClient) -> None:
    cmd = subscribe_cmd(client, topic_name())
    s = cmd.subscribe
    s.schema.name, s.schema.type, s.schema.schema_data = "bad", pb.Schema.Json, b"\x00\xff"
    answer = client.answer(cmd)
    assert answer.type == T.SUCCESS or error_of(answer) == ServerError.IncompatibleSchema


# -- FLOW, ACK, REDELIVER: Pulsar answers nothing for an unknown consumer ---------------
def flow(consumer_id: int, permits: int = 10) -> pb.BaseCommand:
    cmd = T(type=T.FLOW)
    cmd.flow.consumer_id, cmd.flow.messagePermits = consumer_id, permits
    return cmd


def test_flow_before_subscribe_says_nothing(client: HostileClient) -> None:
    client.silent(flow(UNKNOWN))
    client.silent(flow(U64_MAX, 2**32 - 1))


def test_flow_with_huge_permits_is_served(client: HostileClient) -> None:
    cid = client.subscribe(topic_name())
    client.silent(flow(cid, 2**32 - 1))
    client.silent(flow(cid, 2**32 - 1))  # the sum overflows 32 bits
    client.silent(flow(cid, 0))


def ack(consumer_id: int, *ids: pb.MessageIdData, request_id: int | None = None,
        cumulative: bool = False) -> pb.BaseCommand:
    cmd = T(type=T.ACK)
    a = cmd.ack
    a.consumer_id = consumer_id
    a.ack_type = pb.CommandAck.Cumulative if cumulative else pb.CommandAck.Individual
    for mid in ids:
        a.message_id.add().CopyFrom(mid)
    if request_id is not None:
        a.request_id = request_id
    return cmd


def test_ack_for_an_unknown_consumer(client: HostileClient) -> None:
    client.silent(ack(UNKNOWN, message_id(1, 1)))
    answer = client.answer(ack(UNKNOWN, message_id(1, 1), request_id=41))
    assert answer.type == T.ACK_RESPONSE
    assert (answer.ackResponse.request_id, answer.ackResponse.error) == (
        41, ServerError.ConsumerNotFound
    )


@pytest.mark.parametrize(
    "mid",
    [
        message_id(UNKNOWN, UNKNOWN),  # an id of another topic, or of nothing
        message_id(MINUS_ONE, MINUS_ONE),
        message_id(2**63, 2**63),
        pb.MessageIdData(ledgerId=0, entryId=0, batch_index=-1, batch_size=-5),
        pb.MessageIdData(ledgerId=0, entryId=0, ack_set=[-1] * 10_000, batch_size=1),
    ],
    ids=["unknown", "minus-one", "int64-min", "negative-batch", "huge-ack-set"],
)
@pytest.mark.parametrize("cumulative", [False, True], ids=["individual", "cumulative"])
def test_ack_of_a_message_id_the_subscription_never_had(
    client: HostileClient, mid: pb.MessageIdData, cumulative: bool
) -> None:
    cid = client.subscribe(topic_name(), sub_type=pb.CommandSubscribe.Failover)
    answer = client.answer(ack(cid, mid, request_id=5, cumulative=cumulative))
    assert answer.type == T.ACK_RESPONSE
    assert not_unknown(answer.ackResponse), answer
    client.silent(ack(cid, mid, cumulative=cumulative))


def test_ack_with_a_message_id_of_another_topic(client: HostileClient) -> None:
    other = topic_name()
    pid = client.producer(other)
    receipt = client.send_message(pid, 1)
    assert receipt.type == T.SEND_RECEIPT
    mid = receipt.send_receipt.message_id
    cid = client.subscribe(topic_name())
    answer = client.answer(ack(cid, mid, request_id=6))
    assert not_unknown(answer.ackResponse), answer


def test_ack_in_an_unknown_transaction(client: HostileClient) -> None:
    cid = client.subscribe(topic_name())
    cmd = ack(cid, message_id(1, 1), request_id=8)
    cmd.ack.txnid_most_bits, cmd.ack.txnid_least_bits = UNKNOWN, UNKNOWN
    answer = client.answer(cmd)
    assert answer.type == T.ACK_RESPONSE
    assert not_unknown(answer.ackResponse), answer


def test_redeliver_for_an_unknown_consumer_says_nothing(client: HostileClient) -> None:
    cmd = T(type=T.REDELIVER_UNACKNOWLEDGED_MESSAGES)
    cmd.redeliverUnacknowledgedMessages.consumer_id = UNKNOWN
    client.silent(cmd)
    cid = client.subscribe(topic_name())
    cmd.redeliverUnacknowledgedMessages.consumer_id = cid
    cmd.redeliverUnacknowledgedMessages.message_ids.add().CopyFrom(
        message_id(MINUS_ONE, UNKNOWN)
    )
    client.silent(cmd)


# -- UNSUBSCRIBE, CLOSE_CONSUMER, SEEK, GET_LAST_MESSAGE_ID, CONSUMER_STATS -------------
def unsubscribe(consumer_id: int, request_id: int) -> pb.BaseCommand:
    cmd = T(type=T.UNSUBSCRIBE)
    cmd.unsubscribe.consumer_id, cmd.unsubscribe.request_id = consumer_id, request_id
    return cmd


def test_unsubscribe_twice(client: HostileClient) -> None:
    cid = client.subscribe(topic_name())
    assert client.answer(unsubscribe(cid, 1)).type == T.SUCCESS
    assert error_of(client.answer(unsubscribe(cid, 2))) == ServerError.ConsumerNotFound
    assert error_of(client.answer(unsubscribe(UNKNOWN, 3))) == ServerError.ConsumerNotFound


def test_close_consumer_unknown_succeeds(client: HostileClient) -> None:
    cmd = T(type=T.CLOSE_CONSUMER)
    cmd.close_consumer.consumer_id, cmd.close_consumer.request_id = UNKNOWN, 4
    answer = client.answer(cmd)
    assert (answer.type, answer.success.request_id) == (T.SUCCESS, 4)


def seek(consumer_id: int, request_id: int, mid: pb.MessageIdData | None = None,
         publish_time: int | None = None) -> pb.BaseCommand:
    cmd = T(type=T.SEEK)
    cmd.seek.consumer_id, cmd.seek.request_id = consumer_id, request_id
    if mid is not None:
        cmd.seek.message_id.CopyFrom(mid)
    if publish_time is not None:
        cmd.seek.message_publish_time = publish_time
    return cmd


def test_seek_on_a_closed_consumer(client: HostileClient) -> None:
    cid = client.subscribe(topic_name())
    close = T(type=T.CLOSE_CONSUMER)
    close.close_consumer.consumer_id, close.close_consumer.request_id = cid, 1
    assert client.answer(close).type == T.SUCCESS
    answer = client.answer(seek(cid, 2, message_id(0, 0)))
    assert error_of(answer) == ServerError.ConsumerNotFound
    assert answer.error.request_id == 2


@pytest.mark.parametrize(
    "target",
    [
        {"mid": message_id(MINUS_ONE, MINUS_ONE)},
        {"mid": message_id(UNKNOWN, UNKNOWN)},
        {"mid": message_id(2**63, 1)},
        {"publish_time": U64_MAX},
        {"publish_time": 0},
        {},
    ],
    ids=["earliest", "unknown", "int64-min", "time-max", "time-zero", "no-target"],
)
def test_seek_to_odd_targets(client: HostileClient, target: dict[str, object]) -> None:
    cid = client.subscribe(topic_name())
    answer = client.answer(seek(cid, 9, **target))  # type: ignore[arg-type]
    assert answer.type == T.SUCCESS or error_of(answer) != ServerError.UnknownError, answer


def test_get_last_message_id_unknown(client: HostileClient) -> None:
    cmd = T(type=T.GET_LAST_MESSAGE_ID)
    cmd.getLastMessageId.consumer_id, cmd.getLastMessageId.request_id = UNKNOWN, 5
    answer = client.answer(cmd)
    assert error_of(answer) == ServerError.ConsumerNotFound
    assert answer.error.request_id == 5


def test_consumer_stats_unknown(client: HostileClient) -> None:
    cmd = T(type=T.CONSUMER_STATS)
    cmd.consumerStats.consumer_id, cmd.consumerStats.request_id = UNKNOWN, 6
    answer = client.answer(cmd)
    assert answer.type == T.CONSUMER_STATS_RESPONSE
    r = answer.consumerStatsResponse
    assert (r.request_id, r.error_code) == (6, ServerError.ConsumerNotFound)


# -- lookups and schemas ---------------------------------------------------------------
@pytest.mark.parametrize("name", ["persistent://public/default/" + "x" * 100_000,
                                  "persistent://public/default/a\x00b",
                                  "persistent://public/default/../../etc",
                                  "non-persistent://public/default/t"])
def test_odd_names_on_lookup_requests(client: HostileClient, name: str) -> None:
    lookup = T(type=T.LOOKUP)
    lookup.lookupTopic.topic, lookup.lookupTopic.request_id = name, 1
    answer = client.answer(lookup).lookupTopicResponse
    assert answer.request_id == 1
    assert answer.response == pb.CommandLookupTopicResponse.Connect or (
        not_unknown(answer)
    )
    meta = T(type=T.PARTITIONED_METADATA)
    meta.partitionMetadata.topic, meta.partitionMetadata.request_id = name, 2
    r = client.answer(meta).partitionMetadataResponse
    assert r.request_id == 2 and not_unknown(r)


@pytest.mark.parametrize("version", [b"", b"\x00", b"\xff" * 8, b"\x7f" + b"\xff" * 7, b"x" * 9])
def test_get_schema_with_odd_versions(client: HostileClient, version: bytes) -> None:
    cmd = T(type=T.GET_SCHEMA)
    cmd.getSchema.topic, cmd.getSchema.request_id = topic_name(), 3
    cmd.getSchema.schema_version = version
    answer = client.answer(cmd)
    assert answer.type == T.GET_SCHEMA_RESPONSE
    assert answer.getSchemaResponse.error_code == ServerError.TopicNotFound


@pytest.mark.parametrize("name", ["", "persistent://public/default/a/b", "persistent://x"])
def test_get_or_create_schema_with_a_bad_name(client: HostileClient, name: str) -> None:
    cmd = T(type=T.GET_OR_CREATE_SCHEMA)
    c = cmd.getOrCreateSchema
    c.topic, c.request_id = name, 4
    c.schema.name, c.schema.type, c.schema.schema_data = "s", pb.Schema.String, b""
    answer = client.answer(cmd)
    assert answer.type == T.GET_OR_CREATE_SCHEMA_RESPONSE
    assert answer.getOrCreateSchemaResponse.error_code == ServerError.InvalidTopicName


def test_get_or_create_schema_twice_with_different_schemas(client: HostileClient) -> None:
    topic = topic_name()
    for i, (type_, data) in enumerate([(pb.Schema.String, b""), (pb.Schema.Avro, b"\xff")]):
        cmd = T(type=T.GET_OR_CREATE_SCHEMA)
        c = cmd.getOrCreateSchema
        c.topic, c.request_id = topic, 10 + i
        c.schema.name, c.schema.type, c.schema.schema_data = "s", type_, data
        answer = client.answer(cmd).getOrCreateSchemaResponse
        assert answer.request_id == 10 + i
        assert not_unknown(answer), answer


# -- transactions ----------------------------------------------------------------------
def txn_answer(client: HostileClient, cmd: pb.BaseCommand, field: str) -> pb.BaseCommand:
    answer = client.answer(cmd)
    return getattr(answer, field)  # type: ignore[no-any-return]


@pytest.mark.parametrize("tc_id", [UNKNOWN, U64_MAX])
def test_coordinator_commands_for_an_unknown_coordinator(
    client: HostileClient, tc_id: int
) -> None:
    cmd = T(type=T.TC_CLIENT_CONNECT_REQUEST)
    cmd.tcClientConnectRequest.request_id, cmd.tcClientConnectRequest.tc_id = 1, tc_id
    r = txn_answer(client, cmd, "tcClientConnectResponse")
    assert (r.request_id, r.error) == (1, ServerError.TransactionCoordinatorNotFound)
    cmd = T(type=T.NEW_TXN)
    cmd.newTxn.request_id, cmd.newTxn.tc_id = 2, tc_id
    r = txn_answer(client, cmd, "newTxnResponse")
    assert (r.request_id, r.error) == (2, ServerError.TransactionCoordinatorNotFound)


@pytest.mark.parametrize("ttl", [0, U64_MAX, 2**63])
def test_new_txn_with_odd_timeouts(client: HostileClient, ttl: int) -> None:
    new_txn(client)  # the coordinator is loaded
    cmd = T(type=T.NEW_TXN)
    cmd.newTxn.request_id, cmd.newTxn.tc_id, cmd.newTxn.txn_ttl_seconds = 3, 0, ttl
    r = txn_answer(client, cmd, "newTxnResponse")
    assert r.request_id == 3 and not_unknown(r), r


@pytest.mark.parametrize("most", [0, UNKNOWN, U64_MAX])
def test_txn_commands_with_unknown_txn_ids(client: HostileClient, most: int) -> None:
    topic = topic_name()
    cmd = T(type=T.ADD_PARTITION_TO_TXN)
    c = cmd.addPartitionToTxn
    c.request_id, c.txnid_most_bits, c.txnid_least_bits = 4, most, UNKNOWN
    c.partitions.append(topic)
    r = txn_answer(client, cmd, "addPartitionToTxnResponse")
    assert r.request_id == 4
    assert r.error in (ServerError.TransactionNotFound, ServerError.TransactionCoordinatorNotFound)
    cmd = T(type=T.ADD_SUBSCRIPTION_TO_TXN)
    s = cmd.addSubscriptionToTxn
    s.request_id, s.txnid_most_bits, s.txnid_least_bits = 5, most, UNKNOWN
    s.subscription.append(pb.Subscription(topic=topic, subscription="s"))
    r = txn_answer(client, cmd, "addSubscriptionToTxnResponse")
    assert r.request_id == 5
    assert r.error in (ServerError.TransactionNotFound, ServerError.TransactionCoordinatorNotFound)
    for action in (pb.COMMIT, pb.ABORT):
        cmd = T(type=T.END_TXN)
        e = cmd.endTxn
        e.request_id, e.txnid_most_bits, e.txnid_least_bits = 6, most, UNKNOWN
        e.txn_action = action
        r = txn_answer(client, cmd, "endTxnResponse")
        assert r.request_id == 6
        assert r.error in (
            ServerError.TransactionNotFound, ServerError.TransactionCoordinatorNotFound
        )


def new_txn(client: HostileClient) -> tuple[int, int]:
    cmd = T(type=T.TC_CLIENT_CONNECT_REQUEST)
    cmd.tcClientConnectRequest.request_id, cmd.tcClientConnectRequest.tc_id = client.new_id(), 0
    assert not_unknown(txn_answer(client, cmd, "tcClientConnectResponse"))
    cmd = T(type=T.NEW_TXN)
    cmd.newTxn.request_id, cmd.newTxn.tc_id = client.new_id(), 0
    r = txn_answer(client, cmd, "newTxnResponse")
    assert not r.HasField("error"), r
    return r.txnid_most_bits, r.txnid_least_bits


@pytest.mark.parametrize("name", ["", "persistent://public/default/a/b", "x" * 5000,
                                  "persistent://public/nowhere/t"])
def test_add_a_bad_name_to_a_transaction(client: HostileClient, name: str) -> None:
    most, least = new_txn(client)
    cmd = T(type=T.ADD_PARTITION_TO_TXN)
    c = cmd.addPartitionToTxn
    c.request_id, c.txnid_most_bits, c.txnid_least_bits = 7, most, least
    c.partitions.append(name)
    r = txn_answer(client, cmd, "addPartitionToTxnResponse")
    assert r.request_id == 7 and not_unknown(r), r
    cmd = T(type=T.ADD_SUBSCRIPTION_TO_TXN)
    s = cmd.addSubscriptionToTxn
    s.request_id, s.txnid_most_bits, s.txnid_least_bits = 8, most, least
    s.subscription.append(pb.Subscription(topic=name, subscription=""))
    r = txn_answer(client, cmd, "addSubscriptionToTxnResponse")
    assert r.request_id == 8 and not_unknown(r), r


def test_end_txn_twice_and_after_the_other_action(client: HostileClient) -> None:
    most, least = new_txn(client)
    for request_id, action in ((9, pb.COMMIT), (10, pb.COMMIT), (11, pb.ABORT)):
        cmd = T(type=T.END_TXN)
        e = cmd.endTxn
        e.request_id, e.txnid_most_bits, e.txnid_least_bits = request_id, most, least
        e.txn_action = action
        r = txn_answer(client, cmd, "endTxnResponse")
        assert r.request_id == request_id
        # A repeated commit is answered as done (idempotent); an abort after a commit
        # is refused with Pulsar's code for a transaction in the wrong state.
        if request_id == 11:
            assert r.error in (
                ServerError.InvalidTxnStatus, ServerError.TransactionNotFound
            ), r


def test_end_txn_on_partition_and_subscription_with_unknown_things(
    client: HostileClient,
) -> None:
    cmd = T(type=T.END_TXN_ON_PARTITION)
    p = cmd.endTxnOnPartition
    p.request_id, p.txnid_most_bits, p.txnid_least_bits = 12, UNKNOWN, UNKNOWN
    p.topic, p.txn_action = "persistent://public/default/a/b", pb.COMMIT
    r = txn_answer(client, cmd, "endTxnOnPartitionResponse")
    assert r.request_id == 12 and not_unknown(r), r
    p.topic = topic_name()
    r = txn_answer(client, cmd, "endTxnOnPartitionResponse")
    assert not_unknown(r), r
    cmd = T(type=T.END_TXN_ON_SUBSCRIPTION)
    s = cmd.endTxnOnSubscription
    s.request_id, s.txnid_most_bits, s.txnid_least_bits = 13, UNKNOWN, UNKNOWN
    s.subscription.topic, s.subscription.subscription = "", ""
    s.txn_action = pb.ABORT
    r = txn_answer(client, cmd, "endTxnOnSubscriptionResponse")
    assert r.request_id == 13 and not_unknown(r), r
    s.subscription.topic, s.subscription.subscription = topic_name(), "nope"
    r = txn_answer(client, cmd, "endTxnOnSubscriptionResponse")
    assert not_unknown(r), r


# -- protocol violations close the connection only --------------------------------------
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


def test_subscribe_to_a_partitioned_topic_by_its_own_name(
    broker: BrokerProcess, client: HostileClient
) -> None:
    topic = topic_name()
    status = request_partitions(broker, topic, 2)
    assert status == 204
    assert error_of(client.answer(subscribe_cmd(client, topic))) != ServerError.UnknownError
    answer = client.raw.producer(topic, client.new_id(), client.new_id())
    assert error_of(answer) != ServerError.UnknownError


def request_partitions(broker: BrokerProcess, topic: str, partitions: int) -> int:
    path = topic.replace("persistent://", "/admin/v2/persistent/") + "/partitions"
    conn = http.client.HTTPConnection("127.0.0.1", broker.http_port, timeout=30)
    try:
        conn.request("PUT", path, body=str(partitions),
                     headers={"Content-Type": "application/json"})
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize("mode", [pb.CommandGetTopicsOfNamespace.ALL,
                                  pb.CommandGetTopicsOfNamespace.NON_PERSISTENT])
@pytest.mark.parametrize("namespace", ["public/default", "public/nowhere", "x" * 10_000 + "/y"])
def test_get_topics_of_namespace(client: HostileClient, namespace: str, mode: int) -> None:
    cmd = T(type=T.GET_TOPICS_OF_NAMESPACE)
    g = cmd.getTopicsOfNamespace
    g.namespace, g.request_id, g.mode = namespace, 31, mode
    g.topics_pattern, g.topics_hash = "(((((", "x"
    answer = client.answer(cmd)
    if answer.type == T.ERROR:
        assert answer.error.request_id == 31
        assert answer.error.error != ServerError.UnknownError, answer
    else:
        assert answer.getTopicsOfNamespaceResponse.request_id == 31


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


def test_ack_in_a_transaction_after_it_ended(client: HostileClient) -> None:
    topic = topic_name()
    pid = client.producer(topic)
    cid = client.subscribe(topic)
    receipt = client.send_message(pid, 1)
    most, least = new_txn(client)
    end = T(type=T.END_TXN)
    end.endTxn.request_id, end.endTxn.txnid_most_bits, end.endTxn.txnid_least_bits = (
        client.new_id(), most, least
    )
    end.endTxn.txn_action = pb.COMMIT
    assert not_unknown(txn_answer(client, end, "endTxnResponse"))
    cmd = ack(cid, receipt.send_receipt.message_id, request_id=client.new_id())
    cmd.ack.txnid_most_bits, cmd.ack.txnid_least_bits = most, least
    answer = client.answer(cmd)
    assert answer.type == T.ACK_RESPONSE
    assert not_unknown(answer.ackResponse), answer


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


def test_commands_on_a_topic_deleted_under_its_producer_and_consumer(
    broker: BrokerProcess, client: HostileClient
) -> None:
    topic = topic_name()
    pid = client.producer(topic)
    cid = client.subscribe(topic)
    path = topic.replace("persistent://", "/admin/v2/persistent/") + "?force=true"
    conn = http.client.HTTPConnection("127.0.0.1", broker.http_port, timeout=30)
    try:
        conn.request("DELETE", path)
        assert conn.getresponse().status == 204
    finally:
        conn.close()
    answer = client.send_message(pid, 1)
    assert answer.type == T.SEND_ERROR or answer.type == T.SEND_RECEIPT
    if answer.type == T.SEND_ERROR:
        assert not_unknown(answer.send_error), answer
    client.silent(flow(cid))
    for cmd in (seek(cid, 50, message_id(0, 0)), unsubscribe(cid, 51)):
        got = client.answer(cmd)
        assert got.type == T.SUCCESS or error_of(got) != ServerError.UnknownError, got


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


@pytest.mark.parametrize("name", ["persistent://public/default/a/b", "persistent://x/y/../z"])
def test_a_legacy_name_cannot_join_a_transaction(client: HostileClient, name: str) -> None:
    """Refused when added (as PRODUCER and SUBSCRIBE refuse it), so the commit never
    has to reach a participant it cannot name."""
    most, least = new_txn(client)
    cmd = T(type=T.ADD_PARTITION_TO_TXN)
    c = cmd.addPartitionToTxn
    c.request_id, c.txnid_most_bits, c.txnid_least_bits = client.new_id(), most, least
    c.partitions.append(name)
    r = txn_answer(client, cmd, "addPartitionToTxnResponse")
    assert r.error == ServerError.InvalidTopicName, r
    cmd = T(type=T.ADD_SUBSCRIPTION_TO_TXN)
    s = cmd.addSubscriptionToTxn
    s.request_id, s.txnid_most_bits, s.txnid_least_bits = client.new_id(), most, least
    s.subscription.append(pb.Subscription(topic=name, subscription="s"))
    r = txn_answer(client, cmd, "addSubscriptionToTxnResponse")
    assert r.error == ServerError.InvalidTopicName, r
    cmd = T(type=T.END_TXN)
    e = cmd.endTxn
    e.request_id, e.txnid_most_bits, e.txnid_least_bits = client.new_id(), most, least
    e.txn_action = pb.COMMIT
    r = txn_answer(client, cmd, "endTxnResponse")
    assert not r.HasField("error"), r


@pytest.mark.parametrize("cumulative", [False, True], ids=["individual", "cumulative"])
def test_optional_fields_left_out(client: HostileClient, cumulative: bool) -> None:
    """What the protocol leaves optional may be missing: an ACK naming no message, a
    Key_Shared SUBSCRIBE without its meta, a PRODUCER without a name."""
    cid = client.subscribe(topic_name(), sub_type=pb.CommandSubscribe.Key_Shared)
    answer = client.answer(ack(cid, request_id=71, cumulative=cumulative))
    assert answer.type == T.ACK_RESPONSE and not_unknown(answer.ackResponse), answer
    client.silent(ack(cid, cumulative=cumulative))
    cmd = T(type=T.PRODUCER)
    cmd.producer.topic, cmd.producer.producer_id, cmd.producer.request_id = (
        topic_name(), client.new_id(), 72
    )
    cmd.producer.user_provided_producer_name = True  # and yet no name
    assert client.answer(cmd).type == T.PRODUCER_SUCCESS


def test_a_non_persistent_topic_cannot_join_a_transaction(client: HostileClient) -> None:
    """Refused when added: a commit could never end on it, and the transaction would
    stay committing."""
    name = "non-persistent://public/default/t"
    most, least = new_txn(client)
    cmd = T(type=T.ADD_PARTITION_TO_TXN)
    c = cmd.addPartitionToTxn
    c.request_id, c.txnid_most_bits, c.txnid_least_bits = client.new_id(), most, least
    c.partitions.append(name)
    r = txn_answer(client, cmd, "addPartitionToTxnResponse")
    assert r.error == ServerError.NotAllowedError, r
    cmd = T(type=T.ADD_SUBSCRIPTION_TO_TXN)
    s = cmd.addSubscriptionToTxn
    s.request_id, s.txnid_most_bits, s.txnid_least_bits = client.new_id(), most, least
    s.subscription.append(pb.Subscription(topic=name, subscription="s"))
    r = txn_answer(client, cmd, "addSubscriptionToTxnResponse")
    assert r.error == ServerError.NotAllowedError, r
    cmd = T(type=T.END_TXN)
    e = cmd.endTxn
    e.request_id, e.txnid_most_bits, e.txnid_least_bits = client.new_id(), most, least
    e.txn_action = pb.COMMIT
    r = txn_answer(client, cmd, "endTxnResponse")
    assert not r.HasField("error"), r
