"""The exactly-once sink on rows that are only values (no key, properties, event time
or topic column of their own): each Arrow batch goes to the producer as one list of
payloads (``send_payloads_async``). The guarantees are those of ``test_sink.py``:
each row once, a failed task attempt leaves nothing behind, a failed commit is
rolled forward by the restart.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

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


def run_stream(
    spark: Any, broker: BrokerProcess, src: str, dst: str, checkpoint: Path, **options: str
) -> BaseException | None:
    """One AvailableNow run of ``src`` -> quasar sink ``dst``; the query's error.

    The source is keyless, so its key and event time are null and its properties
    empty: rows that carry only their value."""
    df = source(
        spark, broker, stream=True, topic=src, startingOffsets="earliest",
        maxRecordsPerTrigger="100",
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
    src, dst = unique_topic("vin"), unique_topic("vout")
    create_partitioned(broker, src, 2)
    create_partitioned(broker, dst, 2)
    values = [f"v{i:05d}".encode() for i in range(300)]
    produce(broker, src, values, key=False)
    return src, dst, values


def _assert_exactly(broker: BrokerProcess, dst: str, values: list[bytes]) -> None:
    msgs = read_all(broker, dst)
    got = Counter(m.data() for m in msgs)
    dupes = {v: n for v, n in got.items() if n > 1}
    assert not dupes, f"duplicates: {list(dupes.items())[:5]}"
    assert sorted(got) == sorted(values)
    assert all(m.partition_key() == "" and m.properties() == {} for m in msgs)


def _names(sink_id: str) -> list[str]:
    return [f"{sink_id}-p{p}" for p in range(2)]


def test_value_rows_are_written_once_per_batch_decision(
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


def test_a_value_task_failing_once_leaves_no_duplicate(
    spark: Any, broker: BrokerProcess, tmp_path: Path, topics: tuple[str, str, list[bytes]]
) -> None:
    src, dst, values = topics
    sink_id = f"vretry-{uuid.uuid4().hex[:8]}"
    # The first attempt of partition 0 of batch 1 sends its rows, then fails.
    err = run_stream(
        spark, broker, src, dst, tmp_path / "ckpt",
        sinkId=sink_id, **{"test.failPoints": "task.write@b1p0a0"},
    )
    assert err is None
    _assert_exactly(broker, dst, values)
    assert open_transactions(broker, _names(sink_id)) == []


def test_a_failed_value_commit_is_completed_by_the_restart(
    spark: Any, broker: BrokerProcess, tmp_path: Path, topics: tuple[str, str, list[bytes]]
) -> None:
    src, dst, values = topics
    ckpt = tmp_path / "ckpt"
    sink_id = f"vcf-{uuid.uuid4().hex[:8]}"
    err = run_stream(
        spark, broker, src, dst, ckpt, sinkId=sink_id,
        **{"test.failPoints": "sink.decided@b1"},
    )
    assert err is not None and "injected failure" in str(err)
    assert len(read_all(broker, dst)) == 100  # batch 1 decided, not yet visible
    assert run_stream(spark, broker, src, dst, ckpt, sinkId=sink_id) is None
    _assert_exactly(broker, dst, values)
    assert open_transactions(broker, _names(sink_id)) == []
