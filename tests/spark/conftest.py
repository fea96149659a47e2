"""Fixtures for the Spark connector tests: a real broker process, a local Spark session.

Each test module shares one Spark session (local mode, ``local[2,2]``: two cores and
one task retry, so a task that fails once is retried as on a cluster) to pay the JVM
start once; topics get unique names so tests share a broker without seeing each
other's data. Crash tests run their queries in child processes (``jobs.py``).
"""

from __future__ import annotations

import os
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client as qc
from quasar.testing.process import BrokerProcess

# Spark's Python workers must run this interpreter (the venv: pyarrow, quasar, and
# pyspark_quasar for the data-source lookup), not whatever `python3` is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "data")
    proc.start()
    yield proc
    proc.kill()


def new_session(app: str, master: str = "local[2,2]") -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.driver.memory", "1g")
        # A Python worker connects back to the JVM within this time (default 15 s);
        # on a loaded 2-core machine starting one can take longer.
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    session = new_session(f"quasar-{request.module.__name__}")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def unique_topic(prefix: str = "t") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def create_partitioned(broker: BrokerProcess, topic: str, partitions: int) -> None:
    path = topic.split("://", 1)[1]
    req = urllib.request.Request(
        f"{broker.admin_url}/admin/v2/persistent/{path}/partitions",
        data=str(partitions).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30):
        pass


def source(spark: Any, broker: BrokerProcess, stream: bool = False, **options: str) -> Any:
    reader = spark.readStream if stream else spark.read
    reader = (
        reader.format("quasar")
        .option("service.url", broker.url)
        .option("admin.url", broker.admin_url)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def read_all(broker: BrokerProcess, topic: str) -> list[qc.Message]:
    """Every committed message of ``topic`` (all partitions), with quasar's reader."""
    client = qc.Client(broker.url, operation_timeout_seconds=30)
    out: list[qc.Message] = []
    try:
        for part in client.get_topic_partitions(topic):
            reader = client.create_reader(part, qc.MessageId.earliest)
            while reader.has_message_available():
                out.append(reader.read_next(30_000))
            reader.close()
    finally:
        client.close()
    return out


def open_transactions(broker: BrokerProcess, client_names: list[str]) -> list[Any]:
    client = qc.Client(broker.url, enable_transaction=True, admin_url=broker.admin_url)
    try:
        return [t for n in client_names for t in client.get_client_transactions(n).open]
    finally:
        client.close()


def produce(
    broker: BrokerProcess, topic: str, values: list[bytes], key: bool = True
) -> None:
    client = qc.Client(broker.url)
    try:
        producer = client.create_producer(
            topic, batching_enabled=False, block_if_queue_full=True
        )
        results: list[Any] = []
        for i, v in enumerate(values):
            producer.send_async(
                v, lambda r, m: results.append(r), partition_key=f"k{i}" if key else None
            )
        producer.flush()
        assert results == [qc.Result.Ok] * len(values), set(results)
        producer.close()
    finally:
        client.close()


def checkpoint_files(checkpoint: Path, kind: str) -> list[int]:
    d = checkpoint / kind
    if not d.exists():
        return []
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit())
