"""Run a chaos plan against a real broker process and judge its history.

:func:`run` starts a broker (``BrokerProcess``) in a work directory, with the fault
proxy the workers connect through in front of it (``environment``), creates the
partitioned topic and a ``chaos-verify`` subscription (so nothing is trimmed before
the final drain reads it), starts the plan's workers, and fires the plan's faults at
their times while sampling the broker's RSS. When the workload phase ends (its
duration, or the operation budget once every fault has fired) it:

1. stops the producers (SIGTERM; an open transaction is left to its timeout);
2. writes one sentinel to each partition and waits until every consumer's
   subscription has read them all (consumers make progress after the faults);
3. stops the consumers, compacts every partition once more and reads each one
   compacted (``compaction.py``; compactions also run at the plan's times during
   the workload), then drains ``chaos-verify`` from the start: a complete,
   read-committed read of everything stored;
4. replays every worker's history and its own into the checker.

The runner's own steps (faults, sentinels, the final reads) go to ``runner.jsonl``
beside the workers' files, so the work directory holds the whole history.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import quasar.client as qc
from quasar.errors import QuasarError, Timeout
from quasar.testing.chaos.compaction import CompactionDriver, final_compaction
from quasar.testing.chaos.disk_full import DISK_SIZE_BYTES
from quasar.testing.chaos.environment import RunEnvironment
from quasar.testing.chaos.evidence import dump, fetch_partition_stats, stall_evidence
from quasar.testing.chaos.faults import FaultFactory, Targets
from quasar.testing.chaos.recorder import Recorder, merged
from quasar.testing.chaos.registry import FAULTS
from quasar.testing.chaos.report import (
    OPERATION_KINDS,
    RunSummary,
    build_history,
)
from quasar.testing.chaos.schedule import (
    CONSUMER,
    PRODUCER,
    TXN_PRODUCER,
    Plan,
    WorkerSpec,
)
from quasar.testing.chaos.workload import SENTINEL_PREFIX
from quasar.testing.process import BrokerProcess

log = logging.getLogger("chaos")

VERIFY_SUBSCRIPTION = "chaos-verify"
TXN_TIMEOUT_MS = 3000
# How long a transaction may outlast its timeout, beyond the faults it overlapped:
# the coordinator's timeout sweep, a commit's retries and a broker's recovery.
RECOVERY_BOUND_S = 30.0
PROGRESS_TIMEOUT_S = 900.0
STALL_S = 60.0
DRAIN_TIMEOUT_S = 90.0
STRAGGLER_MS = 500
SAMPLE_INTERVAL_S = 0.5
READY_TIMEOUT_S = 120.0


class WorkerProcess:
    """One worker of the plan; every start is a new incarnation."""

    def __init__(self, spec: WorkerSpec, url: str, topic: str, workdir: Path,
                 operations: int, send_rate: float | None = None) -> None:
        self.spec = spec
        self.send_rate = send_rate
        self.name = spec.name
        self.url, self.topic, self.operations = url, topic, operations
        self.history = workdir / f"{spec.name}.jsonl"
        self.log_path = workdir / f"{spec.name}.log"
        self.incarnation = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.incarnation += 1
        cmd = [
            sys.executable, "-m", "quasar.testing.chaos.workload", "--url", self.url,
            "--topic", self.topic, "--name", self.name, "--role", self.spec.role,
            "--seed", str(self.spec.seed), "--history", str(self.history),
            "--incarnation", str(self.incarnation), "--txn-timeout-ms", str(TXN_TIMEOUT_MS),
            "--operations", str(0 if self.spec.role == CONSUMER else self.operations),
        ]
        if self.spec.subscription_type:
            cmd += ["--subscription-type", self.spec.subscription_type]
        if self.send_rate is not None and self.spec.role != CONSUMER:
            cmd += ["--send-rate", str(self.send_rate)]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def terminate(self) -> None:
        """SIGTERM: the worker finishes its current step and exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self, timeout_s: float = 30.0) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()


def _stop_all(workers: list[WorkerProcess]) -> None:
    # All at once: each one's client takes a moment to close.
    for w in workers:
        w.terminate()
    for w in workers:
        w.wait_stopped()


class OperationCounter:
    """Counts operation lines in the workers' files, reading only what is new."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.offsets = dict.fromkeys(paths, 0)
        self.counts: Counter[str] = Counter()

    def poll(self) -> int:
        for path in self.paths:
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets[path])
                    chunk = f.read()
            except FileNotFoundError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self.offsets[path] += len(complete)
            for line in complete.splitlines():
                start = line.find(b'"op": "')
                if start >= 0:
                    op = line[start + 7 : line.index(b'"', start + 7)].decode()
                    if op in OPERATION_KINDS:
                        self.counts[op] += 1
        return sum(self.counts.values())


def _admin_put(broker: BrokerProcess, path: str, body: bytes) -> None:
    req = urllib.request.Request(broker.admin_url + path, data=body, method="PUT")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as r:
        if r.status >= 300:
            raise RuntimeError(f"PUT {path}: HTTP {r.status}")


def run(
    plan: Plan,
    workdir: Path,
    *,
    faults: Mapping[str, FaultFactory] = FAULTS,
    broker_settings: dict[str, str] | None = None,
    disk_size_bytes: int = DISK_SIZE_BYTES,
    send_rate: float | None = None,
) -> RunSummary:
    """Run ``plan`` in ``workdir`` (created if missing) and return its summary.
    The workers reach the broker through a fault proxy; a plan with ``disk-full``
    faults puts the broker's data on a tmpfs of ``disk_size_bytes`` (unmounted at
    the end, the data with it).

    ``send_rate`` is each producer's sends per second (0: unpaced; None: the
    workload's default pace).

    Raises:
        KeyError: the plan names a fault kind ``faults`` has no factory for.
        MountRefused: the plan fills the disk and a tmpfs cannot be mounted here.
        RuntimeError, TimeoutError: the broker did not start or the topic could not
            be created (no verdict is possible).
    """
    for e in plan.faults:
        if e.kind not in faults:
            raise KeyError(f"no fault factory for {e.kind!r}")
    workdir.mkdir(parents=True, exist_ok=True)
    with RunEnvironment(plan, workdir, disk_size_bytes) as env:
        return _run(plan, workdir, env, faults, broker_settings, send_rate)


def _run(
    plan: Plan,
    workdir: Path,
    env: RunEnvironment,
    faults: Mapping[str, FaultFactory],
    broker_settings: dict[str, str] | None,
    send_rate: float | None,
) -> RunSummary:
    began = time.monotonic()
    summary = RunSummary(plan.seed)
    rec = Recorder(workdir / "runner.jsonl", "runner", 0)
    broker = BrokerProcess(env.data_dir, log_path=workdir / "broker.log",
                           settings=broker_settings,
                           advertised_address=env.advertised_address)
    worker_url = env.start_proxy(broker.port)
    broker.start()
    topic = f"persistent://public/default/chaos-{plan.seed}"
    _admin_put(broker, f"/admin/v2/persistent/public/default/chaos-{plan.seed}/partitions",
               str(plan.partitions).encode())
    partitions = [f"{topic}-partition-{i}" for i in range(plan.partitions)]
    client = qc.Client(broker.url, operation_timeout_seconds=30)
    client.subscribe(topic, VERIFY_SUBSCRIPTION,
                     initial_position=qc.InitialPosition.Earliest).close()
    client.close()
    producers = [s for s in plan.workers if s.role in (PRODUCER, TXN_PRODUCER)]
    per_producer = max(1, plan.operations // (2 * len(producers)))
    workers = [WorkerProcess(s, worker_url, topic, workdir, per_producer, send_rate)
               for s in plan.workers]
    compactions = CompactionDriver(broker.admin_url, partitions, plan.compactions,
                                   workdir / "compactor.jsonl")
    counter = OperationCounter([w.history for w in workers] + [compactions.history])

    def sample() -> None:
        if broker.proc is not None and broker.proc.poll() is None:
            try:
                rss = broker.rss_bytes()
            except (OSError, AssertionError):
                return
            summary.rss_samples.append(rss)

    def idle_until(deadline: float) -> None:
        # The fault schedule's clock: sample RSS and count operations meanwhile.
        while True:
            sample()
            counter.poll()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(SAMPLE_INTERVAL_S, left))

    try:
        for w in sorted(workers, key=lambda w: w.spec.role != CONSUMER):
            w.start()
        _await_ready(workers)
        started = time.monotonic()
        targets = Targets(broker, list(workers), env.proxy, env.disk)
        compactions.start(started)
        for n, event in enumerate(plan.faults):
            idle_until(started + event.at_s)
            fault = faults[event.kind](event, targets)
            rec.record("fault_start", n=n, kind=event.kind, target=event.target)
            fault.inject()
            idle_until(time.monotonic() + event.duration_s)
            fault.heal()
            rec.record("fault_end", n=n, kind=event.kind)
            summary.faults[event.kind] += 1
        end = started + plan.duration_s
        while time.monotonic() < end and counter.poll() < plan.operations:
            idle_until(min(end, time.monotonic() + 1.0))

        rec.record("phase", name="stop producers")
        compactions.stop()
        _stop_all([w for w in workers if w.spec.role != CONSUMER])
        rec.record("phase", name="sentinels")
        sentinels = _write_sentinels(broker, partitions, rec)
        _await_progress(workers, sentinels, rec, broker.admin_url, workdir)
        rec.record("phase", name="stop consumers")
        _stop_all(workers)
        rec.record("phase", name="final compaction")
        final_compaction(broker.url, broker.admin_url, partitions, rec)
        rec.record("phase", name="final drain")
        _drain(broker, topic, sentinels, rec)
        rec.record("phase", name="done")
        sample()
    finally:
        compactions.stop()
        for w in workers:
            w.kill()
        broker.kill()
        rec.close()
    counter.poll()
    summary.operations = counter.counts
    summary.duration_s = time.monotonic() - began
    paths = [w.history for w in workers] + [compactions.history, workdir / "runner.jsonl"]
    history = build_history(merged(paths))
    (workdir / "history.jsonl").write_text(history.to_jsonl())
    summary.report = history.check(recovery_bound_s=RECOVERY_BOUND_S)
    return summary


def _await_ready(workers: list[WorkerProcess]) -> None:
    """The fault clock starts once every worker has connected (Python start-up
    of several processes on a busy machine takes seconds)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        ready = {e["w"] for e in merged([w.history for w in workers]) if e["op"] == "ready"}
        if ready >= {w.name for w in workers}:
            return
        for w in workers:
            if w.proc is not None and w.proc.poll() is not None:
                raise RuntimeError(f"worker {w.name} exited at start; see {w.log_path}")
        time.sleep(SAMPLE_INTERVAL_S)  # polling interval of a bounded wait
    raise TimeoutError(f"workers not connected within {READY_TIMEOUT_S}s")


def _write_sentinels(broker: BrokerProcess, partitions: list[str], rec: Recorder) -> set[str]:
    client = qc.Client(broker.url, operation_timeout_seconds=30)
    try:
        for p in partitions:
            value = f"{SENTINEL_PREFIX}{p}"
            rec.record("sentinel", value=value, partition=p)
            producer = client.create_producer(p)
            producer.send(value.encode())
            producer.close()
    finally:
        client.close()
    return {f"{SENTINEL_PREFIX}{p}" for p in partitions}


def _await_progress(
    workers: list[WorkerProcess], sentinels: set[str], rec: Recorder,
    admin_url: str, workdir: Path,
) -> None:
    """Every consumer subscription reads every sentinel. A backlog may take a
    while; a partition of a subscription that reads nothing for ``STALL_S`` before
    its sentinel is stuck (``no-progress``), even while other partitions move (one
    starved partition is the finding), and its record carries the broker's stats
    of that subscription taken at that moment (``evidence.py``). The wait ends when
    every subscription has read every sentinel or every one still missing is stuck."""
    consumers = [w for w in workers if w.spec.role == CONSUMER]
    subs = {f"chaos-{w.spec.subscription_type}" for w in consumers}
    began = time.monotonic()
    deadline = began + PROGRESS_TIMEOUT_S
    declared: set[tuple[str, str]] = set()
    fetched: dict[str, dict[str, Any]] = {}

    def declare(key: tuple[str, str], quiet: float, why: str) -> None:
        sub, partition = key
        if partition not in fetched:  # one fetch per partition and moment
            fetched[partition] = fetch_partition_stats(admin_url, partition)
            dump(workdir, partition, fetched[partition])
        rec.record("no_progress", what=f"{sub} {why} the sentinel of {partition}; "
                   f"nothing read there for {quiet:.0f}s", sub=sub, partition=partition,
                   stats=stall_evidence(fetched[partition], sub))
        declared.add(key)

    while True:
        seen: dict[str, set[str]] = {}
        last: dict[tuple[str, str], float] = {}
        for e in merged([w.history for w in consumers]):
            if e.get("op") == "recv":
                last[(e["sub"], e["partition"])] = e["t"]
                if e["value"] in sentinels:
                    seen.setdefault(e["sub"], set()).add(e["value"])
        now = time.monotonic()
        pending = {
            (sub, s[len(SENTINEL_PREFIX):])
            for sub in subs for s in sentinels - seen.get(sub, set())
        }
        fetched.clear()
        for k in sorted(pending - declared):
            quiet = now - max(last.get(k, 0.0), began)
            if quiet > STALL_S:
                declare(k, quiet, "stalled before")
        if not pending or pending <= declared or now > deadline:
            break
        for w in consumers:  # a consumer that died on its own is a finding too
            if w.proc is not None and w.proc.poll() not in (None, 0):
                rec.record("no_progress", what=f"{w.name} exited with {w.proc.returncode}")
                w.start()
        time.sleep(SAMPLE_INTERVAL_S)  # polling interval of a bounded wait
    for k in sorted(pending - declared):  # still moving at the deadline
        declare(k, now - max(last.get(k, 0.0), began), "did not reach")


def _drain(broker: BrokerProcess, topic: str, sentinels: set[str], rec: Recorder) -> None:
    client = qc.Client(broker.url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(topic, VERIFY_SUBSCRIPTION,
                                    initial_position=qc.InitialPosition.Earliest)
        missing = set(sentinels)
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        timeout_ms = 1000
        while True:
            if not missing:
                timeout_ms = STRAGGLER_MS
            elif time.monotonic() > deadline:
                rec.record("no_progress", what=f"final drain did not read {sorted(missing)}")
                break
            try:
                msg = consumer.receive(timeout_ms)
            except Timeout:
                if not missing:
                    break
                continue
            except QuasarError as exc:
                log.info("drain: %r", exc)
                continue
            mid = msg.message_id()
            value = msg.data().decode()
            rec.record("final_read", value=value, partition=msg.topic_name(),
                       position=[mid.ledger_id(), mid.entry_id(), mid.batch_index()])
            consumer.acknowledge(msg)
            missing.discard(value)
    finally:
        client.close()


__all__ = ["OperationCounter", "WorkerProcess", "run"]
