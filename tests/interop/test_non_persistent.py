"""Non-persistent topics through a real broker, with both clients.

Messages go only to consumers connected when they are published; nothing is stored.
A consumer is ready for messages once the broker has its permits (its FLOW), so
tests wait for ``availablePermits`` in the topic stats before producing rather than
hoping the FLOW arrived first.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from quasar.errors import ServerError
from quasar.protocol import encode_message, pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, RawCoordinator

from .conftest import Admin, make_client

pytestmark = pytest.mark.interop

WAIT_S = 10.0
T = pb.BaseCommand


def _np_topic() -> str:
    return f"non-persistent://public/default/np-{uuid.uuid4().hex[:12]}"


def _stats_path(topic: str) -> str:
    return "/admin/v2/" + topic.replace("://", "/", 1) + "/stats"


def _wait_for(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)  # polling interval of a bounded wait
    raise AssertionError(f"timed out waiting for {what}")


def _wait_permits(admin: Admin, topic: str, subscription: str, consumers: int) -> None:
    """Until ``consumers`` consumers of ``subscription`` have permits at the broker."""

    def ready() -> bool:
        status, stats = admin.request("GET", _stats_path(topic))
        if status != 200:
            return False
        sub = stats["subscriptions"].get(subscription)
        ready_consumers = [c for c in (sub or {}).get("consumers", []) if c["availablePermits"] > 0]
        return len(ready_consumers) >= consumers

    _wait_for(ready, f"{consumers} consumers with permits on {subscription}")


def _drain(consumer: Any, mod: Any, timeout_ms: int = 300) -> list[bytes]:
    out = []
    while True:
        try:
            m = consumer.receive(timeout_ms)
        except mod.Timeout:
            return out
        out.append(m.data())
        consumer.acknowledge(m)


def test_shared_subscription_splits_messages_without_duplicates(
    client: Any, pulsar_mod: Any, admin: Admin
) -> None:
    topic = _np_topic()
    shared = pulsar_mod.ConsumerType.Shared
    c1 = client.subscribe(topic, "sh", consumer_type=shared)
    c2 = client.subscribe(topic, "sh", consumer_type=shared)
    _wait_permits(admin, topic, "sh", 2)
    producer = client.create_producer(topic, batching_enabled=False)
    msg_id = producer.send(b"m-0")
    for i in range(1, 20):
        producer.send(f"m-{i}".encode())
    # Pulsar answers every non-persistent message with the id 0:0.
    assert (msg_id.ledger_id(), msg_id.entry_id()) == (0, 0)
    got1, got2 = _drain(c1, pulsar_mod), _drain(c2, pulsar_mod)
    assert sorted(got1 + got2) == sorted(f"m-{i}".encode() for i in range(20))
    assert got1 and got2, "a Shared subscription spreads messages over its consumers"
    stats = admin.ok("GET", _stats_path(topic))
    assert stats["msgInCounter"] == 20
    assert stats["subscriptions"]["sh"]["msgOutCounter"] == 20
    assert stats["subscriptions"]["sh"]["msgBacklog"] == 0
    assert stats["storageSize"] == 0
    producer.close()


def test_message_without_subscription_is_gone(
    client: Any, pulsar_mod: Any, admin: Admin
) -> None:
    topic = _np_topic()
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(f"lost-{i}".encode())
    consumer = client.subscribe(
        topic, "late", initial_position=pulsar_mod.InitialPosition.Earliest
    )
    _wait_permits(admin, topic, "late", 1)
    producer.send(b"after")
    # Only what was published while the consumer was connected arrives.
    assert _drain(consumer, pulsar_mod) == [b"after"]
    assert admin.ok("GET", _stats_path(topic))["msgInCounter"] == 4
    producer.close()


def test_consumer_without_permits_has_messages_dropped_and_counted(
    client: Any, pulsar_mod: Any, admin: Admin
) -> None:
    topic = _np_topic()
    consumer = client.subscribe(topic, "slow", receiver_queue_size=1)
    _wait_permits(admin, topic, "slow", 1)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"d-{i}".encode())
    stats = admin.ok("GET", _stats_path(topic))
    sub = stats["subscriptions"]["slow"]
    # The consumer took what its permits allowed; the rest was dropped, not queued.
    assert stats["msgInCounter"] == 20
    assert sub["msgDropCounter"] >= 15
    assert sub["msgOutCounter"] + sub["msgDropCounter"] == 20
    assert "msgDropRate" in sub and "msgDropRate" in stats
    assert [p["msgDropRate"] for p in stats["publishers"]] == [0.0]
    received = _drain(consumer, pulsar_mod)
    assert len(received) == sub["msgOutCounter"]
    producer.close()


def test_exclusive_subscription_refuses_a_second_consumer(
    client: Any, pulsar_mod: Any
) -> None:
    topic = _np_topic()
    client.subscribe(topic, "ex", consumer_type=pulsar_mod.ConsumerType.Exclusive)
    with pytest.raises(pulsar_mod.ConsumerBusy):
        client.subscribe(topic, "ex", consumer_type=pulsar_mod.ConsumerType.Exclusive)


def test_readers_from_latest_and_earliest_get_what_is_published_next(
    client: Any, pulsar_mod: Any, admin: Admin
) -> None:
    topic = _np_topic()
    readers = [
        client.create_reader(topic, pulsar_mod.MessageId.latest),
        client.create_reader(topic, pulsar_mod.MessageId.earliest),
    ]

    def both_ready() -> bool:
        status, stats = admin.request("GET", _stats_path(topic))
        return status == 200 and sum(
            1
            for sub in stats["subscriptions"].values()
            for c in sub["consumers"]
            if c["availablePermits"] > 0
        ) == 2

    _wait_for(both_ready, "two readers with permits")
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(f"r-{i}".encode())
    for reader in readers:
        assert [reader.read_next(5000).data() for _ in range(3)] == [b"r-0", b"r-1", b"r-2"]
    producer.close()


def test_failover_delivers_to_one_consumer(client: Any, pulsar_mod: Any, admin: Admin) -> None:
    topic = _np_topic()
    failover = pulsar_mod.ConsumerType.Failover
    consumers = [client.subscribe(topic, "fo", consumer_type=failover) for _ in range(2)]
    _wait_permits(admin, topic, "fo", 2)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"f-{i}".encode())
    got = sorted((_drain(c, pulsar_mod) for c in consumers), key=len)
    assert got == [[], [f"f-{i}".encode() for i in range(5)]]
    producer.close()


def test_seek_is_refused(client: Any, pulsar_mod: Any) -> None:
    topic = _np_topic()
    consumer = client.subscribe(topic, "seek")
    with pytest.raises(pulsar_mod.PulsarException):
        consumer.seek(pulsar_mod.MessageId.earliest)


def test_partitioned_non_persistent_topic(
    client: Any, pulsar_mod: Any, admin: Admin
) -> None:
    topic = _np_topic()
    path = "/admin/v2/" + topic.replace("://", "/", 1)
    admin.ok("PUT", path + "/partitions", 3)
    assert admin.ok("GET", path + "/partitions") == {"partitions": 3}
    namespace_list = admin.ok("GET", "/admin/v2/non-persistent/public/default")
    assert {f"{topic}-partition-{i}" for i in range(3)} <= set(namespace_list)
    assert topic in admin.ok("GET", "/admin/v2/non-persistent/public/default/partitioned")
    consumer = client.subscribe(topic, "parts")
    for i in range(3):
        _wait_permits(admin, f"{topic}-partition-{i}", "parts", 1)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(9):
        producer.send(f"p-{i}".encode(), partition_key=f"k{i}")
    assert sorted(_drain(consumer, pulsar_mod)) == sorted(f"p-{i}".encode() for i in range(9))
    stats = admin.ok("GET", path + "/partitioned-stats")
    assert stats["msgInCounter"] == 9 and stats["metadata"] == {"partitions": 3}
    producer.close()
    consumer.close()
    admin.ok("DELETE", path + "/partitions")
    assert admin.request("GET", path + "/partitions")[1] == {"partitions": 0}


def test_transaction_on_a_non_persistent_topic_is_refused(broker: BrokerProcess) -> None:
    """quasar's client: the transactional send fails (the official Python client
    has no transaction API; the wire test below covers what other clients send)."""
    import quasar.client as qc

    c = qc.Client(broker.url, operation_timeout_seconds=10, enable_transaction=True)
    try:
        producer = c.create_producer(_np_topic(), batching_enabled=False)
        txn = c.new_transaction()
        with pytest.raises(qc.PulsarException, match="non-persistent"):
            producer.send(b"in-txn", txn=txn)
        txn.abort()
    finally:
        c.close()


def test_transaction_on_a_non_persistent_topic_is_refused_on_the_wire(
    broker: BrokerProcess,
) -> None:
    """ADD_PARTITION_TO_TXN and a transactional SEND: both NotAllowedError."""
    topic = _np_topic()
    raw = Raw(broker.port)
    try:
        raw.connect()
        rc = RawCoordinator(raw)
        assert not rc.connect(0).HasField("error")
        created = rc.new_txn()
        most, least = created.txnid_most_bits, created.txnid_least_bits
        added = rc.add_partition(most, least, topic)
        assert added.error == ServerError.NotAllowedError, added
        answer = raw.producer(topic, producer_id=7, request_id=rc.next_request_id())
        assert answer.type == T.PRODUCER_SUCCESS, answer
        send = T(type=T.SEND)
        send.send.producer_id, send.send.sequence_id = 7, 0
        send.send.txnid_most_bits, send.send.txnid_least_bits = most, least
        metadata = pb.MessageMetadata(
            producer_name=answer.producer_success.producer_name, sequence_id=0, publish_time=1
        )
        raw.send_bytes(encode_message(send, metadata, b"raw"))
        error = raw.recv_type(T.SEND_ERROR).send_error
        assert error.error == ServerError.NotAllowedError, error
        assert "non-persistent" in error.message
    finally:
        raw.close()


def test_admin_stats_and_delete(client: Any, admin: Admin) -> None:
    topic = _np_topic()
    producer = client.create_producer(topic)
    path = "/admin/v2/" + topic.replace("://", "/", 1)
    stats = admin.ok("GET", path + "/stats")
    assert len(stats["publishers"]) == 1 and stats["subscriptions"] == {}
    assert topic in admin.ok("GET", "/admin/v2/non-persistent/public/default")
    status, _ = admin.request("DELETE", path)
    assert status == 412  # a connected producer, no force
    admin.ok("DELETE", path + "?force=true")
    assert admin.request("GET", path + "/stats")[0] == 404
    producer.close()


def test_nothing_is_stored_and_the_switch_refuses(tmp_path: Path) -> None:
    """Restart: no trace of the topic on disk; ``enableNonPersistentTopics=false``:
    refused with Pulsar's NotAllowedError."""
    import pulsar

    data = tmp_path / "data"
    broker = BrokerProcess(data).start()
    topic = _np_topic()
    try:
        client = make_client(pulsar, broker.url)
        consumer = client.subscribe(topic, "s")
        admin = Admin(broker.admin_url)
        _wait_permits(admin, topic, "s", 1)
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"x" * 64)
        assert consumer.receive(5000).data() == b"x" * 64
        client.close()
    finally:
        assert broker.stop() == 0, broker.read_log()
    local = topic.rsplit("/", 1)[1].encode()
    files = [p for p in data.rglob("*") if p.is_file()]
    assert files, "the broker stores its metadata there"
    for f in files:
        assert local not in str(f).encode() and local not in f.read_bytes(), f
    broker = BrokerProcess(data, settings={"enableNonPersistentTopics": "false"}).start()
    try:
        client = make_client(pulsar, broker.url)
        with pytest.raises(pulsar.NotAllowedError):
            client.subscribe(topic, "s")
        client.close()
    finally:
        assert broker.stop() == 0, broker.read_log()


def test_namespace_deletion_takes_non_persistent_partition_counts(admin: Admin) -> None:
    namespace = f"public/np-{uuid.uuid4().hex[:8]}"
    admin.ok("PUT", f"/admin/v2/namespaces/{namespace}")
    admin.ok("PUT", f"/admin/v2/non-persistent/{namespace}/p/partitions", 2)
    assert admin.request("DELETE", f"/admin/v2/namespaces/{namespace}")[0] == 409
    admin.ok("DELETE", f"/admin/v2/namespaces/{namespace}?force=true")
    admin.ok("PUT", f"/admin/v2/namespaces/{namespace}")
    assert admin.ok("GET", f"/admin/v2/non-persistent/{namespace}/partitioned") == []
