"""Delayed delivery (``deliver_at`` / ``deliver_after``) with both clients.

The module's broker delivers at the deliver-at time strictly
(``isDelayedDeliveryDeliverAtTimeStrict=true``, a 100 ms tick), so every test can
assert that a delayed message never arrives before its time. Pulsar's default,
non-strict delivery may let a message go up to one tick early.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from quasar.testing.process import BrokerProcess

from .conftest import Admin, assert_no_message, topic_path

DELAY_MS = 2500
STRICT = {
    "isDelayedDeliveryDeliverAtTimeStrict": "true",
    "delayedDeliveryTickTimeMillis": "100",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("delayed") / "data"
    proc = BrokerProcess(data, settings=STRICT)
    proc.start()
    yield proc
    code = proc.stop()
    assert code == 0, f"broker exited with {code}:\n{proc.read_log()}"


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Admin:
    return Admin(broker.admin_url)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def subscription_stats(admin: Admin, topic: str, sub: str) -> dict[str, Any]:
    stats: dict[str, Any] = admin.ok("GET", topic_path(topic) + "/stats")
    return stats["subscriptions"][sub]


def scrape(broker: BrokerProcess) -> list[str]:
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=10) as r:
        return r.read().decode().splitlines()


def metric_lines(lines: list[str], name: str, topic: str) -> list[str]:
    return [
        line for line in lines
        if line.startswith(name + "{") and f'topic="{topic}"' in line
    ]


@pytest.mark.parametrize("sub_type", ["Shared", "KeyShared"])
def test_a_delayed_message_waits_and_immediate_ones_pass_it(
    client: Any, pulsar_mod: Any, topic: str, admin: Admin, broker: BrokerProcess,
    sub_type: str,
) -> None:
    consumer = client.subscribe(
        topic, "s", consumer_type=getattr(pulsar_mod.ConsumerType, sub_type)
    )
    producer = client.create_producer(topic)
    due = now_ms() + DELAY_MS
    producer.send(b"late", partition_key="k", deliver_at=due)
    for i in range(3):
        producer.send(f"now-{i}".encode(), partition_key="k")
    first = [consumer.receive(5000) for _ in range(3)]
    assert [m.data() for m in first] == [b"now-0", b"now-1", b"now-2"]
    assert now_ms() < due, "the immediate messages came only after the delayed one was due"
    # The delayed entry was read before the ones behind it: it is indexed now.
    stats = subscription_stats(admin, topic, "s")
    assert stats["msgDelayed"] == 1
    assert stats["msgBacklogNoDelayed"] == stats["msgBacklog"] - 1
    assert stats["delayedMessageIndexSizeInBytes"] > 0
    lines = scrape(broker)
    assert [line.rsplit(" ", 1)[1]
            for line in metric_lines(lines, "pulsar_subscription_delayed", topic)] == ["1.0"]
    assert [line.rsplit(" ", 1)[1] for line in metric_lines(
        lines, "pulsar_delayed_message_index_size_bytes", topic)] == ["24.0"]
    # The bound on the index was never reached (the series exists from start-up).
    assert "quasar_delayed_delivery_index_full_total 0.0" in lines
    for m in first:
        consumer.acknowledge(m)
    late = consumer.receive(10_000)
    arrived = now_ms()
    assert late.data() == b"late"
    assert arrived >= due, f"delivered {due - arrived} ms before its time"
    consumer.acknowledge(late)
    assert subscription_stats(admin, topic, "s")["msgDelayed"] == 0
    consumer.close()
    producer.close()


def test_deliver_after_on_a_shared_subscription(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    consumer = client.subscribe(topic, "s", consumer_type=pulsar_mod.ConsumerType.Shared)
    producer = client.create_producer(topic)
    sent = now_ms()
    producer.send(b"after", deliver_after=timedelta(milliseconds=1000))
    msg = consumer.receive(10_000)
    assert msg.data() == b"after"
    assert now_ms() >= sent + 1000
    consumer.acknowledge(msg)
    consumer.close()
    producer.close()


@pytest.mark.parametrize("sub_type", ["Exclusive", "Failover"])
def test_exclusive_and_failover_deliver_delayed_messages_at_once(
    client: Any, pulsar_mod: Any, topic: str, sub_type: str
) -> None:
    consumer = client.subscribe(
        topic, "s", consumer_type=getattr(pulsar_mod.ConsumerType, sub_type)
    )
    producer = client.create_producer(topic)
    due = now_ms() + 60_000
    producer.send(b"late", deliver_at=due)
    msg = consumer.receive(10_000)
    assert msg.data() == b"late" and now_ms() < due
    consumer.acknowledge(msg)
    consumer.close()
    producer.close()


def test_a_nacked_delayed_message_is_redelivered(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    consumer = client.subscribe(
        topic, "s", consumer_type=pulsar_mod.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
    )
    producer = client.create_producer(topic)
    due = now_ms() + 1000
    producer.send(b"late", deliver_at=due)
    msg = consumer.receive(10_000)
    assert msg.data() == b"late" and now_ms() >= due
    assert msg.redelivery_count() == 0
    consumer.negative_acknowledge(msg)
    again = consumer.receive(10_000)
    assert again.data() == b"late"
    assert again.redelivery_count() == 1
    consumer.acknowledge(again)
    assert_no_message(consumer, pulsar_mod)
    consumer.close()
    producer.close()
