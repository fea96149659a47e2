"""pyspark_quasar on a Spark standalone cluster: a master and two workers as processes.

One cluster (``quasar.testing.spark_cluster``) and one driver session on it serve the
module; the quasar side is the ``quasar_service`` fixture (service URL and admin URL),
run twice: one broker process, then a quasar cluster of two members with
transactions on (the service URL names both members, the admin URL is one member's,
which redirects a topic's requests to its owner). On the cluster the bundles of
``public/default`` are placed on both members, alternately, and every topic is named
so that its partitions fall in bundles of both: each pipeline reads from and writes to
both brokers. A task is caught mid-batch by a hold point (``test.failPoints``,
``=hold:<dir>``): it announces itself with its pid after sending its rows in its open
transaction, and the test kills its worker, the driver, or (on a cluster of its own)
the quasar member hosting its transaction's coordinator, knowing the batch is
running.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quasar.protocol import pb
from quasar.resources.bundles import BundlesData, bundle_of
from quasar.testing.cluster import ClusterProcess
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw
from quasar.testing.spark_cluster import SparkCluster

from .conftest import (
    ServiceEndpoints,
    assert_exactly_once,
    checkpoint_files,
    create_partitioned,
    open_transactions,
    produce,
    source,
)
from .driver_jobs import JOB_TIMEOUT_S, kill_group, run_to_end, start_job, wait_for
from .spark_sessions import new_session, start_query

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

# Partitions of every topic: enough to span the bundles of both members.
PARTITIONS = 4
# public/default's bundles (defaultNumberOfNamespaceBundles).
BUNDLES = BundlesData.even(4)
COORDINATOR_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"


@pytest.fixture(scope="module", params=["broker", "cluster"])
def quasar_service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceEndpoints]:
    """The quasar side as the pipelines see it: one broker, or two cluster members."""
    if request.param == "broker":
        broker: BrokerProcess = request.getfixturevalue("broker")
        yield ServiceEndpoints(broker.url, broker.admin_url)
        return
    zookeeper = request.getfixturevalue("zookeeper")
    with ClusterProcess(tmp_path_factory.mktemp("quasar-cluster"), zookeeper) as cluster:
        for i, bundle in enumerate(BUNDLES.ranges()):
            _place(cluster.brokers[i % 2], _name_in(bundle))
        yield ServiceEndpoints(
            cluster.service_url, cluster.brokers[1].admin_url,
            tuple(b.url for b in cluster.brokers),
        )


def _name_in(bundle: Any) -> str:
    """A topic name of ``public/default`` that falls in ``bundle``."""
    while True:
        name = f"persistent://public/default/place-{uuid.uuid4().hex[:10]}"
        if bundle_of(BUNDLES, name) == bundle:
            return name


def _place(member: BrokerProcess, topic: str) -> None:
    """Make ``member`` own ``topic``'s bundle (an authoritative LOOKUP acquires it)."""
    raw = Raw(member.port)
    try:
        raw.connect()
        cmd = pb.BaseCommand(type=pb.BaseCommand.LOOKUP)
        cmd.lookupTopic.topic, cmd.lookupTopic.request_id = topic, 1
        cmd.lookupTopic.authoritative = True
        answer = raw.request(cmd, pb.BaseCommand.LOOKUP_RESPONSE).lookupTopicResponse
    finally:
        raw.close()
    assert answer.response == pb.CommandLookupTopicResponse.Connect, answer


def unique_topic(prefix: str) -> str:
    """A new topic name whose partitions fall in bundles of both cluster members (the
    even and the odd bundles; see ``quasar_service``)."""
    while True:
        name = f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"
        parity = {
            BUNDLES.ranges().index(bundle_of(BUNDLES, f"{name}-partition-{p}")) % 2
            for p in range(PARTITIONS)
        }
        if parity == {0, 1}:
            return name


def owner_of(service: ServiceEndpoints, partition: str) -> str:
    """The ``pulsar://`` URL of the broker serving ``partition`` (HTTP lookup)."""
    path = partition.replace("://", "/", 1)
    with urllib.request.urlopen(f"{service.admin_url}/lookup/v2/topic/{path}", timeout=30) as r:
        return str(json.load(r)["brokerUrl"])


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cluster_spark(spark_cluster: SparkCluster) -> Iterator[Any]:
    session = new_session(
        "quasar-on-cluster", spark_cluster.master_url, spark_cluster.session_conf()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def hold_dir(tmp_path: Path) -> Iterator[Path]:
    """Where a held task announces itself; released at the end whatever happened."""
    d = tmp_path / "hold"
    d.mkdir()
    yield d
    (d / "release").write_text("")


def _held_pid(hold_dir: Path, still_running: Any, log: str = "") -> int:
    """Wait until a task announces itself in ``hold_dir``; its Python worker's pid."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not (held := sorted(hold_dir.glob("*.held"))):
        assert still_running(), f"the query ended before a task was held\n{log}"
        assert time.monotonic() < deadline, "no task was held"
        time.sleep(0.1)  # polling interval of a bounded wait for a file
    return int(held[0].name.split(".")[0])


def _sink_query(
    spark: Any,
    service: ServiceEndpoints,
    src: str,
    dst: str,
    ckpt: Path,
    sink_id: str,
    fail_points: str | None = None,
) -> Any:
    """``src`` to ``dst`` exactly once, 60 entries a micro-batch, until the data ends."""
    writer = (
        source(spark, service, stream=True, topic=src, startingOffsets="earliest",
               maxRecordsPerTrigger="60")
        .selectExpr("value", "key")
        .writeStream.format("quasar")
        .option("service.url", service.url)
        .option("admin.url", service.admin_url)
        .option("topic", dst)
        .option("checkpointLocation", str(ckpt))
        .option("sinkId", sink_id)
        .trigger(availableNow=True)
    )
    if fail_points:
        writer = writer.option("test.failPoints", fail_points)
    return start_query(writer.start)


def _pipe(service: ServiceEndpoints, rows: int) -> tuple[str, str, list[bytes]]:
    src, dst = unique_topic("cin"), unique_topic("cout")
    create_partitioned(service, src, PARTITIONS)
    create_partitioned(service, dst, PARTITIONS)
    values = [f"{src[-6:]}-{i:04d}".encode() for i in range(rows)]
    produce(service, src, values)
    return src, dst, values


def _finish(query: Any) -> None:
    assert query.awaitTermination(JOB_TIMEOUT_S), "the query did not finish"
    assert query.exception() is None, query.exception()


def test_batch_and_streaming_reads_on_the_cluster_equal_what_was_produced(
    cluster_spark: Any, spark_cluster: SparkCluster, quasar_service: ServiceEndpoints,
    tmp_path: Path,
) -> None:
    topic = unique_topic("cread")
    create_partitioned(quasar_service, topic, PARTITIONS)
    values = [f"c{i:04d}".encode() for i in range(200)]
    produce(quasar_service, topic, values)
    if quasar_service.members:
        # Each member serves some partitions of the topic.
        owners = {owner_of(quasar_service, f"{topic}-partition-{p}") for p in range(PARTITIONS)}
        assert owners == set(quasar_service.members)

    rows = source(cluster_spark, quasar_service, topic=topic).collect()
    assert sorted(bytes(r.value) for r in rows) == values
    assert {r.partition for r in rows} == set(range(PARTITIONS))

    name = f"cread_{tmp_path.name[-8:]}".replace("-", "_")
    writer = (
        source(cluster_spark, quasar_service, stream=True, topic=topic,
               startingOffsets="earliest", maxRecordsPerTrigger="80")
        .writeStream.format("memory").queryName(name)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
    )
    query = start_query(writer.start)
    _finish(query)
    streamed = [bytes(r.value) for r in cluster_spark.table(name).collect()]
    assert sorted(streamed) == values
    assert len(checkpoint_files(tmp_path / "ckpt", "commits")) >= 2
    # The tasks ran on the cluster's executors: the application holds a core on each worker.
    apps = spark_cluster.master_state()["activeapps"]
    assert [a["cores"] for a in apps if a["name"] == "quasar-on-cluster"] == [2]


def test_exactly_once_sink_from_the_cluster(
    cluster_spark: Any, quasar_service: ServiceEndpoints, tmp_path: Path
) -> None:
    src, dst, values = _pipe(quasar_service, 150)
    sink_id = f"csink-{tmp_path.name[-10:]}"
    query = _sink_query(cluster_spark, quasar_service, src, dst, tmp_path / "ckpt", sink_id)
    _finish(query)
    assert_exactly_once(quasar_service, dst, values)
    assert len(checkpoint_files(tmp_path / "ckpt", "commits")) >= 2
    assert open_transactions(quasar_service, [f"{sink_id}-p{p}" for p in range(PARTITIONS)]) == []


def test_worker_killed_mid_batch_tasks_rerun_on_the_other_worker_exactly_once(
    cluster_spark: Any, spark_cluster: SparkCluster, quasar_service: ServiceEndpoints,
    tmp_path: Path, hold_dir: Path,
) -> None:
    src, dst, values = _pipe(quasar_service, 150)
    sink_id = f"ckill-{tmp_path.name[-10:]}"
    query = _sink_query(
        cluster_spark, quasar_service, src, dst, tmp_path / "ckpt", sink_id,
        fail_points=f"task.write@b1p0a0=hold:{hold_dir}",
    )
    pid = _held_pid(hold_dir, lambda: query.isActive)
    # Batch 1 is running: its task had sent its rows in an open transaction and holds
    # the batch's commit back.
    assert 1 not in checkpoint_files(tmp_path / "ckpt", "commits")
    victim = spark_cluster.worker_of(pid)
    assert victim is not None, f"task process {pid} belongs to no worker"
    survivors = [w for w in spark_cluster.workers if w is not victim and w.running]
    spark_cluster.kill_worker(victim)
    _finish(query)
    assert_exactly_once(quasar_service, dst, values)
    # The killed attempt's transaction was aborted by the commit's sweep.
    assert open_transactions(quasar_service, [f"{sink_id}-p{p}" for p in range(PARTITIONS)]) == []
    state = spark_cluster.master_state()
    assert spark_cluster.worker_state(victim, state) == "DEAD"
    assert spark_cluster.alive_workers(state) == survivors
    # A replacement worker joins, so the module's later tests have two workers again.
    spark_cluster.start_worker()


def test_driver_killed_mid_batch_and_restarted_from_its_checkpoint_exactly_once(
    spark_cluster: SparkCluster, quasar_service: ServiceEndpoints, tmp_path: Path,
    hold_dir: Path, children: list[subprocess.Popen[bytes]],
) -> None:
    src, dst, values = _pipe(quasar_service, 150)
    sink_id = f"cdrv-{tmp_path.name[-10:]}"
    ckpt, log = tmp_path / "ckpt", tmp_path / "job.log"
    args: dict[str, Any] = {
        "service_url": quasar_service.url,
        "admin_url": quasar_service.admin_url,
        "src": src,
        "dst": dst,
        "checkpoint": str(ckpt),
        "source_options": {"maxRecordsPerTrigger": "60"},
        "sink_options": {
            "sinkId": sink_id,
            "test.failPoints": f"task.write@b1p0a0=hold:{hold_dir}",
        },
        "master": spark_cluster.master_url,
        # One executor is enough to catch a batch mid-way (the held task blocks it) and
        # spares two executor starts on a shared machine.
        "spark_conf": {**spark_cluster.session_conf(), "spark.cores.max": "1"},
    }
    proc = start_job(args, log, children)
    wait_for("a task of batch 1 held", lambda: any(hold_dir.glob("*.held")), proc, log)
    kill_group(proc)  # the driver: its Python process and its JVM
    assert checkpoint_files(ckpt, "commits") == [0]
    assert 1 in checkpoint_files(ckpt, "offsets")
    del args["sink_options"]["test.failPoints"]
    proc = start_job(args, log, children)
    assert run_to_end(proc, log) == 0, log.read_text()[-4000:]
    assert_exactly_once(quasar_service, dst, values)
    assert open_transactions(quasar_service, [f"{sink_id}-p{p}" for p in range(PARTITIONS)]) == []


@pytest.fixture
def two_members(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[ClusterProcess]:
    """A cluster of its own (one of its members is killed): coordinator 0 and the
    even bundles of ``public/default`` on member 0, the rest on member 1."""
    work_dir = tmp_path / "quasar-cluster"
    work_dir.mkdir()
    cluster = ClusterProcess(
        work_dir, request.getfixturevalue("zookeeper"),
        transaction_coordinators=2,
    )
    with cluster:
        _place(cluster.brokers[0], f"{COORDINATOR_ASSIGN}-partition-0")
        _place(cluster.brokers[1], f"{COORDINATOR_ASSIGN}-partition-1")
        for i, bundle in enumerate(BUNDLES.ranges()):
            _place(cluster.brokers[i % 2], _name_in(bundle))
        yield cluster


def test_a_quasar_member_killed_mid_batch_its_bundles_move_and_the_sink_is_exactly_once(
    cluster_spark: Any, two_members: ClusterProcess, tmp_path: Path, hold_dir: Path,
) -> None:
    victim, survivor = two_members.brokers
    service = ServiceEndpoints(
        two_members.service_url, survivor.admin_url, (victim.url, survivor.url)
    )
    src, dst, values = _pipe(service, 240)
    sink_id = f"cmem-{tmp_path.name[-10:]}"
    query = _sink_query(
        cluster_spark, service, src, dst, tmp_path / "ckpt", sink_id,
        fail_points=f"task.write@b1p0a0=hold:{hold_dir}",
    )
    _held_pid(hold_dir, lambda: query.isActive)
    # Batch 1 is running, its held task's transaction is on coordinator 0, which the
    # victim hosts with half of the partitions. The victim goes without a word; its
    # bundles move to the survivor once its ZooKeeper session expires.
    victim.kill()
    (hold_dir / "release").write_text("")
    _finish(query)
    assert_exactly_once(service, dst, values)
    assert open_transactions(service, [f"{sink_id}-p{p}" for p in range(PARTITIONS)]) == []
    owners = {owner_of(service, f"{dst}-partition-{p}") for p in range(PARTITIONS)}
    assert owners == {survivor.url}
