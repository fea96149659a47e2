"""SUBSCRIBE, FLOW, ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES, UNSUBSCRIBE, CLOSE_CONSUMER,
SEEK, GET_LAST_MESSAGE_ID and CONSUMER_STATS with hostile fields and in the wrong state
against a real broker: each gets Pulsar's error on the request, or nothing where Pulsar
answers nothing (FLOW, REDELIVER, an ACK without a request id); the connection stays
open and the broker logs no traceback."""

from __future__ import annotations

import http.client

import pytest

from quasar.errors import ServerError
from quasar.protocol import pb
from quasar.testing.hostile import HostileClient, topic_name
from quasar.testing.process import BrokerProcess

from ._commands import (
    MINUS_ONE,
    U64_MAX,
    UNKNOWN,
    T,
    ack,
    error_of,
    flow,
    message_id,
    new_txn,
    not_unknown,
    request_partitions,
    seek,
    subscribe_cmd,
    txn_answer,
    unsubscribe,
)

pytestmark = pytest.mark.usefixtures("close_raw")


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


def test_flow_before_subscribe_says_nothing(client: HostileClient) -> None:
    client.silent(flow(UNKNOWN))
    client.silent(flow(U64_MAX, 2**32 - 1))


def test_flow_with_huge_permits_is_served(client: HostileClient) -> None:
    cid = client.subscribe(topic_name())
    client.silent(flow(cid, 2**32 - 1))
    client.silent(flow(cid, 2**32 - 1))  # the sum overflows 32 bits
    client.silent(flow(cid, 0))


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


def test_subscribe_to_a_partitioned_topic_by_its_own_name(
    broker: BrokerProcess, client: HostileClient
) -> None:
    topic = topic_name()
    status = request_partitions(broker, topic, 2)
    assert status == 204
    assert error_of(client.answer(subscribe_cmd(client, topic))) != ServerError.UnknownError
    answer = client.raw.producer(topic, client.new_id(), client.new_id())
    assert error_of(answer) != ServerError.UnknownError


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
