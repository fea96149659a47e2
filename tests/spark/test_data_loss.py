"""failOnDataLoss against a real broker whose retention really deletes ledgers.

The broker rolls its ledgers over every 5 entries and keeps no consumed data (quasar's
default retention, 0): once a durable subscription has acknowledged past a ledger, the
broker deletes it about a second later. Tests wait for that by polling the admin API's
ledger list (bounded), then check both settings: ``true`` fails naming the topic, the
partition and the missing range; ``false`` warns and reads what is still stored.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client as qc
from pyspark_quasar.data_loss import DataLossError
from pyspark_quasar.ledgers import LedgerSpan
from pyspark_quasar.partition_reader import read_partition
from pyspark_quasar.plan import ReadSettings, plan_ranges
from pyspark_quasar.positions import Bound
from pyspark_quasar.topics import ledger_spans
from quasar.testing.process import BrokerProcess

from .conftest import create_partitioned, produce, source, unique_topic
from .spark_sessions import start_query

pytestmark = pytest.mark.spark

ENTRIES_PER_LEDGER = 5
WAIT_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("spark-loss-broker") / "data",
        extra_env={
            "QUASAR_managedLedgerMaxEntriesPerLedger": str(ENTRIES_PER_LEDGER),
            "QUASAR_managedLedgerMinLedgerRolloverTimeMinutes": "0",
            "QUASAR_defaultRetentionTimeInMinutes": "0",
            "QUASAR_defaultRetentionSizeInMB": "0",
        },
    )
    proc.start()
    yield proc
    proc.kill()


def spans_of(broker: BrokerProcess, topic: str) -> list[LedgerSpan]:
    spans = ledger_spans(broker.admin_url, topic)
    assert spans is not None, f"{topic} does not exist"
    return spans


def consume_and_delete(broker: BrokerProcess, topic: str, n: int) -> list[LedgerSpan]:
    """Acknowledge the first ``n`` messages on a durable subscription, then wait until
    the broker has deleted every ledger before the one of the next message."""
    client = qc.Client(broker.url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(
            topic, "retention", initial_position=qc.InitialPosition.Earliest
        )
        last = None
        for _ in range(n):
            last = consumer.receive(30_000)
        assert last is not None
        consumer.acknowledge_cumulative(last)
        keep_from = last.message_id().ledger_id()
        if last.message_id().entry_id() == ENTRIES_PER_LEDGER - 1:
            keep_from += 1  # the whole ledger is consumed: it goes too
        deadline = time.monotonic() + WAIT_S
        while True:
            spans = spans_of(broker, topic)
            if spans and spans[0].ledger_id >= keep_from:
                consumer.close()
                return spans
            assert time.monotonic() < deadline, f"ledgers not deleted: {spans}"
            time.sleep(0.05)
    finally:
        client.close()


def ids(spark: Any, broker: BrokerProcess, topic: str) -> list[tuple[int, int]]:
    rows = source(spark, broker, topic=topic).collect()
    return [tuple(int(x) for x in r.messageId.split(":")[:2]) for r in rows]  # type: ignore[misc]


def values(rows: list[Any]) -> list[bytes]:
    return [bytes(r.value) for r in rows]


def test_batch_read_from_a_deleted_start(spark: Any, broker: BrokerProcess) -> None:
    topic = unique_topic("loss-batch")
    produce(broker, topic, [f"m{i:02d}".encode() for i in range(12)])
    positions = ids(spark, broker, topic)
    first_ledger, second_ledger = positions[0][0], positions[5][0]
    assert first_ledger != second_ledger  # 5 entries a ledger
    consume_and_delete(broker, topic, 7)  # deletes the first ledger only
    start = json.dumps({topic: {"-1": f"{first_ledger}:2"}})
    with pytest.raises(Exception) as info:
        source(spark, broker, topic=topic, startingOffsets=start).collect()
    text = str(info.value)
    assert f"{topic} (partition -1)" in text
    assert f"from {first_ledger}:2 before {second_ledger}:0" in text
    assert f"ledger {first_ledger} was deleted" in text
    rows = source(
        spark, broker, topic=topic, startingOffsets=start, failOnDataLoss="false"
    ).collect()
    assert values(rows) == [f"m{i:02d}".encode() for i in range(5, 12)]


def _run_stream(spark: Any, broker: BrokerProcess, topic: str, ckpt: Path, **opts: str) -> list[Any]:
    """One AvailableNow run from the checkpoint; the rows it wrote."""
    rows: list[Any] = []
    df = source(spark, broker, stream=True, topic=topic, startingOffsets="earliest", **opts)
    query = start_query(
        df.writeStream.foreachBatch(lambda batch, _: rows.extend(batch.collect()))
        .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start
    )
    query.awaitTermination()
    return rows


def test_stream_restarted_after_its_unread_messages_were_deleted(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = unique_topic("loss-stream")
    ckpt = tmp_path / "ckpt"
    produce(broker, topic, [f"a{i}".encode() for i in range(5)])
    assert values(_run_stream(spark, broker, topic, ckpt)) == [f"a{i}".encode() for i in range(5)]
    read_ledger = ids(spark, broker, topic)[-1][0]
    produce(broker, topic, [f"b{i}".encode() for i in range(10)])
    # The query stopped after a4; a durable consumer reads on to b4, the broker then
    # deletes a4's and b0-b4's ledgers: b0-b4 are lost to the query.
    spans = consume_and_delete(broker, topic, 10)
    first = spans[0].ledger_id
    with pytest.raises(Exception) as info:
        _run_stream(spark, broker, topic, ckpt)
    text = str(info.value)
    assert f"{topic} (partition -1)" in text
    assert f"after {read_ledger}:4 before {first}:0" in text
    rows = _run_stream(spark, broker, topic, ckpt, failOnDataLoss="false")
    assert values(rows) == [f"b{i}".encode() for i in range(5, 10)]


def test_stream_restarted_after_its_topic_was_deleted_and_recreated(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = unique_topic("loss-deleted")
    ckpt = tmp_path / "ckpt"
    create_partitioned(broker, topic, 2)
    produce(broker, topic, [f"old{i}".encode() for i in range(6)])
    assert len(_run_stream(spark, broker, topic, ckpt)) == 6
    path = topic.split("://", 1)[1]
    req = urllib.request.Request(
        f"{broker.admin_url}/admin/v2/persistent/{path}/partitions?force=true",
        method="DELETE",
    )
    urllib.request.urlopen(req, timeout=30).close()
    create_partitioned(broker, topic, 2)
    produce(broker, topic, [f"new{i}".encode() for i in range(4)])
    with pytest.raises(Exception) as info:
        _run_stream(spark, broker, topic, ckpt)
    text = str(info.value)
    assert f"{topic}-partition-" in text and "was deleted" in text
    rows = _run_stream(spark, broker, topic, ckpt, failOnDataLoss="false")
    assert sorted(values(rows)) == [f"new{i}".encode() for i in range(4)]


def test_task_notices_messages_deleted_after_planning(
    broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """The executor side, without Spark: the range was stored when it was planned and
    is deleted before the task reads it (the reader skips to what is left)."""
    topic = unique_topic("loss-task")
    produce(broker, topic, [f"m{i:02d}".encode() for i in range(12)])
    before = spans_of(broker, topic)
    assert [s.entries for s in before] == [5, 5, 2]
    l1, l2, l3 = (s.ledger_id for s in before)

    def plan() -> Any:
        ranges = plan_ranges(
            {topic: Bound.after(l1, 1)},
            {topic: Bound.after(l3, 1)},
            lambda t: ledger_spans(broker.admin_url, t),
            {},
            True,
        )
        assert len(ranges) == 1
        return ranges[0]

    planned = plan()
    consume_and_delete(broker, topic, 10)
    settings = ReadSettings(
        service_url=broker.url,
        admin_url=broker.admin_url,
        operation_timeout_s=30,
        poll_timeout_ms=30_000,
        receiver_queue_size=100,
        arrow_batch_rows=100,
        fail_on_data_loss=True,
    )
    with pytest.raises(DataLossError) as info:
        list(read_partition(planned, settings))
    text = str(info.value)
    assert f"{topic} (partition -1)" in text
    assert f"after {l1}:1 before {l3}:0" in text
    assert f"ledger {l1}, {l2} deleted" in text
    lenient = ReadSettings(**{**settings.__dict__, "fail_on_data_loss": False})
    with caplog.at_level(logging.WARNING, logger="pyspark_quasar"):
        batches = list(read_partition(planned, lenient))
    got = [v for b in batches for v in b.column("value").to_pylist()]
    assert got == [b"m10", b"m11"]
    assert f"after {l1}:1 before {l3}:0" in caplog.text
