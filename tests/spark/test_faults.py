"""Whole-process faults: the Spark driver or the broker killed with SIGKILL mid-query.

Queries run in child processes (``jobs.py``, the example pipeline) started in their own
session, so a kill takes the driver's Python process, its JVM and its workers at once.
Every wait is for an event (a file in the checkpoint, a process exit), bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pyspark_quasar.faults import CRASH_ENV, MARKER_ENV
from quasar.testing.process import BrokerProcess

from .conftest import (
    checkpoint_files,
    create_partitioned,
    open_transactions,
    produce,
    read_all,
    unique_topic,
)

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("jobs.py")
EXAMPLE = ROOT / "examples" / "spark_window_aggregation.py"
JOB_TIMEOUT_S = 240


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop(CRASH_ENV, None)
    env.update(extra or {})
    return env


_CHILDREN: list[subprocess.Popen[bytes]] = []


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Every job a test started; whatever still runs at the end is killed."""
    yield _CHILDREN
    while _CHILDREN:
        kill_group(_CHILDREN.pop())


def start_job(args: dict[str, Any], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, str(JOB), json.dumps(args)],
            env=_env(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
        )
    _CHILDREN.append(proc)
    return proc


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the job's whole session: its Python, JVM and Spark workers."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(60)


def wait_for(what: str, check: Callable[[], bool], proc: subprocess.Popen[bytes] | None, log: Path) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not check():
        if proc is not None and proc.poll() is not None and not check():
            raise AssertionError(f"job exited ({proc.returncode}) before {what}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(0.1)  # polling interval of a bounded wait for a file or an exit


def run_to_end(proc: subprocess.Popen[bytes], log: Path) -> int:
    try:
        return proc.wait(JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise AssertionError(f"job did not finish:\n{log.read_text()[-4000:]}") from None


def _exactly(broker: BrokerProcess, dst: str, values: list[bytes]) -> None:
    got = Counter(m.data() for m in read_all(broker, dst))
    dupes = {v: n for v, n in got.items() if n > 1}
    assert not dupes, f"duplicates: {list(dupes.items())[:5]}"
    assert sorted(got) == sorted(values), f"{len(got)} of {len(values)} values"


@pytest.fixture
def pipe(
    broker: BrokerProcess, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> dict[str, Any]:
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
    broker: BrokerProcess, pipe: dict[str, Any], tmp_path: Path
) -> None:
    args, ckpt, log = pipe["args"], pipe["ckpt"], pipe["log"]
    marker = tmp_path / "crashed"
    proc = start_job(args, log, {CRASH_ENV: "sink.committed@1", MARKER_ENV: str(marker)})
    code = run_to_end(proc, log)
    kill_group(proc)  # whatever the crash left of the session
    assert marker.exists(), log.read_text()[-4000:]
    assert code != 0
    # Batch 1 is in the offset log and committed on the broker, not in Spark's
    # commit log: the restart replays it.
    assert 1 in checkpoint_files(ckpt, "offsets")
    assert checkpoint_files(ckpt, "commits") == [0]
    assert len(read_all(broker, args["dst"])) == 200
    proc = start_job(args, log)
    assert run_to_end(proc, log) == 0, log.read_text()[-4000:]
    _exactly(broker, args["dst"], pipe["values"])
    sink_id = args["sink_options"]["sinkId"]
    assert open_transactions(broker, [f"{sink_id}-p{p}" for p in range(2)]) == []


def test_broker_killed_and_restarted_during_a_running_query(
    broker: BrokerProcess, pipe: dict[str, Any]
) -> None:
    args, ckpt, log = pipe["args"], pipe["ckpt"], pipe["log"]
    args["source_options"]["maxRecordsPerTrigger"] = "60"
    proc = start_job(args, log)
    wait_for("two committed batches", lambda: len(checkpoint_files(ckpt, "commits")) >= 2, proc, log)
    broker.kill()
    broker.start()
    # The query rides out the outage or fails; a failed one is restarted from its
    # checkpoint, as an operator (or a job scheduler) would.
    attempts = 1
    while run_to_end(proc, log) != 0:
        attempts += 1
        assert attempts <= 3, log.read_text()[-4000:]
        proc = start_job(args, log)
    _exactly(broker, args["dst"], pipe["values"])


@pytest.mark.timeout(600)
def test_example_pipeline_killed_twice_equals_batch_recomputation(
    broker: BrokerProcess, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    prefix = f"wa{tmp_path.name[-10:]}".replace("_", "")
    common = ["--service-url", broker.url, "--admin-url", broker.admin_url, "--prefix", prefix]
    subprocess.run(
        [sys.executable, str(EXAMPLE), *common, "generate", "--events", "800"],
        check=True, env=_env(), cwd=ROOT, timeout=JOB_TIMEOUT_S,
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
                run_cmd, env=_env(), stdout=out, stderr=subprocess.STDOUT,
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
