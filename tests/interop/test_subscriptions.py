"""Subscription types, acknowledgements and redelivery through a real broker."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import receive_all

pytestmark = pytest.mark.interop


def _sub(client: Any, mod: Any, topic: str, name: str, kind: str, **kw: Any) -> Any:
    return client.subscribe(
        topic, name, consumer_type=getattr(mod.ConsumerType, kind),
        initial_position=mod.InitialPosition.Earliest, **kw,
    )


def _produce(client: Any, topic: str, n: int, key: str | None = None, prefix: str = "m") -> None:
    p = client.create_producer(topic, batching_enabled=False)
    for i in range(n):
        if key is None:
            p.send(f"{prefix}-{i}".encode())
        else:
            p.send(f"{prefix}-{i}".encode(), partition_key=key)
    p.close()


def test_exclusive_rejects_second_consumer(client: Any, pulsar_mod: Any, topic: str) -> None:
    _sub(client, pulsar_mod, topic, "ex", "Exclusive")
    with pytest.raises(pulsar_mod.ConsumerBusy):
        _sub(client, pulsar_mod, topic, "ex", "Exclusive")


def test_shared_spreads_messages(client: Any, pulsar_mod: Any, topic: str) -> None:
    c1 = _sub(client, pulsar_mod, topic, "sh", "Shared", receiver_queue_size=10)
    c2 = _sub(client, pulsar_mod, topic, "sh", "Shared", receiver_queue_size=10)
    _produce(client, topic, 40)
    seen: dict[bytes, int] = {}
    counts = [0, 0]
    while len(seen) < 40:
        for i, c in enumerate((c1, c2)):
            try:
                m = c.receive(200)
            except pulsar_mod.Timeout:
                continue
            seen[m.data()] = i
            counts[i] += 1
            c.acknowledge(m)
    assert set(seen) == {f"m-{i}".encode() for i in range(40)}
    assert counts[0] > 0 and counts[1] > 0


def test_key_shared_key_affinity(client: Any, pulsar_mod: Any, topic: str) -> None:
    consumers = [_sub(client, pulsar_mod, topic, "ks", "KeyShared") for _ in range(3)]
    p = client.create_producer(topic, batching_enabled=False)
    keys = [f"key-{k}" for k in range(12)]
    for i in range(120):
        p.send(f"{i}".encode(), partition_key=keys[i % 12])
    owner: dict[str, int] = {}
    per_key: dict[str, list[int]] = {}
    got = 0
    while got < 120:
        for idx, c in enumerate(consumers):
            try:
                m = c.receive(200)
            except pulsar_mod.Timeout:
                continue
            got += 1
            k = m.partition_key()
            assert owner.setdefault(k, idx) == idx, f"key {k} went to two consumers"
            per_key.setdefault(k, []).append(int(m.data()))
            c.acknowledge(m)
    assert set(per_key) == set(keys)
    for values in per_key.values():
        assert values == sorted(values), "order within a key must be kept"
    assert len(set(owner.values())) >= 2


def test_failover_switch_over(client: Any, pulsar_mod: Any, topic: str) -> None:
    a = _sub(client, pulsar_mod, topic, "fo", "Failover", consumer_name="a")
    b = _sub(client, pulsar_mod, topic, "fo", "Failover", consumer_name="b")
    _produce(client, topic, 10)
    first = a.receive(10_000)  # "a" sorts first: it is the active consumer
    assert first.data() == b"m-0"
    for _ in range(4):
        a.acknowledge(a.receive(10_000))  # m-1..m-4 acked; m-0 left unacked
    a.close()
    got = [b.receive(10_000).data() for _ in range(6)]
    # m-0 was never acked, so it comes back first; then the rest in order.
    assert got == [b"m-0", b"m-5", b"m-6", b"m-7", b"m-8", b"m-9"]


def test_individual_ack_and_redelivery_after_close(client: Any, pulsar_mod: Any, topic: str) -> None:
    c = _sub(client, pulsar_mod, topic, "s", "Shared")
    _produce(client, topic, 6)
    msgs = receive_all(c, 6)
    for m in msgs[::2]:
        c.acknowledge(m)  # ack m-0, m-2, m-4
    c.close()
    c2 = _sub(client, pulsar_mod, topic, "s", "Shared")
    again = sorted(m.data() for m in receive_all(c2, 3))
    assert again == [b"m-1", b"m-3", b"m-5"]


def test_redelivered_messages_carry_redelivery_count(client: Any, pulsar_mod: Any, topic: str) -> None:
    c = _sub(client, pulsar_mod, topic, "s", "Shared")
    _produce(client, topic, 1)
    assert c.receive(10_000).redelivery_count() == 0
    c.close()
    c2 = _sub(client, pulsar_mod, topic, "s", "Shared")
    assert c2.receive(10_000).redelivery_count() == 1


def test_cumulative_ack(client: Any, pulsar_mod: Any, topic: str) -> None:
    c = _sub(client, pulsar_mod, topic, "s", "Exclusive")
    _produce(client, topic, 10)
    msgs = receive_all(c, 10)
    c.acknowledge_cumulative(msgs[6])
    c.close()
    c2 = _sub(client, pulsar_mod, topic, "s", "Exclusive")
    assert [m.data() for m in receive_all(c2, 3)] == [b"m-7", b"m-8", b"m-9"]


def test_negative_ack_redelivers(client: Any, pulsar_mod: Any, topic: str) -> None:
    c = _sub(client, pulsar_mod, topic, "s", "Shared", negative_ack_redelivery_delay_ms=100)
    _produce(client, topic, 3)
    msgs = receive_all(c, 3)
    c.acknowledge(msgs[0])
    c.acknowledge(msgs[2])
    c.negative_acknowledge(msgs[1])
    again = c.receive(10_000)
    assert again.data() == b"m-1"
    assert again.redelivery_count() == 1
    c.acknowledge(again)


def test_batch_members_acked_individually(client: Any, pulsar_mod: Any, topic: str) -> None:
    c = _sub(client, pulsar_mod, topic, "s", "Shared")
    p = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=50,
                               block_if_queue_full=True)
    for i in range(5):
        p.send_async(f"b-{i}".encode(), None)
    p.flush()
    msgs = receive_all(c, 5)
    for m in msgs[:3]:
        c.acknowledge(m)
    c.close()  # only part of the batch acked: the whole batch entry stays unacked
    c2 = _sub(client, pulsar_mod, topic, "s", "Shared")
    redelivered = {m.data() for m in receive_all(c2, 5)}
    assert {b"b-3", b"b-4"} <= redelivered


def test_unsubscribe_removes_subscription(client: Any, pulsar_mod: Any, topic: str) -> None:
    c = _sub(client, pulsar_mod, topic, "gone", "Exclusive")
    _produce(client, topic, 2)
    c.unsubscribe()
    # A new subscription with the same name starts from scratch at "latest".
    c2 = client.subscribe(topic, "gone")
    _produce(client, topic, 1, prefix="after")
    assert c2.receive(10_000).data() == b"after-0"


def test_regex_subscription_over_namespace_topics(client: Any, pulsar_mod: Any) -> None:
    import re
    import uuid

    prefix = f"rx-{uuid.uuid4().hex[:8]}"
    topics = [f"persistent://public/default/{prefix}-{i}" for i in range(3)]
    for t in topics:
        client.create_producer(t).send(b"create")  # the topics must exist first
    other = client.create_producer(f"persistent://public/default/not-{prefix}")
    c = client.subscribe(
        re.compile(f"persistent://public/default/{prefix}-.*"), "rx",
        initial_position=pulsar_mod.InitialPosition.Earliest,
    )
    other.send(b"not matched")
    got = sorted(m.topic_name() for m in receive_all(c, 3))
    assert got == topics
