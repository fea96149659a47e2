"""Per-topic admin operations against a real broker process, driven by the official
``pulsar-client`` (and quasar's client where the scenario runs for both): skip,
clear-backlog, reset-cursor, peek / examine / get-by-id, last message id, unload and
terminate, over REST and through ``quasar admin topics``."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from quasar.cli.main import main
from quasar.protocol import pb
from quasar.testing.hostile import HostileClient
from quasar.testing.process import BrokerProcess

from .conftest import Admin, assert_no_message, make_client, receive_all, topic_path

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("restore_logging")]

T = pb.BaseCommand


@pytest.fixture
def pulsar_client(broker: BrokerProcess) -> Iterator[Any]:
    import pulsar

    c = make_client(pulsar, broker.url)
    yield c
    c.close()


def cli(broker: BrokerProcess, *argv: str) -> int:
    return main(["--log-level", "WARNING", "admin", "--admin-url", broker.admin_url, *argv])


def produce(client: Any, topic: str, n: int, **properties: str) -> list[Any]:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m-{i}".encode(), properties=properties or None) for i in range(n)]
    producer.close()
    return ids


def subscribe(client: Any, mod: Any, topic: str, name: str = "sub", **kw: Any) -> Any:
    return client.subscribe(
        topic, name, initial_position=mod.InitialPosition.Earliest, **kw
    )


def backlog(admin: Admin, topic: str, sub: str = "sub") -> int:
    stats = admin.ok("GET", topic_path(topic) + "/stats")
    return int(stats["subscriptions"][sub]["msgBacklog"])


def wait_acked(admin: Admin, topic: str, sub: str = "sub") -> None:
    """Wait until the broker has every ack (clients send acks in groups, later)."""
    deadline = time.monotonic() + 10
    while backlog(admin, topic, sub) != 0:
        assert time.monotonic() < deadline, "the acks never reached the broker"
        time.sleep(0.05)


def get_raw(admin: Admin, path: str) -> tuple[int, dict[str, str], bytes]:
    """GET an answer that is a message: status, headers, raw body."""
    req = urllib.request.Request(admin.base + path)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def text(message: Any) -> str:
    return bytes(message.data()).decode()


# -- skip, clear-backlog --------------------------------------------------------------
def test_skip_leaves_the_rest_of_the_backlog(
    client: Any, pulsar_mod: Any, topic: str, admin: Admin
) -> None:
    subscribe(client, pulsar_mod, topic).close()
    produce(client, topic, 10)
    admin.ok("POST", topic_path(topic) + "/subscription/sub/skip/3")
    assert backlog(admin, topic) == 7
    consumer = subscribe(client, pulsar_mod, topic)
    assert [text(m) for m in receive_all(consumer, 7)] == [f"m-{i}" for i in range(3, 10)]


def test_skip_and_clear_backlog_from_the_command_line(
    pulsar_client: Any, topic: str, admin: Admin, broker: BrokerProcess,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import pulsar

    subscribe(pulsar_client, pulsar, topic).close()
    produce(pulsar_client, topic, 10)
    assert cli(broker, "topics", "skip", topic, "-s", "sub", "-n", "4") == 0
    assert backlog(admin, topic) == 6
    assert cli(broker, "topics", "clear-backlog", topic, "-s", "sub") == 0
    assert backlog(admin, topic) == 0
    consumer = subscribe(pulsar_client, pulsar, topic)
    assert_no_message(consumer, pulsar)
    # Unknown subscription and topic: Pulsar's 404s.
    assert cli(broker, "topics", "skip", topic, "-s", "nope", "-n", "1") == 1
    assert "404 Subscription not found" in capsys.readouterr().err
    assert cli(broker, "topics", "clear-backlog", topic + "-missing", "-s", "sub") == 1
    assert "404" in capsys.readouterr().err


def test_skip_refuses_bad_counts(pulsar_client: Any, topic: str, admin: Admin) -> None:
    import pulsar

    subscribe(pulsar_client, pulsar, topic).close()
    path = topic_path(topic) + "/subscription/sub/skip/"
    assert admin.request("POST", path + "abc")[0] == 400
    assert admin.request("POST", path + "-1")[0] == 412
    assert admin.request("POST", path + "9" * 40)[0] == 400


def test_skip_on_a_partitioned_topic_skips_each_partition(
    pulsar_client: Any, topic: str, admin: Admin
) -> None:
    import pulsar

    admin.ok("PUT", topic_path(topic) + "/partitions", 2)
    subscribe(pulsar_client, pulsar, topic).close()
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    for i in range(10):
        producer.send(f"m-{i}".encode(), partition_key=f"k{i % 2}")
    producer.close()
    stats = admin.ok("GET", topic_path(topic) + "/partitioned-stats")
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 10
    per_partition = [
        backlog(admin, f"{topic}-partition-{i}") for i in range(2)
    ]
    admin.ok("POST", topic_path(topic) + "/subscription/sub/skip/1")
    after = [backlog(admin, f"{topic}-partition-{i}") for i in range(2)]
    assert after == [max(n - 1, 0) for n in per_partition]
    admin.ok("POST", topic_path(topic) + "/subscription/sub/skip_all")
    stats = admin.ok("GET", topic_path(topic) + "/partitioned-stats")
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0
    assert admin.request("POST", topic_path(topic) + "/subscription/nope/skip_all")[0] == 404


# -- reset-cursor ---------------------------------------------------------------------
def test_reset_cursor_by_time_redelivers_to_a_connected_consumer(
    client: Any, pulsar_mod: Any, topic: str, admin: Admin
) -> None:
    consumer = subscribe(client, pulsar_mod, topic)
    produce(client, topic, 5)
    for message in receive_all(consumer, 5):
        consumer.acknowledge(message)
    wait_acked(admin, topic)
    assert admin.request("POST", topic_path(topic) + "/subscription/sub/resetcursor/0")[0] == 204
    # The consumer is disconnected, reconnects, and gets everything again.
    assert [text(m) for m in receive_all(consumer, 5)] == [f"m-{i}" for i in range(5)]


def test_reset_cursor_to_a_message_id(
    pulsar_client: Any, topic: str, admin: Admin, broker: BrokerProcess
) -> None:
    import pulsar

    consumer = subscribe(pulsar_client, pulsar, topic)
    ids = produce(pulsar_client, topic, 10)
    for message in receive_all(consumer, 10):
        consumer.acknowledge(message)
    wait_acked(admin, topic)
    fifth = ids[5]
    position = f"{fifth.ledger_id()}:{fifth.entry_id()}"
    assert cli(broker, "topics", "reset-cursor", topic, "-s", "sub", "-m", position) == 0
    assert [text(m) for m in receive_all(consumer, 5)] == [f"m-{i}" for i in range(5, 10)]
    # Excluded: delivery starts after the given message.
    body = {"ledgerId": fifth.ledger_id(), "entryId": fifth.entry_id(), "excluded": True}
    admin.ok("POST", topic_path(topic) + "/subscription/sub/resetcursor", body)
    assert [text(m) for m in receive_all(consumer, 4)] == [f"m-{i}" for i in range(6, 10)]
    consumer.close()
    # No such position: 412; malformed bodies: 400.
    status, answer = admin.request(
        "POST", topic_path(topic) + "/subscription/sub/resetcursor",
        {"ledgerId": fifth.ledger_id() + 1000, "entryId": 0},
    )
    assert status == 412 and "Unable to find position" in answer["reason"]
    for bad in ({"ledgerId": "x", "entryId": 0}, [1, 2], {"ledgerId": 1, "entryId": 0, "x": 1}):
        status, _ = admin.request(
            "POST", topic_path(topic) + "/subscription/sub/resetcursor", bad
        )
        assert status == 400
    assert cli(broker, "topics", "reset-cursor", topic, "-s", "sub", "-m", "earliest") == 0
    assert backlog(admin, topic) == 10


def test_reset_cursor_relative_time_from_the_command_line(
    pulsar_client: Any, topic: str, admin: Admin, broker: BrokerProcess
) -> None:
    import pulsar

    consumer = subscribe(pulsar_client, pulsar, topic)
    produce(pulsar_client, topic, 3)
    for message in receive_all(consumer, 3):
        consumer.acknowledge(message)
    wait_acked(admin, topic)
    consumer.close()
    assert cli(broker, "topics", "reset-cursor", topic, "-s", "sub", "-t", "10m") == 0
    assert backlog(admin, topic) == 3


# -- peek, examine, get-by-id, last message id ----------------------------------------
def test_peek_shows_payload_and_headers_without_consuming(
    pulsar_client: Any, topic: str, admin: Admin
) -> None:
    import pulsar

    subscribe(pulsar_client, pulsar, topic).close()
    ids = produce(pulsar_client, topic, 3, origin="test")
    status, headers, body = get_raw(admin, topic_path(topic) + "/subscription/sub/position/2")
    assert status == 200
    assert body == b"m-1"
    assert headers["X-Pulsar-Message-ID"] == f"{ids[1].ledger_id()}:{ids[1].entry_id()}"
    assert headers["X-Pulsar-PROPERTY-origin"] == "test"
    assert headers["X-Pulsar-publish-time"].endswith("Z")
    assert backlog(admin, topic) == 3
    # Past the backlog; a bad position; an unknown subscription.
    assert get_raw(admin, topic_path(topic) + "/subscription/sub/position/4")[0] == 404
    assert get_raw(admin, topic_path(topic) + "/subscription/sub/position/0")[0] == 412
    assert get_raw(admin, topic_path(topic) + "/subscription/sub/position/x")[0] == 400
    assert get_raw(admin, topic_path(topic) + "/subscription/nope/position/1")[0] == 404


def test_peek_examine_and_get_by_id_from_the_command_line(
    pulsar_client: Any, topic: str, broker: BrokerProcess,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import pulsar

    subscribe(pulsar_client, pulsar, topic).close()
    ids = produce(pulsar_client, topic, 3, origin="cli")
    capsys.readouterr()
    assert cli(broker, "topics", "peek-messages", topic, "-s", "sub", "-n", "2") == 0
    out = capsys.readouterr().out
    assert f"Message ID: {ids[0].ledger_id()}:{ids[0].entry_id()}" in out
    assert "|m-0" in out and "|m-1" in out and '"origin": "cli"' in out
    assert cli(broker, "--output", "json", "topics", "examine-message", topic,
               "-i", "earliest", "-m", "3") == 0
    [record] = json.loads(capsys.readouterr().out)
    assert record["payload"] == "m-2" and record["properties"] == {"origin": "cli"}
    assert cli(broker, "topics", "examine-message", topic) == 0
    assert "|m-2" in capsys.readouterr().out
    last = ids[2]
    assert cli(broker, "--output", "json", "topics", "get-message-by-id", topic,
               "-l", str(last.ledger_id()), "-e", str(last.entry_id())) == 0
    assert json.loads(capsys.readouterr().out)[0]["payload"] == "m-2"
    assert cli(broker, "topics", "get-message-by-id", topic,
               "-l", str(last.ledger_id()), "-e", str(last.entry_id() + 5)) == 1
    assert "404 Message not found" in capsys.readouterr().err
    assert cli(broker, "--output", "json", "topics", "last-message-id", topic) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["ledgerId"], answer["entryId"]) == (last.ledger_id(), last.entry_id())


def test_message_reads_refuse_a_partitioned_topic(topic: str, admin: Admin) -> None:
    admin.ok("PUT", topic_path(topic) + "/partitions", 2)
    for path in ("/subscription/sub/position/1", "/examinemessage", "/ledger/1/entry/0",
                 "/lastMessageId"):
        assert get_raw(admin, topic_path(topic) + path)[0] == 405, path


# -- unload, terminate ----------------------------------------------------------------
def test_unload_lets_clients_reconnect_and_continue(
    client: Any, pulsar_mod: Any, topic: str, admin: Admin, broker: BrokerProcess
) -> None:
    consumer = subscribe(client, pulsar_mod, topic)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    first = consumer.receive(10_000)
    assert text(first) == "before"
    consumer.acknowledge(first)
    wait_acked(admin, topic)
    assert cli(broker, "topics", "unload", topic) == 0
    producer.send(b"after")
    message = consumer.receive(10_000)
    assert text(message) == "after"
    consumer.acknowledge(message)
    assert admin.request("PUT", topic_path(topic + "-missing") + "/unload")[0] == 404


def test_terminate_refuses_producers_and_keeps_messages_for_consumers(
    pulsar_client: Any, topic: str, admin: Admin, broker: BrokerProcess,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import pulsar

    consumer = subscribe(pulsar_client, pulsar, topic)
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m-{i}".encode()) for i in range(3)]
    capsys.readouterr()
    assert cli(broker, "--output", "json", "topics", "terminate", topic) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["ledgerId"], answer["entryId"]) == (ids[2].ledger_id(), ids[2].entry_id())
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"late")
    with pytest.raises(pulsar.TopicTerminated):
        pulsar_client.create_producer(topic)
    assert [text(m) for m in receive_all(consumer, 3)] == ["m-0", "m-1", "m-2"]
    # Idempotent, and the last message id stays the same.
    assert admin.ok("POST", topic_path(topic) + "/terminate") == answer
    # Survives an unload.
    admin.ok("PUT", topic_path(topic) + "/unload")
    with pytest.raises(pulsar.TopicTerminated):
        pulsar_client.create_producer(topic)


# -- subscriptions and compaction from the command line -------------------------------
def test_subscription_and_compaction_commands(
    pulsar_client: Any, topic: str, admin: Admin, broker: BrokerProcess,
    capsys: pytest.CaptureFixture[str],
) -> None:
    produce(pulsar_client, topic, 4)
    assert cli(broker, "topics", "create-subscription", topic, "-s", "a", "-m", "earliest") == 0
    assert cli(broker, "topics", "create-subscription", topic, "-s", "b") == 0
    assert backlog(admin, topic, "a") == 4 and backlog(admin, topic, "b") == 0
    assert cli(broker, "topics", "create-subscription", topic, "-s", "a") == 1
    assert "409" in capsys.readouterr().err
    assert cli(broker, "topics", "unsubscribe", topic, "-s", "b") == 0
    assert admin.ok("GET", topic_path(topic) + "/subscriptions") == ["a"]
    assert cli(broker, "topics", "unsubscribe", topic, "-s", "b", "-f") == 1
    assert "404" in capsys.readouterr().err
    assert cli(broker, "topics", "compact", topic) == 0
    assert cli(broker, "--output", "json", "topics", "compaction-status", topic, "-w") == 0
    assert json.loads(capsys.readouterr().out)["status"] == "SUCCESS"


def test_consumers_that_acknowledged_everything_reach_the_end_of_a_terminated_topic(
    topic: str, admin: Admin, broker: BrokerProcess
) -> None:
    """REACHED_END_OF_TOPIC (which the Python clients do not surface) on the wire: sent
    once the subscription has acknowledged everything, whether that was before the
    termination or after it."""
    conn = HostileClient(broker.port)
    try:
        cid = conn.subscribe(topic, "sub", pb.CommandSubscribe.Exclusive)
        idle = conn.subscribe(topic, "idle", pb.CommandSubscribe.Exclusive)
        pid = conn.producer(topic)
        for seq in range(2):
            assert conn.send_message(pid, seq).type == T.SEND_RECEIPT
        conn.raw.send(T(type=T.FLOW, flow=pb.CommandFlow(consumer_id=cid, messagePermits=10)))
        messages = [conn.raw.recv_type(T.MESSAGE).message for _ in range(2)]
        admin.ok("POST", topic_path(topic) + "/terminate")
        # The producer is closed, and refused when it comes back.
        assert conn.raw.recv_type(T.CLOSE_PRODUCER).close_producer.producer_id == pid
        answer = conn.raw.producer(topic, producer_id=conn.new_id(), request_id=conn.new_id())
        assert answer.type == T.ERROR and answer.error.error == pb.TopicTerminatedError
        ack = T(type=T.ACK)
        ack.ack.consumer_id, ack.ack.ack_type = cid, pb.CommandAck.Individual
        for m in messages:
            ack.ack.message_id.add().CopyFrom(m.message_id)
        conn.raw.send(ack)
        end = conn.raw.recv_type(T.REACHED_END_OF_TOPIC)
        assert end.reachedEndOfTopic.consumer_id == cid
        # A subscription with a backlog has not reached the end.
        assert backlog(admin, topic, "idle") == 2
        admin.ok("POST", topic_path(topic) + "/subscription/idle/skip_all")
        conn.raw.send(T(type=T.FLOW, flow=pb.CommandFlow(consumer_id=idle, messagePermits=10)))
        end = conn.raw.recv_type(T.REACHED_END_OF_TOPIC)
        assert end.reachedEndOfTopic.consumer_id == idle
    finally:
        conn.close()
