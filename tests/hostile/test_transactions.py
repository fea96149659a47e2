"""Hostile transaction requests against a real broker: a transaction can only register
participants its end can reach, so a commit is never half done; NEW_TXN is bounded in
number and timeout; every refusal is answered on the request, the connection and
other clients are still served, and what was stored survives a restart."""

from __future__ import annotations

import json
import logging
import urllib.request
import uuid
from collections.abc import Iterator

import pulsar
import pytest

from quasar.errors import ServerError
from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, RawCoordinator, RawTxnProducer

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
COMMIT, ABORT = pb.COMMIT, pb.ABORT
MAX_ACTIVE = 4
MAX_TIMEOUT_MS = 600_000
# What the tests of this module committed, read again after the restart at its end.
COMMITTED: list[tuple[str, bytes]] = []


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("hostile_transactions") / "data"
    proc = BrokerProcess(
        data,
        settings={
            "maxActiveTransactionsPerCoordinator": str(MAX_ACTIVE),
            "transactionMaxTimeoutMillis": str(MAX_TIMEOUT_MS),
        },
    ).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


# -- helpers ---------------------------------------------------------------------------
def topic_name(prefix: str, namespace: str = "public/default") -> str:
    return f"persistent://{namespace}/{prefix}-{uuid.uuid4().hex[:8]}"


def metric(broker: BrokerProcess, name: str, reason: str) -> float:
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    prefix = f'{name}_total{{reason="{reason}"}} '
    return float(next(line for line in text.splitlines() if line.startswith(prefix))
                 [len(prefix):])


def admin(broker: BrokerProcess, method: str, path: str, body: object = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        broker.admin_url + path, data=data, method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status in (200, 204), answer.status


def ping_round_trip(raw: Raw) -> None:
    raw.send(T(type=T.PING))
    raw.recv_type(T.PONG)


def client(broker: BrokerProcess) -> pulsar.Client:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.ERROR)
    return pulsar.Client(broker.url, operation_timeout_seconds=10, logger=logger)


def assert_others_served(broker: BrokerProcess) -> None:
    """A PING round trip on a new connection, and a produce/consume on another topic."""
    raw = Raw(broker.port)
    raw.connect()
    ping_round_trip(raw)
    c = client(broker)
    try:
        name = topic_name("bystander")
        consumer = c.subscribe(name, "s")
        c.create_producer(name).send(b"still served")
        assert consumer.receive(10_000).data() == b"still served"
    finally:
        c.close()


def restarted(broker: BrokerProcess) -> None:
    assert broker.stop() == 0, broker.read_log()
    broker.start()


def read_all(broker: BrokerProcess, topic: str, count: int) -> list[bytes]:
    c = client(broker)
    try:
        consumer = c.subscribe(topic, f"r-{uuid.uuid4().hex[:6]}",
                               initial_position=pulsar.InitialPosition.Earliest)
        return [consumer.receive(10_000).data() for _ in range(count)]
    finally:
        c.close()


# -- a commit is never half done -------------------------------------------------------
BAD_PARTITIONS = [
    # (name, error, metric reason)
    ("persistent://public/default/a/b", ServerError.InvalidTopicName, "invalid_name"),
    ("persistent://public/default/" + "x" * 5000, ServerError.InvalidTopicName,
     "invalid_name"),
    ("non-persistent://public/default/t", ServerError.NotAllowedError, "not_allowed"),
    ("persistent://public/no-such-namespace/t", ServerError.TopicNotFound, "not_found"),
    ("persistent://no-such-tenant/ns/t", ServerError.TopicNotFound, "not_found"),
]


@pytest.mark.parametrize(("bad", "error", "reason"), BAD_PARTITIONS)
def test_a_participant_the_end_cannot_reach_is_refused_so_the_commit_is_whole(
    broker: BrokerProcess, bad: str, error: int, reason: str
) -> None:
    good = topic_name("whole")
    p = RawTxnProducer(broker.port, good)
    txn = p.new_txn(add_topic=False)
    assert not p.tc.add_partition(*txn, good).HasField("error")
    before = metric(broker, "quasar_txn_refused", reason)
    answer = p.tc.add_partition(*txn, bad)
    assert answer.error == error, answer
    assert metric(broker, "quasar_txn_refused", reason) == before + 1
    ping_round_trip(p.raw)  # the connection stays open
    assert p.send(b"committed", txn).type == T.SEND_RECEIPT
    assert not p.tc.end(*txn, COMMIT).HasField("error")  # covers the good partition only
    assert read_all(broker, good, 1) == [b"committed"]
    COMMITTED.append((good, b"committed"))
    assert_others_served(broker)


def test_a_partitioned_topics_base_name_is_refused(broker: BrokerProcess) -> None:
    base = topic_name("partitioned")
    admin(broker, "PUT", "/admin/v2/" + base.replace("://", "/") + "/partitions", 2)
    tc = RawCoordinator(broker.port)
    r = tc.new_txn(0)
    txn = r.txnid_most_bits, r.txnid_least_bits
    assert tc.add_partition(*txn, base).error == ServerError.NotAllowedError
    assert not tc.add_partition(*txn, base + "-partition-1").HasField("error")
    assert not tc.end(*txn, COMMIT).HasField("error")
    ping_round_trip(tc.raw)


@pytest.mark.parametrize(
    ("topic", "sub", "error"),
    [
        (None, "", ServerError.InvalidTopicName),
        (None, "s" * 1025, ServerError.InvalidTopicName),
        ("persistent://public/default/never-created-topic", "s", ServerError.TopicNotFound),
        ("persistent://public/no-such-namespace/t", "s", ServerError.TopicNotFound),
        ("non-persistent://public/default/t", "s", ServerError.NotAllowedError),
        ("persistent://public/default/a/b", "s", ServerError.InvalidTopicName),
    ],
)
def test_a_subscription_the_end_cannot_reach_is_refused(
    broker: BrokerProcess, topic: str | None, sub: str, error: int
) -> None:
    existing = topic_name("acked")
    p = RawTxnProducer(broker.port, existing)  # creates the topic
    txn = p.new_txn(add_topic=False)
    answer = p.tc.add_subscription(*txn, topic or existing, sub)
    assert answer.error == error, answer
    assert not p.tc.add_subscription(*txn, existing, "s" * 1024).HasField("error")
    assert not p.tc.end(*txn, ABORT).HasField("error")
    ping_round_trip(p.raw)


def test_a_participant_whose_namespace_is_deleted_still_lets_the_commit_end(
    broker: BrokerProcess,
) -> None:
    namespace = f"public/gone-{uuid.uuid4().hex[:6]}"
    admin(broker, "PUT", f"/admin/v2/namespaces/{namespace}", {})
    doomed = topic_name("doomed", namespace)
    good = topic_name("kept")
    p = RawTxnProducer(broker.port, good)
    txn = p.new_txn(add_topic=False)
    assert not p.tc.add_partition(*txn, good).HasField("error")
    assert not p.tc.add_partition(*txn, doomed).HasField("error")
    assert p.send(b"kept", txn).type == T.SEND_RECEIPT
    admin(broker, "DELETE", f"/admin/v2/namespaces/{namespace}")
    before = metric(broker, "quasar_txn_end_participant_skipped", "not_found")
    assert not p.tc.end(*txn, COMMIT).HasField("error")
    assert metric(broker, "quasar_txn_end_participant_skipped", "not_found") == before + 1
    assert read_all(broker, good, 1) == [b"kept"]
    COMMITTED.append((good, b"kept"))


# -- NEW_TXN bounds --------------------------------------------------------------------
def test_a_timeout_above_the_maximum_is_refused(broker: BrokerProcess) -> None:
    tc = RawCoordinator(broker.port)
    before = metric(broker, "quasar_txn_refused", "timeout")
    answer = tc.new_txn(0, ttl_ms=MAX_TIMEOUT_MS + 1)
    assert answer.error == ServerError.NotAllowedError, answer
    assert "transactionMaxTimeoutMillis" in answer.message
    assert metric(broker, "quasar_txn_refused", "timeout") == before + 1
    for ttl in (MAX_TIMEOUT_MS, None, 0):  # at the bound, and the default
        r = tc.new_txn(0, ttl_ms=ttl)
        assert not r.HasField("error"), r
        assert not tc.end(r.txnid_most_bits, r.txnid_least_bits, ABORT).HasField("error")
    ping_round_trip(tc.raw)


def test_active_transactions_are_bounded_and_survive_a_restart(broker: BrokerProcess) -> None:
    """Last in the module: it restarts the broker, and reads back what the tests
    before it committed."""
    topic = topic_name("bounded")
    p = RawTxnProducer(broker.port, topic)
    txns = [p.new_txn(ttl_ms=MAX_TIMEOUT_MS, add_topic=False) for _ in range(MAX_ACTIVE)]
    for txn in txns:
        assert not p.tc.add_partition(*txn, topic).HasField("error")
    assert p.send(b"first", txns[0]).type == T.SEND_RECEIPT
    before = metric(broker, "quasar_txn_refused", "max_active_transactions")
    answer = p.tc.new_txn(0)
    assert answer.error == ServerError.UnknownError, answer  # as Pulsar answers
    assert "reach max active txn" in answer.message
    assert metric(broker, "quasar_txn_refused", "max_active_transactions") == before + 1
    ping_round_trip(p.raw)
    assert_others_served(broker)

    # The open transactions are replayed from the coordinator's log and still count.
    restarted(broker)
    tc = RawCoordinator(broker.port)
    assert not tc.connect(0).HasField("error")
    assert tc.new_txn(0).error == ServerError.UnknownError
    # Existing transactions were unaffected: each ends, and the limit frees up.
    assert not tc.end(*txns[0], COMMIT).HasField("error")
    for txn in txns[1:]:
        assert not tc.end(*txn, ABORT).HasField("error")
    r = tc.new_txn(0)
    assert not r.HasField("error"), r
    assert not tc.end(r.txnid_most_bits, r.txnid_least_bits, ABORT).HasField("error")
    assert read_all(broker, topic, 1) == [b"first"]
    # What the refused requests of the tests before left behind did not harm the
    # restart: their committed messages are all there.
    for committed_topic, payload in COMMITTED:
        assert read_all(broker, committed_topic, 1) == [payload]
