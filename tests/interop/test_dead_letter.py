"""Dead-letter topics and batch receive, with the official client and quasar's.

Both clients implement these features on the client side against the same broker, so
each scenario asserts the same observable outcome for both: what lands on the
dead-letter topic, with which properties, and what ``batch_receive()`` returns.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.interop.conftest import Admin, topic_path

pytestmark = pytest.mark.timeout(120)


def _drain_dead_letters(client: Any, dlq: str, n: int) -> list[Any]:
    reader = client.create_reader(dlq, _earliest(client))
    try:
        return [reader.read_next(10_000) for _ in range(n)]
    finally:
        reader.close()


def _earliest(client: Any) -> Any:
    import pulsar

    import quasar.client

    mod = quasar.client if isinstance(client, quasar.client.Client) else pulsar
    return mod.MessageId.earliest


def test_nacked_past_max_redeliveries_go_to_the_dead_letter_topic(
    pulsar_mod: Any, client: Any, topic: str, admin: Admin
) -> None:
    consumer = client.subscribe(
        topic,
        "work",
        consumer_type=pulsar_mod.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar_mod.ConsumerDeadLetterPolicy(
            max_redeliver_count=2, initial_subscription_name="dlq-audit"
        ),
    )
    producer = client.create_producer(topic)
    sent = {}
    for i in range(3):
        mid = producer.send(
            f"poison-{i}".encode(), properties={"n": str(i)}, partition_key=f"k{i}"
        )
        sent[f"poison-{i}".encode()] = str(mid)
    # Every delivery is nacked: each message comes max_redeliver_count + 1 times
    # (counts 0, 1, 2), then the client parks it instead of asking again.
    counts: dict[bytes, list[int]] = {}
    deadline = time.monotonic() + 30
    while sum(len(v) for v in counts.values()) < 9 and time.monotonic() < deadline:
        msg = consumer.receive(10_000)
        counts.setdefault(msg.data(), []).append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    assert {k: sorted(v) for k, v in counts.items()} == {
        k: [0, 1, 2] for k in sent
    }
    with pytest.raises(pulsar_mod.Timeout):
        consumer.receive(1000)

    dlq = f"{topic}-work-DLQ"
    dead = _drain_dead_letters(client, dlq, 3)
    assert sorted(m.data() for m in dead) == sorted(sent)
    for m in dead:
        props = m.properties()
        i = m.data().decode().rsplit("-", 1)[1]
        assert props["n"] == i
        assert props["REAL_TOPIC"] == topic
        assert props["ORIGIN_MESSAGE_ID"] == sent[m.data()]
        assert m.partition_key() == f"k{i}"
    # The original subscription acknowledged them; the initial subscription on the
    # dead-letter topic retained them.
    stats = admin.ok("GET", topic_path(topic) + "/stats")
    assert stats["subscriptions"]["work"]["msgBacklog"] == 0
    dlq_stats = admin.ok("GET", topic_path(dlq) + "/stats")
    assert dlq_stats["subscriptions"]["dlq-audit"]["msgBacklog"] == 3
    consumer.close()
    producer.close()


def test_acked_messages_never_reach_the_dead_letter_topic(
    pulsar_mod: Any, client: Any, topic: str, admin: Admin
) -> None:
    consumer = client.subscribe(
        topic,
        "work",
        consumer_type=pulsar_mod.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar_mod.ConsumerDeadLetterPolicy(max_redeliver_count=1),
    )
    producer = client.create_producer(topic)
    producer.send(b"good")
    producer.send(b"bad")
    seen = []
    while True:
        try:
            msg = consumer.receive(1500)
        except pulsar_mod.Timeout:
            break
        seen.append((msg.data(), msg.redelivery_count()))
        # "good" succeeds on its retry; "bad" never does.
        if msg.data() == b"good" and msg.redelivery_count() == 1:
            consumer.acknowledge(msg)
        else:
            consumer.negative_acknowledge(msg)
    assert sorted(seen) == [(b"bad", 0), (b"bad", 1), (b"good", 0), (b"good", 1)]
    dead = _drain_dead_letters(client, f"{topic}-work-DLQ", 1)
    assert [m.data() for m in dead] == [b"bad"]
    stats = admin.ok("GET", topic_path(f"{topic}-work-DLQ") + "/stats")
    assert stats["msgInCounter"] == 1
    consumer.close()
    producer.close()


def test_batch_receive_honours_count_bytes_and_timeout(
    pulsar_mod: Any, client: Any, topic: str
) -> None:
    policy = pulsar_mod.ConsumerBatchReceivePolicy(5, -1, 500)
    consumer = client.subscribe(topic, "batch", batch_receive_policy=policy)
    started = time.monotonic()
    assert consumer.batch_receive() == []
    assert time.monotonic() - started >= 0.4
    producer = client.create_producer(topic)
    for i in range(12):
        producer.send(b"m%02d" % i)
    batches: list[list[bytes]] = []
    while sum(len(b) for b in batches) < 12:
        batch = [m.data() for m in consumer.batch_receive()]
        assert batch, "the timeout passed with messages still to come"
        batches.append(batch)
    assert [len(b) for b in batches[:2]] == [5, 5]
    assert [m for b in batches for m in b] == [b"m%02d" % i for i in range(12)]

    by_bytes = client.subscribe(
        topic,
        "by-bytes",
        initial_position=pulsar_mod.InitialPosition.Earliest,
        batch_receive_policy=pulsar_mod.ConsumerBatchReceivePolicy(-1, 9, 1000),
    )
    # Three 3-byte messages fill 9 bytes; a fourth would pass the limit.
    first = by_bytes.batch_receive()
    assert [m.data() for m in first] == [b"m00", b"m01", b"m02"]
    for m in first:
        by_bytes.acknowledge(m)
    by_bytes.close()

    with pytest.raises(ValueError):
        pulsar_mod.ConsumerBatchReceivePolicy(-1, -1, -1)
    consumer.close()
    producer.close()


def test_batch_receive_without_a_policy_takes_what_is_there(
    pulsar_mod: Any, client: Any, topic: str
) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "default-policy")
    for i in range(20):
        producer.send(b"x%d" % i)
    got: list[bytes] = []
    deadline = time.monotonic() + 10
    while len(got) < 20 and time.monotonic() < deadline:
        got += [m.data() for m in consumer.batch_receive()]
    assert got == [b"x%d" % i for i in range(20)]
    consumer.close()
    producer.close()
