"""The exactly-once sink in one Spark session: batch write, streaming write, task
retries, failing commits, replays after ``commits/<b>`` is deleted, orphan sweep."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import quasar.client as qc
from quasar.testing.process import BrokerProcess

from .conftest import (
    checkpoint_files,
    create_partitioned,
    open_transactions,
    produce,
    read_all,
    source,
    unique_topic,
)
from .spark_sessions import start_query

pytestmark = pytest.mark.spark


def _sink_names(sink_id: str, partitions: int = 2) -> list[str]:
    return [f"{sink_id}-p{p}" for p in range(partitions)]


def run_stream(
    spark: Any,
    broker: BrokerProcess,
    src: str,
    dst: str,
    checkpoint: Path,
    **options: str,
) -> BaseException | None:
    """One AvailableNow run of ``src`` -> quasar sink ``dst``; the query's error."""
    df = source(
        spark, broker, stream=True, topic=src, startingOffsets="earliest",
        maxRecordsPerTrigger=options.pop("maxRecordsPerTrigger", "100"),
    ).selectExpr("value", "key", "properties", "eventTime")
    writer = (
        df.writeStream.format("quasar")
        .option("service.url", broker.url)
        .option("admin.url", broker.admin_url)
        .option("topic", dst)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    for k, v in options.items():
        writer = writer.option(k, v)
    query = start_query(writer.start)
    try:
        query.awaitTermination()
    except Exception as exc:  # StreamingQueryException
        return exc
    return query.exception()


@pytest.fixture
def topics(broker: BrokerProcess) -> tuple[str, str, list[bytes]]:
    src, dst = unique_topic("in"), unique_topic("out")
    create_partitioned(broker, src, 2)
    create_partitioned(broker, dst, 2)
    values = [f"r{i:05d}".encode() for i in range(300)]
    produce(broker, src, values)
    return src, dst, values


def _assert_exactly(broker: BrokerProcess, dst: str, values: list[bytes]) -> None:
    got = Counter(m.data() for m in read_all(broker, dst))
    dupes = {v: n for v, n in got.items() if n > 1}
    assert not dupes, f"duplicates: {list(dupes.items())[:5]}"
    assert sorted(got) == sorted(values)


def test_batch_write_is_one_transaction_decision(spark: Any, broker: BrokerProcess) -> None:
    dst = unique_topic("bw")
    create_partitioned(broker, dst, 2)
    sink_id = f"bw-{uuid.uuid4().hex[:8]}"
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = [
        (f"v{i}".encode(), f"k{i}".encode(), {"n": str(i)}, base + dt.timedelta(seconds=i))
        for i in range(1000)
    ]
    df = spark.createDataFrame(
        rows, "value binary, key binary, properties map<string,string>, eventTime timestamp"
    ).repartition(2)
    (
        df.write.format("quasar").option("service.url", broker.url)
        .option("admin.url", broker.admin_url).option("topic", dst)
        .option("sinkId", sink_id).mode("append").save()
    )
    msgs = read_all(broker, dst)
    assert sorted(m.data() for m in msgs) == sorted(r[0] for r in rows)
    by_value = {m.data(): m for m in msgs}
    m = by_value[b"v7"]
    assert m.partition_key() == "k7"
    assert m.properties() == {"n": "7"}
    assert m.event_timestamp() == int((base + dt.timedelta(seconds=7)).timestamp() * 1000)
    assert open_transactions(broker, _sink_names(sink_id)) == []


def test_stream_sink_writes_each_row_once(
    spark: Any, broker: BrokerProcess, tmp_path: Path, topics: tuple[str, str, list[bytes]]
) -> None:
    src, dst, values = topics
    ckpt = tmp_path / "ckpt"
    assert run_stream(spark, broker, src, dst, ckpt) is None
    _assert_exactly(broker, dst, values)
    batches = checkpoint_files(ckpt, "commits")
    assert len(batches) >= 3
    decisions = sorted(int(p.stem) for p in (ckpt / "_quasar_sink" / "decisions").glob("*.json"))
    assert decisions == batches


def test_task_failing_once_leaves_no_duplicate(
    spark: Any, broker: BrokerProcess, tmp_path: Path, topics: tuple[str, str, list[bytes]]
) -> None:
    src, dst, values = topics
    sink_id = f"retry-{uuid.uuid4().hex[:8]}"
    # The first attempt of partition 0 of batch 1 sends its rows, then fails.
    err = run_stream(
        spark, broker, src, dst, tmp_path / "ckpt",
        sinkId=sink_id, **{"test.failPoints": "task.write@b1p0a0"},
    )
    assert err is None
    _assert_exactly(broker, dst, values)
    assert open_transactions(broker, _sink_names(sink_id)) == []


@pytest.mark.parametrize("point", ["sink.decided", "sink.committed"])
def test_commit_failure_fails_query_and_restart_completes(
    spark: Any,
    broker: BrokerProcess,
    tmp_path: Path,
    topics: tuple[str, str, list[bytes]],
    point: str,
) -> None:
    src, dst, values = topics
    ckpt = tmp_path / "ckpt"
    sink_id = f"cf-{uuid.uuid4().hex[:8]}"
    err = run_stream(
        spark, broker, src, dst, ckpt, sinkId=sink_id, **{"test.failPoints": f"{point}@b1"}
    )
    assert err is not None and "injected failure" in str(err)
    assert checkpoint_files(ckpt, "commits") == [0]
    written = len(read_all(broker, dst))
    # sink.decided: nothing of batch 1 is visible yet; sink.committed: all of it is.
    assert written == (100 if point == "sink.decided" else 200)
    assert run_stream(spark, broker, src, dst, ckpt, sinkId=sink_id) is None
    _assert_exactly(broker, dst, values)
    assert open_transactions(broker, _sink_names(sink_id)) == []


def test_deleted_commit_file_replays_without_duplicate(
    spark: Any, broker: BrokerProcess, tmp_path: Path, topics: tuple[str, str, list[bytes]]
) -> None:
    src, dst, values = topics
    ckpt = tmp_path / "ckpt"
    sink_id = f"replay-{uuid.uuid4().hex[:8]}"
    assert run_stream(spark, broker, src, dst, ckpt, sinkId=sink_id) is None
    last = checkpoint_files(ckpt, "commits")[-1]
    (ckpt / "commits" / str(last)).unlink()
    for crc in (ckpt / "commits").glob(f".{last}.crc"):
        crc.unlink()
    more = [f"s{i:05d}".encode() for i in range(50)]
    produce(broker, src, more)
    assert run_stream(spark, broker, src, dst, ckpt, sinkId=sink_id) is None
    assert last in checkpoint_files(ckpt, "commits")  # the batch was replayed
    _assert_exactly(broker, dst, values + more)
    assert open_transactions(broker, _sink_names(sink_id)) == []


def test_orphaned_transactions_are_aborted(
    spark: Any, broker: BrokerProcess, tmp_path: Path, topics: tuple[str, str, list[bytes]]
) -> None:
    src, dst, values = topics
    sink_id = f"orphan-{uuid.uuid4().hex[:8]}"
    # What a task attempt killed before it could report leaves behind: an open
    # transaction under the sink's client name, holding back readers of dst.
    client = qc.Client(
        broker.url, enable_transaction=True, client_name=f"{sink_id}-p1",
        admin_url=broker.admin_url,
    )
    try:
        txn = client.new_transaction(timeout_ms=3_600_000)
        client.create_producer(dst).send(b"orphan", txn=txn)
        assert len(open_transactions(broker, _sink_names(sink_id))) == 1
        assert run_stream(spark, broker, src, dst, tmp_path / "ckpt", sinkId=sink_id) is None
        assert open_transactions(broker, _sink_names(sink_id)) == []
        _assert_exactly(broker, dst, values)
    finally:
        client.close()


def test_at_least_once_mode_writes_without_transactions(
    spark: Any, broker: BrokerProcess, tmp_path: Path, topics: tuple[str, str, list[bytes]]
) -> None:
    src, dst, values = topics
    err = run_stream(
        spark, broker, src, dst, tmp_path / "ckpt", deliveryGuarantee="at_least_once"
    )
    assert err is None
    _assert_exactly(broker, dst, values)
    assert not (tmp_path / "ckpt" / "_quasar_sink").exists()
