"""Lookups, schemas and transaction commands with hostile names and ids against a real
broker: each is answered in its own response type with Pulsar's error, never
``UnknownError``; the connection stays open and the broker logs no traceback."""

from __future__ import annotations

import pytest

from quasar.errors import ServerError
from quasar.protocol import pb
from quasar.testing.hostile import HostileClient, topic_name

from ._commands import (
    U64_MAX,
    UNKNOWN,
    T,
    new_txn,
    not_unknown,
    txn_answer,
)

pytestmark = pytest.mark.usefixtures("close_raw")


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
