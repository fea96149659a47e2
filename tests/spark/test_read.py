"""Batch and streaming reads of ``format("quasar")`` against a real broker process."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import quasar.client as qc
from quasar.testing.process import BrokerProcess

from .conftest import create_partitioned, produce, source, unique_topic
from .spark_sessions import start_query

pytestmark = pytest.mark.spark


def _values(rows: list[Any]) -> list[bytes]:
    return [bytes(r.value) for r in rows]


def test_batch_read_schema_and_fields(spark: Any, broker: BrokerProcess) -> None:
    topic = unique_topic("fields")
    client = qc.Client(broker.url)
    producer = client.create_producer(topic, producer_name="fields-producer")
    for i in range(5):
        producer.send(
            f"v{i}".encode(),
            partition_key=f"k{i}",
            properties={"i": str(i)},
            event_timestamp=1_700_000_000_000 + i,
        )
    client.close()
    df = source(spark, broker, topic=topic)
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "messageId", "publishTime",
        "eventTime", "properties", "producerName",
    ]
    rows = df.collect()
    assert _values(rows) == [f"v{i}".encode() for i in range(5)]
    assert [bytes(r.key) for r in rows] == [f"k{i}".encode() for i in range(5)]
    assert [r.properties for r in rows] == [{"i": str(i)} for i in range(5)]
    assert {r.topic for r in rows} == {topic}
    assert {r.partition for r in rows} == {-1}
    assert {r.producerName for r in rows} == {"fields-producer"}
    assert [int(r.eventTime.timestamp() * 1000) for r in rows] == [
        1_700_000_000_000 + i for i in range(5)
    ]
    ids = [tuple(int(x) for x in r.messageId.split(":")) for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == 5


def test_partitioned_topic_is_read_in_parallel_and_in_order(
    spark: Any, broker: BrokerProcess
) -> None:
    topic = unique_topic("parts")
    create_partitioned(broker, topic, 3)
    values = [f"m{i:04d}".encode() for i in range(300)]
    produce(broker, topic, values)
    df = source(spark, broker, topic=topic)
    assert df.rdd.getNumPartitions() == 3
    rows = df.collect()
    assert sorted(_values(rows)) == values
    for p in range(3):
        mine = [r for r in rows if r.partition == p]
        assert mine, f"partition {p} got no rows"
        ids = [tuple(int(x) for x in r.messageId.split(":")) for r in mine]
        assert ids == sorted(ids)
        # Per partition, the broker's order is the send order.
        assert _values(mine) == sorted(_values(mine))


def _txn_history(broker: BrokerProcess, topic: str) -> qc.Transaction:
    """Per partition p: plain p-0, committed c-1, aborted a-2, open o-3, plain p-4.

    Returns the still-open transaction."""
    client = qc.Client(broker.url, enable_transaction=True, admin_url=broker.admin_url)
    producer = client.create_producer(topic, batching_enabled=False)
    committed = client.new_transaction(timeout_ms=600_000)
    aborted = client.new_transaction(timeout_ms=600_000)
    for p in range(2):
        key = f"key-{p}"
        producer.send(f"p{p}-0".encode(), partition_key=key)
        producer.send(f"c{p}-1".encode(), partition_key=key, txn=committed)
        producer.send(f"a{p}-2".encode(), partition_key=key, txn=aborted)
    committed.commit()
    aborted.abort()
    still_open = client.new_transaction(timeout_ms=600_000)
    for p in range(2):
        key = f"key-{p}"
        producer.send(f"o{p}-3".encode(), partition_key=key, txn=still_open)
        producer.send(f"p{p}-4".encode(), partition_key=key)
    still_open._keep_client = client  # type: ignore[attr-defined]
    return still_open


def test_only_committed_messages_in_order_per_partition(
    spark: Any, broker: BrokerProcess
) -> None:
    topic = unique_topic("txn")
    create_partitioned(broker, topic, 2)
    still_open = _txn_history(broker, topic)
    client = still_open._keep_client  # type: ignore[attr-defined]
    try:
        def by_partition(rows: list[Any]) -> dict[int, list[bytes]]:
            out: dict[int, list[bytes]] = {}
            for r in sorted(rows, key=lambda r: (r.partition, tuple(int(x) for x in r.messageId.split(":")))):
                out.setdefault(r.partition, []).append(bytes(r.value))
            return out

        rows = source(spark, broker, topic=topic).collect()
        parts = by_partition(rows)
        # Which partition each key went to is the router's business; each partition's
        # sequence is one key's, so check the shapes.
        seqs = sorted(parts.values())
        assert all(len(s) == 2 for s in seqs), parts
        for s in seqs:
            p = s[0][1:2].decode()
            assert s == [f"p{p}-0".encode(), f"c{p}-1".encode()]
        # The same through a streaming read from earliest (AvailableNow).
        stream_rows = _stream_collect(spark, broker, topic, startingOffsets="earliest")
        assert by_partition(stream_rows) == parts
        still_open.commit()
        rows = source(spark, broker, topic=topic).collect()
        for s in by_partition(rows).values():
            p = s[0][1:2].decode()
            assert s == [f"{x}{p}-{i}".encode() for x, i in (("p", 0), ("c", 1), ("o", 3), ("p", 4))]
    finally:
        client.close()


def _stream_collect(spark: Any, broker: BrokerProcess, topic: str, **options: str) -> list[Any]:
    name = f"q{time.monotonic_ns()}"
    df = source(spark, broker, stream=True, topic=topic, **options)
    query = start_query(
        df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start
    )
    query.awaitTermination()
    assert query.exception() is None
    rows = spark.sql(f"select * from {name}").collect()
    return rows


def test_starting_and_ending_offsets_and_timestamp(spark: Any, broker: BrokerProcess) -> None:
    topic = unique_topic("range")
    produce(broker, topic, [f"v{i}".encode() for i in range(10)])
    rows = source(spark, broker, topic=topic).collect()
    ids = [r.messageId for r in rows]
    start = ":".join(ids[3].split(":")[:2])
    end = ":".join(ids[7].split(":")[:2])
    df = source(
        spark,
        broker,
        topic=topic,
        startingOffsets=json.dumps({topic: {"-1": start}}),
        endingOffsets=json.dumps({topic: {"-1": end}}),
    )
    assert _values(df.collect()) == [f"v{i}".encode() for i in range(3, 8)]
    # startingTimestamp: from the first message published at or after it.
    produce(broker, topic, [f"w{i}".encode() for i in range(5)])
    later = [r for r in source(spark, broker, topic=topic).collect() if bytes(r.value) == b"w0"]
    ts = int(later[0].publishTime.timestamp() * 1000)
    got = _values(source(spark, broker, topic=topic, startingTimestamp=str(ts)).collect())
    # A Spark job ran between the two productions, so every v* is older than w0.
    assert got == [f"w{i}".encode() for i in range(5)]


def test_topics_list_and_pattern(spark: Any, broker: BrokerProcess) -> None:
    base = unique_topic("pat")
    a, b, other = base + "-a", base + "-b", unique_topic("other")
    for t in (a, b, other):
        produce(broker, t, [t.encode()])
    listed = source(spark, broker, topics=f"{a},{b}").collect()
    assert sorted(_values(listed)) == sorted([a.encode(), b.encode()])
    pattern = source(spark, broker, topicsPattern=base + "-.*").collect()
    assert sorted(_values(pattern)) == sorted([a.encode(), b.encode()])


def test_stream_admission_control_with_available_now(spark: Any, broker: BrokerProcess) -> None:
    topic = unique_topic("admit")
    create_partitioned(broker, topic, 2)
    values = [f"m{i:04d}".encode() for i in range(200)]
    produce(broker, topic, values)
    name = f"admit{time.monotonic_ns()}"
    df = source(
        spark, broker, stream=True, topic=topic, startingOffsets="earliest",
        maxRecordsPerTrigger="30",
    )
    query = start_query(
        df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start
    )
    query.awaitTermination()
    assert query.exception() is None
    got = _values(spark.sql(f"select * from {name}").collect())
    assert sorted(got) == values  # all of them, once
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert max(sizes) <= 30
    assert len(sizes) >= 200 // 30


def test_stream_starts_at_latest_and_follows(spark: Any, broker: BrokerProcess) -> None:
    topic = unique_topic("follow")
    produce(broker, topic, [b"before"])
    name = f"follow{time.monotonic_ns()}"
    df = source(spark, broker, stream=True, topic=topic)
    query = start_query(df.writeStream.format("memory").queryName(name).start)
    try:
        query.processAllAvailable()
        produce(broker, topic, [f"after{i}".encode() for i in range(10)])
        query.processAllAvailable()
        got = _values(spark.sql(f"select * from {name}").collect())
        assert got == [f"after{i}".encode() for i in range(10)]
    finally:
        query.stop()


def test_stream_picks_up_partitions_added_later(spark: Any, broker: BrokerProcess) -> None:
    import urllib.request

    topic = unique_topic("grow")
    create_partitioned(broker, topic, 2)
    produce(broker, topic, [f"a{i}".encode() for i in range(10)])
    name = f"grow{time.monotonic_ns()}"
    df = source(spark, broker, stream=True, topic=topic, startingOffsets="earliest")
    query = start_query(df.writeStream.format("memory").queryName(name).start)
    try:
        query.processAllAvailable()
        path = topic.split("://", 1)[1]
        req = urllib.request.Request(
            f"{broker.admin_url}/admin/v2/persistent/{path}/partitions",
            data=b"3", method="POST", headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(req, timeout=30).close()
        # Written straight to the new partition: read from its beginning.
        produce(broker, f"{topic}-partition-2", [f"b{i}".encode() for i in range(5)])
        query.processAllAvailable()
        rows = spark.sql(f"select * from {name}").collect()
        assert sorted(_values(rows)) == sorted(
            [f"a{i}".encode() for i in range(10)] + [f"b{i}".encode() for i in range(5)]
        )
        assert {r.partition for r in rows if bytes(r.value).startswith(b"b")} == {2}
    finally:
        query.stop()
