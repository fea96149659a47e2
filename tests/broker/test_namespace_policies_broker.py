"""Namespace policies enforced by a real broker process, driven by the official client.

Message TTL, the expireMessages endpoints, the three backlog-quota policies, namespace
unload / clearBacklog / unsubscribe, refusal of unsupported policy fields, and the
effect of the older policies (deduplication, auto topic creation). The broker runs its
TTL and quota checks every second (``messageExpiryCheckIntervalInSeconds``,
``backlogQuotaCheckIntervalInSeconds``); tests wait for the effect they expect with a
bounded poll of the admin API, never a fixed sleep.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pulsar
import pytest
from pulsar.schema import Integer, JsonSchema, Record, String, StringSchema

from quasar.cli.main import main
from quasar.errors import ServerError
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, close_all

# ``quasar`` commands configure the root logger; each test gets it back as it was.
pytestmark = pytest.mark.usefixtures("restore_logging")

NS_ROOT = "/admin/v2/namespaces"
WAIT_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("nspolicies") / "data",
        settings={
            "messageExpiryCheckIntervalInSeconds": "1",
            "backlogQuotaCheckIntervalInSeconds": "1",
            # Small ledgers, so that retention has consumed ledgers to keep or trim.
            "managedLedgerMaxEntriesPerLedger": "5",
            "managedLedgerMinLedgerRolloverTimeMinutes": "0",
        },
    ).start()
    yield proc
    close_all()
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.ERROR)
    c = pulsar.Client(broker.url, operation_timeout_seconds=5, logger=logger)
    yield c
    c.close()


def rest(
    broker: BrokerProcess, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        broker.admin_url + path, data=data, method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else None


@pytest.fixture
def ns(broker: BrokerProcess) -> str:
    """A fresh namespace per test: policies of one test never reach another."""
    name = f"public/p{uuid.uuid4().hex[:10]}"
    assert rest(broker, "PUT", f"{NS_ROOT}/{name}")[0] == 204
    return name


def wait_until(check: Callable[[], Any], what: str) -> Any:
    """Poll ``check`` (an admin read) until it is truthy; fail after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)  # polling interval of a bounded wait for the broker's check


def stats(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    status, body = rest(broker, "GET", f"/admin/v2/persistent/{topic}/stats")
    assert status == 200, body
    return body  # type: ignore[no-any-return]


def backlog(broker: BrokerProcess, topic: str, sub: str) -> int:
    return int(stats(broker, topic)["subscriptions"][sub]["msgBacklog"])


def subscribe(client: pulsar.Client, topic: str, sub: str) -> None:
    """Create a durable subscription at the end of the topic (then leave it)."""
    client.subscribe(f"persistent://{topic}", sub).close()


def produce(client: pulsar.Client, topic: str, count: int, size: int = 10) -> list[Any]:
    producer = client.create_producer(f"persistent://{topic}", batching_enabled=False)
    ids = [producer.send(b"x" * size) for _ in range(count)]
    producer.close()
    return ids


def metric(broker: BrokerProcess, name: str, **labels: str) -> float | None:
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


# -- message TTL ---------------------------------------------------------------------------


def test_message_ttl_policy_round_trip(broker: BrokerProcess, ns: str) -> None:
    path = f"{NS_ROOT}/{ns}/messageTTL"
    assert rest(broker, "GET", path)[0] == 204
    assert rest(broker, "POST", path, 120)[0] == 204
    assert rest(broker, "GET", path) == (200, 120)
    assert rest(broker, "POST", path, -1)[0] == 412
    assert rest(broker, "POST", path, "soon")[0] == 400
    assert rest(broker, "DELETE", path)[0] == 204
    assert rest(broker, "GET", path)[0] == 204
    assert rest(broker, "POST", f"{NS_ROOT}/public/missing/messageTTL", 5)[0] == 404


def test_ttl_expires_old_messages_on_every_subscription(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topic = f"{ns}/ttl"
    subscribe(client, topic, "a")
    subscribe(client, topic, "b")
    produce(client, topic, 3)
    assert backlog(broker, topic, "a") == 3
    assert rest(broker, "POST", f"{NS_ROOT}/{ns}/messageTTL", 1)[0] == 204
    wait_until(
        lambda: all(
            s["msgBacklog"] == 0 and s["totalMsgExpired"] == 3
            for s in stats(broker, topic)["subscriptions"].values()
        ),
        "the TTL check to expire every message",
    )


# -- expireMessages --------------------------------------------------------------------------


def test_expire_messages_by_age_and_by_position(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topic = f"{ns}/expire"
    base = f"/admin/v2/persistent/{topic}"
    for sub in ("by-age", "by-position", "other"):
        subscribe(client, topic, sub)
    ids = produce(client, topic, 4)
    # Messages published before now are older than 0 seconds.
    assert rest(broker, "POST", f"{base}/subscription/by-age/expireMessages/0")[0] == 204
    assert backlog(broker, topic, "by-age") == 0
    assert backlog(broker, topic, "other") == 4
    second = {"ledgerId": ids[1].ledger_id(), "entryId": ids[1].entry_id()}
    assert rest(
        broker, "POST", f"{base}/subscription/by-position/expireMessages", second
    )[0] == 204
    assert backlog(broker, topic, "by-position") == 2
    third = {"ledgerId": ids[2].ledger_id(), "entryId": ids[2].entry_id(), "excluded": True}
    assert rest(
        broker, "POST", f"{base}/subscription/by-position/expireMessages", third
    )[0] == 204
    assert backlog(broker, topic, "by-position") == 2  # the third is kept
    # Young messages stay.
    assert rest(broker, "POST", f"{base}/all_subscription/expireMessages/3600")[0] == 204
    assert backlog(broker, topic, "other") == 4
    assert rest(broker, "POST", f"{base}/all_subscription/expireMessages/0")[0] == 204
    assert all(s["msgBacklog"] == 0 for s in stats(broker, topic)["subscriptions"].values())


def test_expire_messages_bad_input(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topic = f"{ns}/expire-bad"
    base = f"/admin/v2/persistent/{topic}"
    subscribe(client, topic, "s")
    status, body = rest(broker, "POST", f"{base}/subscription/nope/expireMessages/1")
    assert (status, body["reason"]) == (404, "Subscription not found")
    missing = f"/admin/v2/persistent/{ns}/missing/subscription/s/expireMessages/1"
    assert rest(broker, "POST", missing)[0] == 404
    assert rest(broker, "POST", f"{base}/subscription/s/expireMessages/soon")[0] == 400
    assert rest(broker, "POST", f"{base}/subscription/s/expireMessages", {"x": 1})[0] == 400
    assert rest(
        broker, "POST", f"{base}/subscription/s/expireMessages", {"ledgerId": "a"}
    )[0] == 400
    parted = f"{ns}/parted"
    assert rest(broker, "PUT", f"/admin/v2/persistent/{parted}/partitions", 2)[0] == 204
    subscribe(client, parted, "s")
    position = {"ledgerId": 1, "entryId": 1}
    assert rest(
        broker, "POST",
        f"/admin/v2/persistent/{parted}/subscription/s/expireMessages", position,
    )[0] == 405
    assert rest(
        broker, "POST", f"/admin/v2/persistent/{parted}/subscription/s/expireMessages/0"
    )[0] == 204


# -- backlog quotas ----------------------------------------------------------------------------


def set_quota(
    broker: BrokerProcess, ns: str, policy: str, kind: str = "destination_storage",
    limit_size: int = -1, limit_time: int = -1,
) -> int:
    status, _ = rest(
        broker, "POST", f"{NS_ROOT}/{ns}/backlogQuota?backlogQuotaType={kind}",
        {"limitSize": limit_size, "limitTime": limit_time, "policy": policy},
    )
    return status


def raw_producer_error(broker: BrokerProcess, topic: str) -> int | None:
    raw = Raw(broker.port)
    try:
        raw.connect()
        answer = raw.producer(f"persistent://{topic}")
        return answer.error.error if answer.HasField("error") else None
    finally:
        raw.close()


def test_backlog_quota_policy_round_trip(broker: BrokerProcess, ns: str) -> None:
    assert rest(broker, "GET", f"{NS_ROOT}/{ns}/backlogQuotaMap") == (200, {})
    assert set_quota(broker, ns, "producer_exception", limit_size=1024) == 204
    assert set_quota(
        broker, ns, "consumer_backlog_eviction", kind="message_age", limit_time=60
    ) == 204
    assert rest(broker, "GET", f"{NS_ROOT}/{ns}/backlogQuotaMap") == (200, {
        "destination_storage": {
            "limitSize": 1024, "limitTime": -1, "policy": "producer_exception",
        },
        "message_age": {
            "limitSize": -1, "limitTime": 60, "policy": "consumer_backlog_eviction",
        },
    })
    assert set_quota(broker, ns, "drop_everything", limit_size=1) == 412
    assert set_quota(broker, ns, "producer_exception", kind="weird", limit_size=1) == 400
    path = f"{NS_ROOT}/{ns}/backlogQuota?backlogQuotaType=message_age"
    assert rest(broker, "DELETE", path)[0] == 204
    assert list(rest(broker, "GET", f"{NS_ROOT}/{ns}/backlogQuotaMap")[1]) == [
        "destination_storage"
    ]
    # A quota must stay below a limited retention, and the retention above a quota.
    retention = {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1}
    assert rest(broker, "POST", f"{NS_ROOT}/{ns}/retention", retention)[0] == 204
    status, body = rest(
        broker, "POST", f"{NS_ROOT}/{ns}/backlogQuota",
        {"limitSize": 2 * 1024 * 1024, "policy": "producer_exception"},
    )
    assert status == 412 and "retention" in body["reason"]
    assert set_quota(broker, ns, "producer_exception", limit_size=512 * 1024) == 204
    assert set_quota(
        broker, ns, "producer_exception", kind="message_age", limit_time=300
    ) == 204
    shorter = {"retentionTimeInMinutes": 5, "retentionSizeInMB": 1}
    status, body = rest(broker, "POST", f"{NS_ROOT}/{ns}/retention", shorter)
    assert status == 412 and "backlog quota" in body["reason"]


def test_producer_exception_refuses_and_disconnects_producers(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topic = f"{ns}/exception"
    subscribe(client, topic, "slow")
    producer = client.create_producer(f"persistent://{topic}", batching_enabled=False)
    for _ in range(5):
        producer.send(b"x" * 100)
    assert set_quota(broker, ns, "producer_exception", limit_size=10) == 204
    wait_until(lambda: not stats(broker, topic)["publishers"],
               "the quota check to disconnect the producer")
    assert raw_producer_error(broker, topic) == ServerError.ProducerBlockedQuotaExceededException
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        client.create_producer(f"persistent://{topic}")
    # Consuming the backlog lifts the block.
    assert rest(broker, "POST", f"{NS_ROOT}/{ns}/clearBacklog")[0] == 204
    client.create_producer(f"persistent://{topic}").close()


def test_producer_request_hold_refuses_new_producers_with_the_retryable_error(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topic = f"{ns}/hold"
    subscribe(client, topic, "slow")
    produce(client, topic, 5, size=100)
    assert set_quota(broker, ns, "producer_request_hold", limit_size=10) == 204
    assert raw_producer_error(broker, topic) == ServerError.ProducerBlockedQuotaExceededError
    # Another topic of the namespace without a backlog is not held.
    assert raw_producer_error(broker, f"{ns}/free") is None


def test_producer_request_hold_holds_sends_until_the_backlog_shrinks(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topic = f"{ns}/held"
    subscribe(client, topic, "slow")
    producer = client.create_producer(f"persistent://{topic}", batching_enabled=False,
                                      send_timeout_millis=60_000)
    for _ in range(5):
        producer.send(b"x" * 100)
    assert set_quota(broker, ns, "producer_request_hold", limit_size=10) == 204
    wait_until(lambda: not stats(broker, topic)["publishers"],
               "the quota check to disconnect the producer")
    results: list[Any] = []
    sent = threading.Event()

    def on_sent(result: Any, message_id: Any) -> None:
        results.append(result)
        sent.set()

    producer.send_async(b"held", on_sent)
    assert not sent.is_set()  # held by the client: its producer cannot reconnect
    assert rest(broker, "POST", f"{NS_ROOT}/{ns}/clearBacklog")[0] == 204
    assert sent.wait(WAIT_S), "the held send never completed"
    assert results == [pulsar.Result.Ok]
    producer.close()


def test_size_eviction_moves_the_slowest_subscriptions(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topic = f"{ns}/evict-size"
    subscribe(client, topic, "slow")
    produce(client, topic, 50, size=1000)
    assert set_quota(broker, ns, "consumer_backlog_eviction", limit_size=20_000) == 204
    wait_until(lambda: backlog(broker, topic, "slow") < 50, "the size eviction")
    left = backlog(broker, topic, "slow")
    assert 0 < left <= 20, left  # about 90% of 20 kB of ~1 kB entries remain
    full = f"persistent://{topic}"
    evictions = wait_until(
        lambda: metric(broker, "pulsar_storage_backlog_quota_exceeded_evictions_total",
                       topic=full, quota_type="size"),
        "the eviction counter",
    )
    assert evictions >= 1
    assert metric(broker, "pulsar_storage_backlog_quota_limit", topic=full) == 20_000
    assert metric(broker, "pulsar_storage_backlog_quota_limit_time", topic=full) == -1
    # Producers are not blocked under an eviction policy.
    assert raw_producer_error(broker, topic) is None


def test_age_eviction_drops_old_messages(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topic = f"{ns}/evict-age"
    subscribe(client, topic, "slow")
    produce(client, topic, 3)
    assert set_quota(
        broker, ns, "consumer_backlog_eviction", kind="message_age", limit_time=1
    ) == 204
    wait_until(lambda: backlog(broker, topic, "slow") == 0, "the age eviction")
    full = f"persistent://{topic}"
    assert wait_until(
        lambda: metric(broker, "pulsar_storage_backlog_quota_exceeded_evictions_total",
                       topic=full, quota_type="time"),
        "the eviction counter",
    ) >= 1
    assert metric(broker, "pulsar_storage_backlog_age_seconds", topic=full) is not None


# -- unsupported policy fields -------------------------------------------------------------


def test_unsupported_policy_fields_are_refused(broker: BrokerProcess) -> None:
    name = f"public/p{uuid.uuid4().hex[:10]}"
    status, body = rest(
        broker, "PUT", f"{NS_ROOT}/{name}",
        {"message_ttl_in_seconds": 10, "max_producers_per_topic": 5},
    )
    assert status == 400 and "max_producers_per_topic" in body["reason"]
    assert rest(broker, "GET", f"{NS_ROOT}/{name}")[0] == 404
    # What a Java admin client sends for a plain create: defaults only.
    java_defaults = {
        "bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1},
        "deleted": False, "encryption_required": False, "offload_threshold": -1,
        "latency_stats_sample_rate": {}, "message_ttl_in_seconds": 30,
        "publishMaxMessageRate": {}, "max_producers_per_topic": None,
    }
    assert rest(broker, "PUT", f"{NS_ROOT}/{name}", java_defaults)[0] == 204
    assert rest(broker, "GET", f"{NS_ROOT}/{name}/messageTTL") == (200, 30)
    retention = {"retentionTimeInMinutes": 5, "retentionSizeInMB": 5, "tiered": True}
    status, body = rest(broker, "POST", f"{NS_ROOT}/{name}/retention", retention)
    assert status == 400 and "tiered" in body["reason"]
    quota = {"limitSize": 5, "policy": "producer_exception", "burst": 1}
    assert rest(broker, "POST", f"{NS_ROOT}/{name}/backlogQuota", quota)[0] == 400
    auto = {"allowAutoTopicCreation": False, "maxTopics": 2}
    assert rest(broker, "POST", f"{NS_ROOT}/{name}/autoTopicCreation", auto)[0] == 400


# -- namespace operations --------------------------------------------------------------------


def test_clear_backlog_of_a_namespace(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topics = [f"{ns}/clear-a", f"{ns}/clear-b"]
    for topic in topics:
        subscribe(client, topic, "one")
        subscribe(client, topic, "two")
        produce(client, topic, 3)
    assert rest(broker, "POST", f"{NS_ROOT}/{ns}/clearBacklog/one")[0] == 204
    assert [backlog(broker, t, "one") for t in topics] == [0, 0]
    assert [backlog(broker, t, "two") for t in topics] == [3, 3]
    assert stats(broker, topics[0])["subscriptions"]["one"]["totalMsgExpired"] == 0
    assert rest(broker, "POST", f"{NS_ROOT}/{ns}/clearBacklog")[0] == 204
    assert [backlog(broker, t, "two") for t in topics] == [0, 0]
    assert rest(broker, "POST", f"{NS_ROOT}/public/missing/clearBacklog")[0] == 404


def test_unsubscribe_a_namespace(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topics = [f"{ns}/unsub-a", f"{ns}/unsub-b"]
    for topic in topics:
        subscribe(client, topic, "gone")
        subscribe(client, topic, "kept")
    consumer = client.subscribe(f"persistent://{topics[1]}", "gone")
    status, body = rest(broker, "POST", f"{NS_ROOT}/{ns}/unsubscribe/gone")
    assert status == 412 and "connected consumers" in body["reason"]
    assert all("gone" in stats(broker, t)["subscriptions"] for t in topics)
    consumer.close()
    assert rest(broker, "POST", f"{NS_ROOT}/{ns}/unsubscribe/gone")[0] == 204
    assert [sorted(stats(broker, t)["subscriptions"]) for t in topics] == [["kept"]] * 2


def test_unload_a_namespace_keeps_clients_working(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topic = f"persistent://{ns}/unload"
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"before")
    assert consumer.receive(timeout_millis=10_000).data() == b"before"
    assert rest(broker, "PUT", f"{NS_ROOT}/{ns}/unload")[0] == 204
    # Both reconnect to the reloaded topic ("before" may come again: its ack may
    # not have reached the broker before the unload).
    producer.send(b"after")
    received = []
    while b"after" not in received:
        message = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(message)
        received.append(message.data())
    assert set(received) <= {b"before", b"after"}
    assert rest(broker, "PUT", f"{NS_ROOT}/public/missing/unload")[0] == 404


# -- the older policies, as a client sees them -------------------------------------------------


def test_deduplication_policy_applies_to_loaded_topics(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    topic = f"persistent://{ns}/dedup"
    producer = client.create_producer(topic, producer_name="dedup-p",
                                      batching_enabled=False)
    producer.send(b"one", sequence_id=1)
    assert rest(broker, "POST", f"{NS_ROOT}/{ns}/deduplication", True)[0] == 204
    producer.send(b"two", sequence_id=2)
    producer.send(b"two again", sequence_id=2)
    producer.close()
    assert stats(broker, f"{ns}/dedup")["deduplicationStatus"] == "Enabled"
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    seen = [reader.read_next(10_000).data() for _ in range(2)]
    assert seen == [b"one", b"two"]
    assert not reader.has_message_available()
    reader.close()


def test_auto_topic_creation_policy(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    override = {"allowAutoTopicCreation": False}
    assert rest(broker, "POST", f"{NS_ROOT}/{ns}/autoTopicCreation", override)[0] == 204
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer(f"persistent://{ns}/never-created")


def consume_all(client: pulsar.Client, topic: str, count: int) -> None:
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(count):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    consumer.close()


def ledger_count(broker: BrokerProcess, topic: str) -> int:
    status, body = rest(broker, "GET", f"/admin/v2/persistent/{topic}/internalStats")
    assert status == 200, body
    return len(body["ledgers"])


def read_from_earliest(client: pulsar.Client, topic: str) -> int:
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    count = 0
    while reader.has_message_available():
        reader.read_next(10_000)
        count += 1
    reader.close()
    return count


def test_retention_policy_applies_to_loaded_topics(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    kept = f"{ns}/kept"
    # Loaded before the policy is set: setting it reloads the namespace's topics.
    loaded = client.create_producer(f"persistent://{kept}")
    forever = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    assert rest(broker, "POST", f"{NS_ROOT}/{ns}/retention", forever)[0] == 204
    loaded.close()
    produce(client, kept, 12)
    consume_all(client, f"persistent://{kept}", 12)
    wait_until(lambda: backlog(broker, kept, "s") == 0, "the acks of the kept topic")
    # A topic of a namespace without retention, acknowledged later: once its consumed
    # ledgers are gone, the kept topic's trim (due earlier) has run too.
    other = f"public/p{uuid.uuid4().hex[:10]}"
    assert rest(broker, "PUT", f"{NS_ROOT}/{other}")[0] == 204
    trimmed = f"{other}/trimmed"
    produce(client, trimmed, 12)
    consume_all(client, f"persistent://{trimmed}", 12)
    wait_until(lambda: ledger_count(broker, trimmed) == 1, "consumed ledgers to go")
    assert read_from_earliest(client, f"persistent://{trimmed}") < 12
    assert ledger_count(broker, kept) >= 3
    assert read_from_earliest(client, f"persistent://{kept}") == 12


def test_schema_compatibility_strategy(
    broker: BrokerProcess, client: pulsar.Client, ns: str
) -> None:
    class Order(Record):
        id = Integer()

    class Refund(Record):
        reason = String()

    path = f"{NS_ROOT}/{ns}/schemaCompatibilityStrategy"
    strict = f"persistent://{ns}/strict"
    client.create_producer(strict, schema=JsonSchema(Order)).close()
    assert rest(broker, "PUT", path, "ALWAYS_INCOMPATIBLE")[0] == 204
    client.create_producer(strict, schema=JsonSchema(Order)).close()  # same version
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(strict, schema=JsonSchema(Refund))
    assert rest(broker, "PUT", path, "ALWAYS_COMPATIBLE")[0] == 204
    client.create_producer(strict, schema=StringSchema()).close()  # another type too
    # Under FULL a JSON schema cannot follow the latest version, a string.
    assert rest(broker, "PUT", path, "FULL")[0] == 204
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(strict, schema=JsonSchema(Refund))


# -- quasar admin ------------------------------------------------------------------------------


def cli(broker: BrokerProcess, *argv: str) -> int:
    return main(["--log-level", "WARNING", "admin", "--admin-url", broker.admin_url,
                 "--output", "json", *argv])


def test_cli_namespace_policies(
    broker: BrokerProcess, ns: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def out(*argv: str) -> Any:
        assert cli(broker, *argv) == 0, capsys.readouterr().err
        text = capsys.readouterr().out
        return json.loads(text) if text.strip() else None

    out("namespaces", "set-message-ttl", ns, "-ttl", "1h")
    assert out("namespaces", "get-message-ttl", ns) == 3600
    out("namespaces", "remove-message-ttl", ns)
    assert out("namespaces", "get-message-ttl", ns) is None
    out("namespaces", "set-retention", ns, "-t", "2h", "-s", "1G")
    assert out("namespaces", "get-retention", ns) == {
        "retentionTimeInMinutes": 120, "retentionSizeInMB": 1024,
    }
    out("namespaces", "set-backlog-quota", ns, "-l", "10M", "-p", "producer_exception")
    out("namespaces", "set-backlog-quota", ns, "-lt", "30m", "-t", "message_age",
        "-p", "consumer_backlog_eviction")
    assert out("namespaces", "get-backlog-quotas", ns) == {
        "destination_storage": {
            "limitSize": 10 * 1024 * 1024, "limitTime": -1, "policy": "producer_exception",
        },
        "message_age": {
            "limitSize": -1, "limitTime": 1800, "policy": "consumer_backlog_eviction",
        },
    }
    out("namespaces", "remove-backlog-quota", ns, "-t", "message_age")
    assert list(out("namespaces", "get-backlog-quotas", ns)) == ["destination_storage"]
    # Above the retention: refused with Pulsar's 412.
    assert cli(broker, "namespaces", "set-backlog-quota", ns, "-l", "2G",
               "-p", "producer_exception") == 1
    assert "412" in capsys.readouterr().err
    out("namespaces", "set-deduplication", ns, "--enable")
    assert out("namespaces", "get-deduplication", ns) is True
    out("namespaces", "set-deduplication", ns, "-d")
    assert out("namespaces", "get-deduplication", ns) is False
    out("namespaces", "unload", ns)


def test_cli_expiry_and_namespace_operations(
    broker: BrokerProcess, client: pulsar.Client, ns: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = f"{ns}/cli"
    for sub in ("a", "b", "c"):
        subscribe(client, topic, sub)
    ids = produce(client, topic, 3)
    assert cli(broker, "topics", "expire-messages", topic, "-s", "a", "-t", "0") == 0
    assert backlog(broker, topic, "a") == 0
    position = f"{ids[0].ledger_id()}:{ids[0].entry_id()}"
    assert cli(broker, "topics", "expire-messages", topic, "-s", "b", "-p", position) == 0
    assert backlog(broker, topic, "b") == 2
    assert cli(broker, "topics", "expire-messages", topic, "-s", "b") == 1
    assert "-t" in capsys.readouterr().err
    assert cli(broker, "topics", "expire-messages-all-subscriptions", topic,
               "-t", "1h") == 0
    assert backlog(broker, topic, "c") == 3
    assert cli(broker, "namespaces", "clear-backlog", ns, "-s", "c", "--force") == 0
    assert backlog(broker, topic, "c") == 0
    assert cli(broker, "namespaces", "unsubscribe", ns, "-s", "c") == 0
    assert sorted(stats(broker, topic)["subscriptions"]) == ["a", "b"]
    assert cli(broker, "topics", "expire-messages", topic, "-s", "nope", "-t", "1") == 1
    assert "404" in capsys.readouterr().err
