"""Produce and consume through a real broker: batching, compression, metadata, partitions."""

from __future__ import annotations

import time
from typing import Any

import pytest

from .conftest import Admin, receive_all, topic_path

pytestmark = pytest.mark.interop


def _earliest(mod: Any) -> Any:
    return mod.InitialPosition.Earliest


@pytest.mark.parametrize("batching", [False, True])
def test_produce_consume_in_order(client: Any, pulsar_mod: Any, topic: str, batching: bool) -> None:
    consumer = client.subscribe(topic, "s", initial_position=_earliest(pulsar_mod))
    producer = client.create_producer(
        topic, batching_enabled=batching, batching_max_publish_delay_ms=5,
        block_if_queue_full=True,
    )
    ids = []
    for i in range(500):
        producer.send_async(f"m-{i}".encode(), lambda res, mid: ids.append((res, mid)))
    producer.flush()
    assert len(ids) == 500 and all(r == pulsar_mod.Result.Ok for r, _ in ids)
    got = receive_all(consumer, 500)
    assert [m.data() for m in got] == [f"m-{i}".encode() for i in range(500)]
    for m in got:
        consumer.acknowledge(m)
    if batching:
        assert any(m.message_id().batch_index() >= 0 for m in got)


@pytest.mark.parametrize("codec", ["LZ4", "ZLib", "ZSTD", "SNAPPY"])
def test_compressed_batches(client: Any, pulsar_mod: Any, topic: str, codec: str) -> None:
    consumer = client.subscribe(topic, "s", initial_position=_earliest(pulsar_mod))
    producer = client.create_producer(
        topic,
        compression_type=getattr(pulsar_mod.CompressionType, codec),
        batching_enabled=True,
        batching_max_publish_delay_ms=5,
        block_if_queue_full=True,
    )
    payloads = [(f"payload-{i}-" * 20).encode() for i in range(200)]
    for p in payloads:
        producer.send_async(p, None)
    producer.flush()
    producer.send(b"unbatched-compressed" * 50)
    got = receive_all(consumer, 201)
    assert [m.data() for m in got] == payloads + [b"unbatched-compressed" * 50]


def test_keys_properties_event_time(client: Any, pulsar_mod: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "s", initial_position=_earliest(pulsar_mod))
    producer = client.create_producer(topic)
    before = int(time.time() * 1000)
    producer.send(
        b"hello",
        properties={"a": "1", "b": "two"},
        partition_key="key-1",
        event_timestamp=1234567,
    )
    m = consumer.receive(10_000)
    assert m.data() == b"hello"
    assert m.properties() == {"a": "1", "b": "two"}
    assert m.partition_key() == "key-1"
    assert m.event_timestamp() == 1234567
    assert m.publish_timestamp() >= before - 1000
    assert m.topic_name() == topic
    assert m.redelivery_count() == 0


def test_partitioned_round_robin_and_key_routing(
    client: Any, pulsar_mod: Any, admin: Admin, topic: str
) -> None:
    admin.ok("PUT", topic_path(topic) + "/partitions", 3)
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    consumer = client.subscribe(topic, "s", initial_position=_earliest(pulsar_mod))
    producer = client.create_producer(
        topic, message_routing_mode=pulsar_mod.PartitionsRoutingMode.RoundRobinDistribution,
        batching_enabled=False,
    )
    for i in range(30):
        producer.send(f"rr-{i}".encode())
    keyed = client.create_producer(topic, batching_enabled=False)
    for i in range(30):
        keyed.send(f"k-{i}".encode(), partition_key=f"key-{i % 3}")
    got = receive_all(consumer, 60)
    by_partition: dict[int, list[bytes]] = {}
    key_partitions: dict[str, set[int]] = {}
    for m in got:
        part = m.message_id().partition()
        by_partition.setdefault(part, []).append(m.data())
        if m.partition_key():
            key_partitions.setdefault(m.partition_key(), set()).add(part)
        consumer.acknowledge(m)
    assert set(by_partition) == {0, 1, 2}
    rr_counts = [sum(1 for d in v if d.startswith(b"rr-")) for v in by_partition.values()]
    assert rr_counts == [10, 10, 10]
    # Each key always lands on one partition, and order per partition is kept.
    assert all(len(parts) == 1 for parts in key_partitions.values())
    for msgs in by_partition.values():
        rr = [int(d[3:]) for d in msgs if d.startswith(b"rr-")]
        assert rr == sorted(rr)
    stats = admin.ok("GET", topic_path(topic) + "/partitioned-stats")
    assert stats["metadata"]["partitions"] == 3
    assert stats["msgInCounter"] == 60
