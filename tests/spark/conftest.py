"""Fixtures for the Spark connector tests: a real broker process, a local Spark session.

Each test module shares one Spark session (local mode, ``local[2,2]``: two cores and
one task retry, so a task that fails once is retried as on a cluster) to pay the JVM
start once; topics get unique names so tests share a broker without seeing each
other's data. Crash tests run their queries in child processes (``jobs.py``,
started through ``driver_jobs.py``). The helpers take any ``QuasarService`` (service
URL and admin URL), so the cluster tests (``test_cluster.py``) can run against one
broker process or a multi-broker cluster alike.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

import quasar.client as qc
from quasar.testing.process import BrokerProcess

from .driver_jobs import kill_group
from .spark_sessions import new_session

# Spark's Python workers must run this interpreter (the venv: pyarrow, quasar, and
# pyspark_quasar for the data-source lookup), not whatever `python3` is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


class QuasarService(Protocol):
    """What the helpers need of the quasar side: a ``BrokerProcess``, or any service
    (a multi-broker cluster) reached through a service URL and an admin URL."""

    @property
    def url(self) -> str: ...

    @property
    def admin_url(self) -> str: ...


@dataclass(frozen=True)
class ServiceEndpoints:
    url: str
    admin_url: str
    # A cluster's members (``pulsar://`` URLs, as lookups answer them); empty for one
    # broker.
    members: tuple[str, ...] = ()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "data")
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    session = new_session(f"quasar-{request.module.__name__}")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Every driver process a test started (``driver_jobs.start_job`` appends to it);
    whatever still runs at the end is killed."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    while procs:
        kill_group(procs.pop())


def unique_topic(prefix: str = "t") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def create_partitioned(broker: QuasarService, topic: str, partitions: int) -> None:
    path = topic.split("://", 1)[1]
    req = urllib.request.Request(
        f"{broker.admin_url}/admin/v2/persistent/{path}/partitions",
        data=str(partitions).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30):
        pass


def source(spark: Any, broker: QuasarService, stream: bool = False, **options: str) -> Any:
    reader = spark.readStream if stream else spark.read
    reader = (
        reader.format("quasar")
        .option("service.url", broker.url)
        .option("admin.url", broker.admin_url)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def read_all(broker: QuasarService, topic: str) -> list[qc.Message]:
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


def open_transactions(broker: QuasarService, client_names: list[str]) -> list[Any]:
    """The open transactions of ``client_names``, from answers that cover every
    coordinator (on a cluster, of every member)."""
    client = qc.Client(broker.url, enable_transaction=True, admin_url=broker.admin_url)
    try:
        found = [client.get_client_transactions(n) for n in client_names]
    finally:
        client.close()
    assert [f.unavailable_coordinators for f in found] == [[]] * len(found)
    return [t for f in found for t in f.open]


def produce(
    broker: QuasarService, topic: str, values: list[bytes], key: bool = True
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


def assert_exactly_once(service: QuasarService, topic: str, values: list[bytes]) -> None:
    """Every value is in ``topic`` once: none missing, none twice."""
    got = Counter(m.data() for m in read_all(service, topic))
    dupes = {v: n for v, n in got.items() if n > 1}
    assert not dupes, f"duplicates: {list(dupes.items())[:5]}"
    assert sorted(got) == sorted(values), f"{len(got)} of {len(values)} values"


def checkpoint_files(checkpoint: Path, kind: str) -> list[int]:
    d = checkpoint / kind
    if not d.exists():
        return []
    return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit())
