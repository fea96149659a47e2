"""Pulsar's topic, subscription, namespace, broker and connection series, scraped from
a real broker process after a scripted workload driven by the official client.

The workload: ``N`` messages of ``SIZE`` bytes produced one per entry (batching off),
``M`` of them received and acknowledged on subscription ``done``, subscription
``lagging`` left with all ``N`` in its backlog. Counters, counts and backlogs are
asserted exactly; rates (refreshed every ``statsUpdateFrequencyInSecs``, 1 s here)
are waited for until the update that covers the workload has run.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest
from prometheus_client.parser import text_string_to_metric_families

from quasar.testing.process import BrokerProcess

N, M, SIZE = 20, 12, 100
CLUSTER = "standalone"
NAMESPACE = "public/default"
WAIT_S = 30.0

Samples = dict[str, list[tuple[dict[str, str], float]]]


def _start(tmp_path: Path, **settings: str) -> BrokerProcess:
    return BrokerProcess(
        tmp_path / "data", settings={"statsUpdateFrequencyInSecs": "1", **settings}
    ).start()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = _start(
        tmp_path_factory.mktemp("topic-level"),
        exposeConsumerLevelMetricsInPrometheus="true",
        exposeProducerLevelMetricsInPrometheus="true",
    )
    yield proc
    assert proc.stop() == 0, proc.read_log()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        return bytes(r.read())


def scrape(proc: BrokerProcess) -> Samples:
    out: Samples = {}
    text = _get(proc.admin_url + "/metrics").decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels are exactly ``labels``."""
    found = [v for lab, v in samples.get(name, []) if lab == labels]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def wait_for(probe: Callable[[], Any], what: str) -> Any:
    """Poll ``probe`` until it returns something truthy (a bounded wait on the
    broker's next stats update, never a fixed sleep)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        result = probe()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def topic_stats(proc: BrokerProcess, topic: str) -> dict[str, Any]:
    path = topic.replace("persistent://", "/admin/v2/persistent/")
    return dict(json.loads(_get(proc.admin_url + path + "/stats")))


def run_workload(proc: BrokerProcess, topic: str) -> tuple[Any, Any]:
    """Produce N, consume and ack M on ``done``; ``lagging`` keeps all N. Returns the
    client and the still-connected ``done`` consumer."""
    client = pulsar.Client(
        proc.url, operation_timeout_seconds=10,
        logger=logging.getLogger("pulsar-client"),
    )
    done = client.subscribe(topic, "done", consumer_name="c-done",
                            initial_position=pulsar.InitialPosition.Earliest)
    client.subscribe(topic, "lagging",
                     initial_position=pulsar.InitialPosition.Earliest).close()
    producer = client.create_producer(topic, producer_name="p-1", batching_enabled=False)
    for i in range(N):
        producer.send(bytes([i]) * SIZE)
    for _ in range(M):
        done.acknowledge(done.receive(timeout_millis=10_000))
    # Acks are sent asynchronously: wait until the broker has applied them all.
    wait_for(
        lambda: topic_stats(proc, topic)["subscriptions"]["done"]["unackedMessages"]
        <= N - M and topic_stats(proc, topic)["subscriptions"]["done"]["msgBacklog"]
        == N - M,
        "the acks",
    )
    return client, done


def test_topic_subscription_and_broker_series(broker: BrokerProcess) -> None:
    topic = f"persistent://{NAMESPACE}/m-{uuid.uuid4().hex[:10]}"
    client, _done = run_workload(broker, topic)
    try:
        t = {"cluster": CLUSTER, "namespace": NAMESPACE, "topic": topic}
        stats = topic_stats(broker, topic)
        entry_bytes = stats["bytesInCounter"]
        assert stats["msgInCounter"] == N
        # Each entry holds the payload plus its metadata.
        assert entry_bytes > N * SIZE

        # The update that covers the publishing shows positive rates in.
        s = wait_for(
            lambda: (x := scrape(broker)) and value(x, "pulsar_rate_in", **t) > 0 and x,
            "pulsar_rate_in > 0",
        )
        assert value(s, "pulsar_throughput_in", **t) > value(s, "pulsar_rate_in", **t)
        assert value(s, "pulsar_average_msg_size", **t) == pytest.approx(entry_bytes / N)
        assert value(s, "pulsar_storage_write_rate", **t) > 0
        # Every entry of that period was timed and sized: counts agree with the rate.
        assert value(s, "pulsar_storage_write_latency_count", **t) > 0
        assert value(s, "pulsar_entry_size_count", **t) == value(
            s, "pulsar_storage_write_latency_count", **t
        )
        assert value(s, "pulsar_entry_size_le_128", **t) == value(
            s, "pulsar_entry_size_count", **t
        )  # 100-byte payloads with small metadata
        latency_buckets = [
            n for n in s if n.startswith("pulsar_storage_write_latency_le_")
        ]
        assert len(latency_buckets) == 10  # nine bounds and the overflow
        assert sum(value(s, n, **t) for n in latency_buckets) == value(
            s, "pulsar_storage_write_latency_count", **t
        )
        # Producer-level series are on in this broker.
        producers = [(lab, v) for lab, v in s["pulsar_producer_msg_rate_in"]
                     if lab["topic"] == topic]
        assert [lab["producer_name"] for lab, _ in producers] == ["p-1"]
        assert producers[0][1] > 0

        s = wait_for(
            lambda: (x := scrape(broker)) and value(x, "pulsar_rate_out", **t) > 0 and x,
            "pulsar_rate_out > 0",
        )
        done = {**t, "subscription": "done"}
        assert value(s, "pulsar_subscription_msg_rate_out", **done) > 0
        assert value(s, "pulsar_subscription_msg_throughput_out", **done) > 0
        consumer = [lab for lab, _ in s["pulsar_consumer_msg_rate_out"]
                    if lab.get("topic") == topic]
        assert [c["consumer_name"] for c in consumer] == ["c-done"]

        # Exact counters, counts and backlogs (any scrape after the workload).
        s = scrape(broker)
        assert value(s, "pulsar_in_messages_total", **t) == N
        assert value(s, "pulsar_in_bytes_total", **t) == entry_bytes
        out = value(s, "pulsar_out_messages_total", **t)
        # The client prefetches: "done" received at least M, at most all N.
        assert M <= out <= N
        assert value(s, "pulsar_out_messages_total", **done) == out
        assert value(s, "pulsar_subscriptions_count", **t) == 2
        assert value(s, "pulsar_producers_count", **t) == 1
        assert value(s, "pulsar_consumers_count", **t) == 1
        assert value(s, "pulsar_msg_backlog", **t) == (N - M) + N
        assert value(s, "pulsar_subscription_back_log", **done) == N - M
        lagging = {**t, "subscription": "lagging"}
        assert value(s, "pulsar_subscription_back_log", **lagging) == N
        assert value(s, "pulsar_subscription_consumers_count", **lagging) == 0
        assert value(s, "pulsar_subscription_consumers_count", **done) == 1
        assert value(s, "pulsar_subscription_unacked_messages", **done) == out - M
        assert value(s, "pulsar_subscription_blocked_on_unacked_messages", **done) == 0
        assert value(s, "pulsar_subscription_msg_rate_redeliver", **done) == 0
        # "lagging" has not read anything: the backlog is every entry's bytes.
        assert value(s, "pulsar_storage_backlog_size", **t) == entry_bytes
        assert value(s, "pulsar_storage_size", **t) >= entry_bytes
        ns = {"cluster": CLUSTER, "namespace": NAMESPACE}
        assert value(s, "pulsar_topics_count", **ns) >= 1
        broker_label = {"cluster": CLUSTER}
        assert value(s, "pulsar_broker_producers_count", **broker_label) >= 1
        assert value(s, "pulsar_broker_msg_backlog", **broker_label) >= (N - M) + N
        assert value(s, "pulsar_broker_topics_count", **broker_label) >= 1

        # The topic stats JSON carries the same rates.
        js = wait_for(
            lambda: (x := topic_stats(broker, topic))["msgRateIn"] > 0 and x,
            "msgRateIn > 0",
        )
        assert js["msgThroughputIn"] > 0
        assert js["averageMsgSize"] == pytest.approx(entry_bytes / N)
        assert js["publishers"][0]["msgRateIn"] > 0
        assert js["publishers"][0]["averageMsgSize"] == pytest.approx(entry_bytes / N)
        assert js["backlogSize"] == entry_bytes
        sub = js["subscriptions"]["done"]
        assert {"msgRateOut", "msgThroughputOut", "msgRateRedeliver", "msgRateExpired",
                "msgBacklog", "unackedMessages"} <= sub.keys()
        assert sub["msgRateExpired"] == 0
        c = sub["consumers"][0]
        assert {"msgRateOut", "msgThroughputOut", "availablePermits",
                "unackedMessages"} <= c.keys()
    finally:
        client.close()


def test_connection_series(broker: BrokerProcess) -> None:
    labels = {"cluster": CLUSTER, "broker": "127.0.0.1", "metric": "broker_connection"}
    before = scrape(broker)
    client = pulsar.Client(broker.url, logger=logging.getLogger("pulsar-client"))
    try:
        client.create_producer(f"persistent://{NAMESPACE}/c-{uuid.uuid4().hex[:8]}")
        during = scrape(broker)
    finally:
        client.close()

    def delta(s: Samples, name: str) -> float:
        return value(s, name, **labels) - value(before, name, **labels)

    assert delta(during, "pulsar_connection_created_total_count") >= 1
    assert delta(during, "pulsar_connection_create_success_count") >= 1
    assert delta(during, "pulsar_active_connections") >= 1
    assert value(during, "pulsar_connection_create_fail_count", **labels) == 0
    after = wait_for(
        lambda: (x := scrape(broker))
        and value(x, "pulsar_connection_closed_total_count", **labels)
        >= value(during, "pulsar_connection_closed_total_count", **labels) + 1 and x,
        "the closed connection",
    )
    assert value(after, "pulsar_active_connections", **labels) == value(
        after, "pulsar_connection_created_total_count", **labels
    ) - value(after, "pulsar_connection_closed_total_count", **labels)


def test_fsync_latency_histogram(broker: BrokerProcess) -> None:
    s = scrape(broker)
    count = value(s, "quasar_storage_fsync_latency_seconds_count")
    assert count > 0  # the broker's own topics and the workloads were made durable
    assert value(s, "quasar_storage_fsync_latency_seconds_bucket", le="+Inf") == count


def test_namespace_aggregation(tmp_path: Path) -> None:
    # Without transactions the namespace holds only the test's topics (no
    # transaction-buffer snapshot system topic), so its sums are exact.
    proc = _start(
        tmp_path,
        exposeTopicLevelMetricsInPrometheus="false",
        transactionCoordinatorEnabled="false",
    )
    clients = []
    try:
        ns = "public/aggregated"
        _get_put(proc, f"/admin/v2/namespaces/{ns}")
        topics = [f"persistent://{ns}/t-{i}" for i in range(2)]
        for topic in topics:
            clients.append(run_workload(proc, topic)[0])
        labels = {"cluster": CLUSTER, "namespace": ns}
        s = wait_for(
            lambda: (x := scrape(proc)) and value(x, "pulsar_rate_in", **labels) > 0 and x,
            "pulsar_rate_in > 0 for the namespace",
        )
        s = scrape(proc)
        assert value(s, "pulsar_topics_count", **labels) == 2
        assert value(s, "pulsar_in_messages_total", **labels) == 2 * N
        assert value(s, "pulsar_subscriptions_count", **labels) == 4
        assert value(s, "pulsar_producers_count", **labels) == 2
        assert value(s, "pulsar_consumers_count", **labels) == 2
        assert value(s, "pulsar_msg_backlog", **labels) == 2 * ((N - M) + N)
        in_bytes = value(s, "pulsar_in_bytes_total", **labels)
        assert value(s, "pulsar_storage_backlog_size", **labels) == in_bytes
        # The backlog-quota series are per namespace too (no quota set: -1).
        assert value(s, "pulsar_storage_backlog_quota_limit", **labels) == -1
        # No topic or subscription series at all.
        for name, series in s.items():
            if name.startswith("pulsar_"):
                assert all("topic" not in lab for lab, _ in series), name
        assert not any(n.startswith("pulsar_subscription_") for n in s)
    finally:
        for c in clients:
            c.close()
        assert proc.stop() == 0, proc.read_log()


def _get_put(proc: BrokerProcess, path: str) -> None:
    req = urllib.request.Request(proc.admin_url + path, method="PUT", data=b"")
    with urllib.request.urlopen(req, timeout=10):
        pass


def test_openmetrics_scrape_parses(broker: BrokerProcess) -> None:
    """Prometheus asks for OpenMetrics: the gauges named ``*_total``/``*_count`` must
    still make a valid exposition."""
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as parse_openmetrics,
    )

    client = pulsar.Client(broker.url, logger=logging.getLogger("pulsar-client"))
    try:
        client.create_producer(f"persistent://{NAMESPACE}/om-{uuid.uuid4().hex[:8]}")
        req = urllib.request.Request(
            broker.admin_url + "/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
    finally:
        client.close()
    names = {s.name for f in parse_openmetrics(text) for s in f.samples}
    assert "pulsar_broker_topics_count" in names
    assert "pulsar_in_messages_total" in names
    assert "pulsar_active_connections" in names


def test_split_topic_and_partition_labels(tmp_path: Path) -> None:
    proc = _start(tmp_path, splitTopicAndPartitionLabelInPrometheus="true")
    client = pulsar.Client(proc.url, logger=logging.getLogger("pulsar-client"))
    try:
        base = f"persistent://{NAMESPACE}/parted"
        req = urllib.request.Request(
            proc.admin_url + base.replace("persistent://", "/admin/v2/persistent/")
            + "/partitions",
            method="PUT", data=b"2", headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10):
            pass
        plain = f"persistent://{NAMESPACE}/plain"
        for topic in (base, plain):
            producer = client.create_producer(
                topic, batching_enabled=False,
                message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
            )
            for i in range(4):
                producer.send(b"m%d" % i)
            producer.close()
        s = scrape(proc)
        labels = {"cluster": CLUSTER, "namespace": NAMESPACE}
        per_partition = [
            value(s, "pulsar_in_messages_total", **labels, topic=base, partition=str(i))
            for i in range(2)
        ]
        assert sum(per_partition) == 4
        assert value(s, "pulsar_in_messages_total", **labels, topic=plain,
                     partition="-1") == 4
        assert not any("-partition-" in lab.get("topic", "")
                       for lab, _ in s["pulsar_in_messages_total"])
    finally:
        client.close()
        assert proc.stop() == 0, proc.read_log()
