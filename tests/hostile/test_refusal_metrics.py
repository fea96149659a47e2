"""Every refusal of hostile input is counted: a real broker receives each kind of
hostile request, answers the error ``docs/security.md`` documents, and
``quasar_hostile_input_refused_total`` grows by exactly one under that refusal's
reason and no other (a refusal counted in another family, such as a transaction
participant's, does not count here as well).
"""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from quasar.broker.hostile_input import REASONS
from quasar.errors import ServerError
from quasar.protocol import pb
from quasar.testing.hostile import topic_name
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, RawCoordinator

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
FAMILY = "quasar_hostile_input_refused_total"
TXN_FAMILY = "quasar_txn_refused_total"

Series = dict[tuple[str, str], float]


def scrape(broker: BrokerProcess) -> Series:
    """The hostile-input and transaction refusal series, by (sample, reason)."""
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in (FAMILY, TXN_FAMILY):
                out[(s.name, s.labels["reason"])] = s.value
    return out


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Series]]:
    """A broker, and its series as scraped right after start-up."""
    proc = BrokerProcess(tmp_path_factory.mktemp("refusal_metrics") / "data").start()
    first = scrape(proc)
    yield proc, first
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture
def broker(started: tuple[BrokerProcess, Series]) -> BrokerProcess:
    return started[0]


def counted_once(broker: BrokerProcess, reason: str, refuse: Callable[[], None],
                 family: str = FAMILY) -> None:
    """``refuse()`` makes one hostile request and checks its answer; afterwards
    exactly one refusal series moved, ``family{reason}``, by exactly 1. The broker
    counts before it answers, so the answer is the event to wait for."""
    before = scrape(broker)
    refuse()
    after = scrape(broker)
    moved = {key: after[key] - before.get(key, 0.0) for key in after
             if after[key] != before.get(key, 0.0)}
    assert moved == {(family, reason): 1.0}


def connected(broker: BrokerProcess) -> Raw:
    raw = Raw(broker.port)
    raw.connect()
    return raw


def still_served(raw: Raw) -> None:
    raw.send(T(type=T.PING))
    raw.recv_type(T.PONG)


def subscribe(topic: str, subscription: str, consumer_name: str = "") -> T:
    cmd = T(type=T.SUBSCRIBE)
    s = cmd.subscribe
    s.topic, s.subscription, s.subType = topic, subscription, pb.CommandSubscribe.Exclusive
    s.consumer_id, s.request_id = 7, 7
    if consumer_name:
        s.consumer_name = consumer_name
    return cmd


def admin(broker: BrokerProcess, method: str, path: str, body: bytes | None = None
          ) -> tuple[int, dict[str, str]]:
    """Status and JSON body of an admin request (errors included)."""
    request = urllib.request.Request(
        broker.admin_url + path, data=body, method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


# -- start-up ----------------------------------------------------------------------------
def test_every_reason_exists_at_zero_right_after_start_up(
    started: tuple[BrokerProcess, Series],
) -> None:
    _, first = started
    assert {reason for (name, reason) in first if name == FAMILY} == set(REASONS)
    assert all(first[(FAMILY, reason)] == 0.0 for reason in REASONS)


# -- binary protocol ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["persistent://public/default/a/b",
                                  "persistent://public/default/" + "x" * 5000])
def test_a_bad_topic_name_on_producer(broker: BrokerProcess, name: str) -> None:
    raw = connected(broker)

    def refuse() -> None:
        answer = raw.producer(name)
        assert (answer.type, answer.error.error) == (T.ERROR, ServerError.InvalidTopicName)

    counted_once(broker, "topic_name", refuse)
    still_served(raw)


def test_a_bad_topic_name_on_lookup(broker: BrokerProcess) -> None:
    raw = connected(broker)
    cmd = T(type=T.LOOKUP)
    cmd.lookupTopic.topic, cmd.lookupTopic.request_id = "persistent://x", 3

    def refuse() -> None:
        r = raw.request(cmd, T.LOOKUP_RESPONSE).lookupTopicResponse
        assert (r.response, r.error) == (
            pb.CommandLookupTopicResponse.Failed, ServerError.InvalidTopicName)

    counted_once(broker, "topic_name", refuse)


def test_a_bad_namespace_name(broker: BrokerProcess) -> None:
    raw = connected(broker)
    cmd = T(type=T.GET_TOPICS_OF_NAMESPACE)
    g = cmd.getTopicsOfNamespace
    g.namespace, g.request_id = "public/default/extra/parts", 4

    def refuse() -> None:
        answer = raw.request(cmd, T.ERROR)
        assert answer.error.error == ServerError.InvalidTopicName

    counted_once(broker, "namespace_name", refuse)


@pytest.mark.parametrize(("subscription", "code"), [
    ("s" * 1025, ServerError.InvalidTopicName),
    ("", ServerError.ConsumerBusy),  # Pulsar's answer to an empty one
])
def test_a_bad_subscription_name(broker: BrokerProcess, subscription: str, code: int) -> None:
    raw = connected(broker)

    def refuse() -> None:
        answer = raw.request(subscribe(topic_name(), subscription), T.ERROR)
        assert answer.error.error == code

    counted_once(broker, "subscription_name", refuse)
    still_served(raw)


def test_an_over_long_producer_name(broker: BrokerProcess) -> None:
    raw = connected(broker)
    cmd = T(type=T.PRODUCER)
    p = cmd.producer
    p.topic, p.producer_id, p.request_id = topic_name(), 1, 1
    p.producer_name = "p" * 1025

    def refuse() -> None:
        answer = raw.request(cmd, T.ERROR)
        assert answer.error.error == ServerError.NotAllowedError

    counted_once(broker, "client_name", refuse)


def test_an_over_long_consumer_name(broker: BrokerProcess) -> None:
    raw = connected(broker)

    def refuse() -> None:
        answer = raw.request(subscribe(topic_name(), "s", consumer_name="c" * 1025), T.ERROR)
        assert answer.error.error == ServerError.NotAllowedError

    counted_once(broker, "client_name", refuse)


@pytest.mark.parametrize("ranges", [[(100, 10)], [(-5, 10)], [(0, 70_000)], []])
def test_malformed_sticky_hash_ranges(broker: BrokerProcess, ranges: list[tuple[int, int]]) -> None:
    raw = connected(broker)
    cmd = subscribe(topic_name(), "s")
    cmd.subscribe.subType = pb.CommandSubscribe.Key_Shared
    cmd.subscribe.keySharedMeta.keySharedMode = pb.STICKY
    for start, end in ranges:
        cmd.subscribe.keySharedMeta.hashRanges.add(start=start, end=end)

    def refuse() -> None:
        answer = raw.request(cmd, T.ERROR)
        assert answer.error.error == ServerError.ConsumerAssignError

    counted_once(broker, "key_shared_ranges", refuse)
    still_served(raw)


def test_an_over_long_transaction_client_name(broker: BrokerProcess) -> None:
    tc = RawCoordinator(broker.port)
    assert tc.connect(0).error == 0  # not set: the coordinator is ready

    def refuse() -> None:
        answer = tc.new_txn(client_name="n" * 1025)
        assert answer.error == ServerError.NotAllowedError

    counted_once(broker, "client_name", refuse)


@pytest.mark.parametrize("command", ["producer", "subscribe", "schema"])
def test_a_system_topic(broker: BrokerProcess, command: str) -> None:
    raw = connected(broker)
    system = "persistent://pulsar/system/__transaction_log_0"

    def refuse() -> None:
        if command == "producer":
            answer = raw.producer(system)
            assert answer.error.error == ServerError.NotAllowedError
        elif command == "subscribe":
            answer = raw.request(subscribe(system, "s"), T.ERROR)
            assert answer.error.error == ServerError.NotAllowedError
        else:
            cmd = T(type=T.GET_OR_CREATE_SCHEMA)
            c = cmd.getOrCreateSchema
            c.topic, c.request_id = system, 5
            c.schema.name, c.schema.type, c.schema.schema_data = "s", pb.Schema.String, b""
            r = raw.request(cmd, T.GET_OR_CREATE_SCHEMA_RESPONSE).getOrCreateSchemaResponse
            assert r.error_code == ServerError.NotAllowedError

    counted_once(broker, "system_topic", refuse)


def test_a_system_topic_added_to_a_transaction(broker: BrokerProcess) -> None:
    tc = RawCoordinator(broker.port)
    txn = tc.new_txn()

    def refuse() -> None:
        answer = tc.add_partition(txn.txnid_most_bits, txn.txnid_least_bits,
                                  "persistent://pulsar/system/__transaction_log_0")
        assert answer.error == ServerError.NotAllowedError

    counted_once(broker, "system_topic", refuse)


def test_a_bad_participant_counts_in_the_transaction_family_only(
    broker: BrokerProcess,
) -> None:
    tc = RawCoordinator(broker.port)
    txn = tc.new_txn()

    def refuse() -> None:
        answer = tc.add_partition(txn.txnid_most_bits, txn.txnid_least_bits,
                                  "persistent://public/default/a/b")
        assert answer.error == ServerError.InvalidTopicName

    counted_once(broker, "invalid_name", refuse, family=TXN_FAMILY)


def test_a_frame_over_the_size_limit_closes_the_connection(broker: BrokerProcess) -> None:
    raw = connected(broker)

    def refuse() -> None:
        # A frame claiming 64 MiB, far over maxMessageSize: refused on its header.
        raw.send_bytes(struct.pack(">II", 64 * 1024 * 1024, 10) + b"\x00" * 8)
        assert raw.is_closed_by_peer()

    counted_once(broker, "frame_size", refuse)


@pytest.mark.parametrize("violation", ["before_connect", "undecodable"])
def test_a_protocol_violation_closes_the_connection(
    broker: BrokerProcess, violation: str
) -> None:
    raw = Raw(broker.port)
    if violation == "undecodable":
        raw.connect()

    def refuse() -> None:
        if violation == "before_connect":
            raw.send(T(type=T.PING))
        else:  # a command whose protobuf cannot be parsed
            body = b"\xff\xff\xff"
            raw.send_bytes(struct.pack(">II", 4 + len(body), len(body)) + body)
        assert raw.is_closed_by_peer()

    counted_once(broker, "protocol_violation", refuse)


# -- admin API ----------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "status"), [
    (b"0", 406),
    (b"10001", 406),  # over maxNumPartitionsPerPartitionedTopic (10,000)
    (b"99999999999", 400),  # no Java int holds it
])
def test_a_partition_count_out_of_bounds(broker: BrokerProcess, body: bytes,
                                         status: int) -> None:
    path = "/admin/v2/persistent/public/default/" + topic_name().rpartition("/")[2]

    def refuse() -> None:
        got, answer = admin(broker, "PUT", path + "/partitions", body)
        assert got == status, answer
        assert "reason" in answer

    counted_once(broker, "partitions", refuse)


def test_a_default_partition_count_out_of_bounds(broker: BrokerProcess) -> None:
    body = json.dumps({"allowAutoTopicCreation": True, "topicType": "partitioned",
                       "defaultNumPartitions": 10001}).encode()

    def refuse() -> None:
        got, answer = admin(broker, "POST",
                            "/admin/v2/namespaces/public/default/autoTopicCreation", body)
        assert got == 406, answer

    counted_once(broker, "partitions", refuse)


def test_an_admin_body_over_the_size_limit(broker: BrokerProcess) -> None:
    path = "/admin/v2/persistent/public/default/" + topic_name().rpartition("/")[2]

    def refuse() -> None:
        got, _ = admin(broker, "PUT", path + "/partitions", b"1" + b" " * (1024 * 1024))
        assert got == 413

    counted_once(broker, "admin_body_size", refuse)


def test_admin_json_nested_too_deeply(broker: BrokerProcess) -> None:
    body = b"[" * 200_000 + b"]" * 200_000

    def refuse() -> None:
        got, answer = admin(broker, "POST",
                            "/admin/v2/namespaces/public/default/autoTopicCreation", body)
        assert (got, answer["reason"]) == (
            400, "Malformed JSON request body: nested too deeply")

    counted_once(broker, "admin_json_depth", refuse)


@pytest.mark.parametrize("path", ["/admin/v2/namespaces/pulsar/system",
                                  "/admin/v2/tenants/pulsar"])
def test_deleting_the_system_tenant_or_namespace(broker: BrokerProcess, path: str) -> None:
    def refuse() -> None:
        got, answer = admin(broker, "DELETE", path)
        assert got == 412, answer

    counted_once(broker, "system_namespace", refuse)


@pytest.mark.parametrize(("path", "reason"), [
    ("/admin/v2/persistent/public/default/a%2Fb/stats", "topic_name"),
    ("/admin/v2/namespaces/public/no%20such%20ns/topics", "namespace_name"),
    ("/admin/v2/tenants/no%20such%20tenant", "namespace_name"),
])
def test_a_malformed_name_in_an_admin_path(broker: BrokerProcess, path: str,
                                           reason: str) -> None:
    def refuse() -> None:
        got, answer = admin(broker, "GET", path)
        assert got == 412, answer

    counted_once(broker, reason, refuse)


def test_an_over_long_client_name_in_the_transactions_api(broker: BrokerProcess) -> None:
    def refuse() -> None:
        got, answer = admin(
            broker, "GET", "/admin/v3/transactions/clientTransactions/" + "n" * 1025
        )
        assert got == 400, answer

    counted_once(broker, "client_name", refuse)
