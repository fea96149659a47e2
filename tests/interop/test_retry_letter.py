"""Retry topics (``retry_enable`` and ``reconsume_later``, from Pulsar's Java client),
with quasar's client: the official Python client has no retry API."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

import quasar.client as qc
from quasar.testing.process import BrokerProcess
from tests.interop.conftest import Admin, make_client, topic_path

pytestmark = pytest.mark.timeout(120)


def test_reconsume_later_redelivers_after_the_delay_then_dead_letters(
    broker: BrokerProcess, topic: str, admin: Admin
) -> None:
    client = make_client(qc, broker.url)
    try:
        consumer = client.subscribe(
            topic,
            "jobs",
            consumer_type=qc.ConsumerType.Shared,
            dead_letter_policy=qc.ConsumerDeadLetterPolicy(max_redeliver_count=2),
            retry_enable=True,
        )
        producer = client.create_producer(topic)
        producer.send(b"job", properties={"id": "7"})
        first = consumer.receive(10_000)
        origin = str(first.message_id())
        retried_at = []
        for expected in ("1", "2"):
            asked = time.time()
            consumer.reconsume_later(first, timedelta(milliseconds=2500))
            first = consumer.receive(10_000)
            retried_at.append(time.time() - asked)
            props = first.properties()
            assert props["RECONSUMETIMES"] == expected
            assert props["REAL_TOPIC"] == topic
            assert props["ORIGIN_MESSAGE_ID"] == origin
            assert props["id"] == "7"
            assert first.topic_name() == f"{topic}-jobs-RETRY"
        # Delivered by the broker's delayed delivery, not before it was due (less the
        # one tick, 1 s by default, that Pulsar allows a non-strict broker).
        assert min(retried_at) >= 1.4, retried_at
        consumer.reconsume_later(first, 100)  # a third retry: over the limit
        with pytest.raises(qc.Timeout):
            consumer.receive(1500)
        reader = client.create_reader(f"{topic}-jobs-DLQ", qc.MessageId.earliest)
        dead = reader.read_next(10_000)
        assert dead.data() == b"job"
        assert dead.properties()["ORIGIN_MESSAGE_ID"] == origin
        reader.close()
        for t in (topic, f"{topic}-jobs-RETRY"):
            stats = admin.ok("GET", topic_path(t) + "/stats")
            assert stats["subscriptions"]["jobs"]["msgBacklog"] == 0, t
        consumer.close()
    finally:
        client.close()


def test_reconsume_later_needs_retry_enable(
    broker: BrokerProcess, topic: str
) -> None:
    client = make_client(qc, broker.url)
    try:
        consumer = client.subscribe(topic, "plain")
        producer = client.create_producer(topic)
        producer.send(b"x")
        msg = consumer.receive(10_000)
        with pytest.raises(qc.InvalidConfiguration):
            consumer.reconsume_later(msg, 100)
    finally:
        client.close()
