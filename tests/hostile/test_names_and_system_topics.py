"""Hostile clients against a real broker: system topics are closed to every client,
and bad names get an error on the request, never a closed connection."""

from __future__ import annotations

import uuid

import pulsar
import pytest

from quasar.errors import ServerError
from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand

SYSTEM_TOPICS = [
    "persistent://pulsar/system/__transaction_log_0",
    "persistent://pulsar/system/__terminated_txn_state_0",
    "persistent://public/default/orders-sub__transaction_pending_ack",
    "persistent://public/default/__transaction_buffer_snapshot",
    "persistent://public/default/__change_events",
]


def connected(broker: BrokerProcess) -> Raw:
    raw = Raw(broker.port)
    raw.connect()
    return raw


def ping_round_trip(raw: Raw) -> None:
    """The connection is still served: a PING is answered."""
    raw.send(T(type=T.PING))
    raw.recv_type(T.PONG)


def subscribe(topic: str, request_id: int) -> pb.BaseCommand:
    cmd = T(type=T.SUBSCRIBE)
    s = cmd.subscribe
    s.topic, s.subscription, s.subType = topic, "peek", pb.CommandSubscribe.Exclusive
    s.consumer_id, s.request_id = request_id, request_id
    return cmd


@pytest.mark.parametrize("topic", SYSTEM_TOPICS)
def test_no_client_may_produce_to_or_subscribe_to_a_system_topic(
    broker: BrokerProcess, topic: str
) -> None:
    raw = connected(broker)
    answer = raw.producer(topic, producer_id=1, request_id=1)
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.NotAllowedError)
    assert "system topic" in answer.error.message
    answer = raw.request(subscribe(topic, 2), T.ERROR)
    assert answer.error.error == ServerError.NotAllowedError
    ping_round_trip(raw)


def test_the_official_client_is_refused_on_a_system_topic(broker: BrokerProcess) -> None:
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        with pytest.raises(pulsar.NotAllowedError):
            client.create_producer("persistent://pulsar/system/__transaction_log_0")
        # Other topics are served as before.
        name = f"persistent://public/default/ok-{uuid.uuid4().hex[:8]}"
        consumer = client.subscribe(name, "s")
        client.create_producer(name).send(b"still served")
        assert consumer.receive(10_000).data() == b"still served"
    finally:
        client.close()


@pytest.mark.parametrize(
    "name",
    [
        "persistent://public/default/a/b",  # a legacy V1 name: quasar keeps V2 only
        "persistent://public/no such ns/t",
        "persistent://" + "x" * 10,
        "",
    ],
)
def test_bad_topic_names_are_answered_on_the_request(
    broker: BrokerProcess, name: str
) -> None:
    raw = connected(broker)
    lookup = T(type=T.LOOKUP)
    lookup.lookupTopic.topic, lookup.lookupTopic.request_id = name, 1
    answer = raw.request(lookup, T.LOOKUP_RESPONSE).lookupTopicResponse
    assert answer.response == pb.CommandLookupTopicResponse.Failed
    assert answer.error == ServerError.InvalidTopicName
    meta = T(type=T.PARTITIONED_METADATA)
    meta.partitionMetadata.topic, meta.partitionMetadata.request_id = name, 2
    answer = raw.request(meta, T.PARTITIONED_METADATA_RESPONSE).partitionMetadataResponse
    assert answer.error == ServerError.InvalidTopicName
    answer = raw.producer(name, producer_id=3, request_id=3)
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.InvalidTopicName)
    answer = raw.request(subscribe(name, 4), T.ERROR)
    assert answer.error.error == ServerError.InvalidTopicName
    schema = T(type=T.GET_SCHEMA)
    schema.getSchema.topic, schema.getSchema.request_id = name, 5
    answer = raw.request(schema, T.GET_SCHEMA_RESPONSE).getSchemaResponse
    assert answer.error_code == ServerError.InvalidTopicName
    ping_round_trip(raw)


@pytest.mark.parametrize("namespace", ["public/default/extra", "no-slash", "public/", "a b/c", ""])
def test_bad_namespace_names_are_answered_on_the_request(
    broker: BrokerProcess, namespace: str
) -> None:
    raw = connected(broker)
    cmd = T(type=T.GET_TOPICS_OF_NAMESPACE)
    cmd.getTopicsOfNamespace.namespace, cmd.getTopicsOfNamespace.request_id = namespace, 1
    answer = raw.request(cmd, T.ERROR)
    assert answer.error.error == ServerError.InvalidTopicName
    ping_round_trip(raw)


def test_over_long_names_are_refused_on_the_request(broker: BrokerProcess) -> None:
    raw = connected(broker)
    topic = f"persistent://public/default/long-{uuid.uuid4().hex[:8]}"
    answer = raw.producer("persistent://public/default/" + "t" * 5000, 1, 1)
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.InvalidTopicName)
    cmd = subscribe(topic, 2)
    cmd.subscribe.subscription = "s" * 1025
    answer = raw.request(cmd, T.ERROR)
    assert answer.error.error == ServerError.InvalidTopicName
    cmd = subscribe(topic, 3)
    cmd.subscribe.consumer_name = "c" * 1025
    answer = raw.request(cmd, T.ERROR)
    assert answer.error.error == ServerError.NotAllowedError
    cmd = T(type=T.PRODUCER)
    cmd.producer.topic, cmd.producer.producer_id, cmd.producer.request_id = topic, 4, 4
    cmd.producer.producer_name = "p" * 1025
    answer = raw.request(cmd, T.ERROR)
    assert answer.error.error == ServerError.NotAllowedError
    # At the bounds: accepted.
    cmd = subscribe(topic, 5)
    cmd.subscribe.subscription = "s" * 1024
    cmd.subscribe.consumer_name = "c" * 1024
    assert raw.request(cmd, T.SUCCESS).success.request_id == 5
    ping_round_trip(raw)
