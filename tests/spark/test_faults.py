"""Whole-process faults: the Spark driver or the broker killed with SIGKILL mid-query.

Queries run in child processes (``jobs.py``, the example pipeline) started in their own
session, so a kill takes the driver's Python process, its JVM and its workers at once.
Every wait is for an event (a file in the checkpoint, a process exit), bounded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pyspark_quasar.faults import CRASH_ENV, MARKER_ENV
from quasar.testing.process import BrokerProcess

from .conftest import (
    assert_exactly_once,
    checkpoint_files,
    create_partitioned,
    open_transactions,
    produce,
    read_all,
    unique_topic,
)
from .driver_jobs import (
    JOB_TIMEOUT_S,
    ROOT,
    job_env,
    kill_group,
    run_to_end,
    start_job,
    wait_for,
)

pytestmark = pytest.mark.spark

EXAMPLE = ROOT / "examples" / "spark_window_aggregation.py"


@pytest.fixture
def pipe(broker: BrokerProcess, tmp_path: Path) -> dict[str, Any]:
    src, dst = unique_topic("fin"), unique_topic("fout")
    create_partitioned(broker, src, 2)
    create_partitioned(broker, dst, 2)
    values = [f"r{i:05d}".encode() for i in range(300)]
    produce(broker, src, values)
    return {
        "args": {
            "service_url": broker.url,
            "admin_url": broker.admin_url,
            "src": src,
            "dst": dst,
            "checkpoint": str(tmp_path / "ckpt"),
            "source_options": {"maxRecordsPerTrigger": "100"},
            "sink_options": {"sinkId": f"fault-{tmp_path.name[-12:]}"},
        },
        "values": values,
        "ckpt": tmp_path / "ckpt",
        "log": tmp_path / "job.log",
    }


def test_driver_killed_after_sink_commit_before_spark_records_it(
    broker: BrokerProcess,
    pipe: dict[str, Any],
    tmp_path: Path,
    children: list[subprocess.Popen[bytes]],
) -> None:
    args, ckpt, log = pipe["args"], pipe["ckpt"], pipe["log"]
    marker = tmp_path / "crashed"
    proc = start_job(args, log, children, {CRASH_ENV: "sink.committed@1", MARKER_ENV: str(marker)})
    code = run_to_end(proc, log)
    kill_group(proc)  # whatever the crash left of the session
    assert marker.exists(), log.read_text()[-4000:]
    assert code != 0
    # Batch 1 is in the offset log and committed on the broker, not in Spark's
    # commit log: the restart replays it.
    assert 1 in checkpoint_files(ckpt, "offsets")
    assert checkpoint_files(ckpt, "commits") == [0]
    assert len(read_all(broker, args["dst"])) == 200
    proc = start_job(args, log, children)
    assert run_to_end(proc, log) == 0, log.read_text()[-4000:]
    assert_exactly_once(broker, args["dst"], pipe["values"])
    sink_id = args["sink_options"]["sinkId"]
    assert open_transactions(broker, [f"{sink_id}-p{p}" for p in range(2)]) == []


# Two Spark jobs, a broker restart and recovery between them: minutes on a busy
# 2-core machine, more than the suite's default limit.
@pytest.mark.timeout(900)
def test_broker_killed_and_restarted_during_a_running_query(
    broker: BrokerProcess, pipe: dict[str, Any], children: list[subprocess.Popen[bytes]]
) -> None:
    args, ckpt, log = pipe["args"], pipe["ckpt"], pipe["log"]
    args["source_options"]["maxRecordsPerTrigger"] = "60"
    proc = start_job(args, log, children)
    wait_for("two committed batches", lambda: len(checkpoint_files(ckpt, "commits")) >= 2, proc, log)
    broker.kill()
    broker.start()
    # The query rides out the outage or fails; a failed one is restarted from its
    # checkpoint, as an operator (or a job scheduler) would.
    attempts = 1
    while run_to_end(proc, log) != 0:
        attempts += 1
        assert attempts <= 3, log.read_text()[-4000:]
        proc = start_job(args, log, children)
    assert_exactly_once(broker, args["dst"], pipe["values"])


@pytest.mark.timeout(600)
def test_example_pipeline_killed_twice_equals_batch_recomputation(
    broker: BrokerProcess, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    prefix = f"wa{tmp_path.name[-10:]}".replace("_", "")
    common = ["--service-url", broker.url, "--admin-url", broker.admin_url, "--prefix", prefix]
    subprocess.run(
        [sys.executable, str(EXAMPLE), *common, "generate", "--events", "800"],
        check=True, env=job_env(), cwd=ROOT, timeout=JOB_TIMEOUT_S,
    )
    ckpt = tmp_path / "wa-ckpt"
    log = tmp_path / "example.log"
    run_cmd = [
        sys.executable, str(EXAMPLE), *common, "run", "--checkpoint", str(ckpt),
        "--stop-when-idle", "--max-records-per-trigger", "100",
    ]

    def start() -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                run_cmd, env=job_env(), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=ROOT,
            )
        children.append(proc)
        return proc

    for kill_after in (1, 3):
        proc = start()
        wait_for(
            f"{kill_after} committed batches",
            lambda n=kill_after: len(checkpoint_files(ckpt, "commits")) >= n,
            proc,
            log,
        )
        kill_group(proc)
    run_cmd.append("--check")  # the last run compares with a batch recomputation
    proc = start()
    code = run_to_end(proc, log)
    output = log.read_text()
    assert code == 0, output[-4000:]
    verdict = [line for line in output.splitlines() if "windows written" in line][-1]
    assert verdict.endswith(" 0 duplicates: OK"), verdict
    assert int(verdict.split()[0]) > 0
