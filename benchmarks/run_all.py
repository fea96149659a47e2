#!/usr/bin/env python3
"""The broker's benchmark set: three shapes, two clients, a baseline for each.

    python benchmarks/run_all.py [--seconds 20] [--warmup 5] [--clients quasar,pulsar]
                                 [--baseline sink|nosync|all|none] [--out FILE.json]
                                 [--scenarios NAME,...] [--keep-data DIR]

Starts a broker (``quasar standalone``, default configuration: fsync on, 1 ms group
commit) on free ports with a temporary data directory, runs every scenario with
``quasar perf pubsub`` (producer and consumer in separate processes, a fresh topic and
subscription per run) for each client, then runs the same set against the baseline
target, and prints a table and the floors. The figures go to ``--out`` as JSON
(default: a time-stamped file in the temp directory).

``--clients`` takes ``quasar``, ``pulsar`` or a mixed pair ``PRODUCER/CONSUMER``
(``quasar/pulsar`` pairs quasar's producer, the cheaper one per message, with the
official client's consumer, the cheaper one there).

Scenarios (1 topic, 1 partition, 1 KB messages, 1 producer, 1 consumer; the
producer keeps ``quasar perf``'s default window, pulsar-perf's: no count limit on
pending messages, the client's 64 MiB memory limit instead):

* ``batched-max``: client batching (1 ms, 128 KiB, 1000 msgs), unbounded rate.
  Floor: >= 100,000 msg/s published and consumed. The official client's consumer
  takes messages with ``batch_receive()`` (``--batch-receive 1000``, at most 10 ms
  per call); each message is still recorded and acknowledged on its own.
* ``unbatched-max``: no batching, unbounded rate. Floor: >= 15,000 msg/s published.
* ``unbatched-5k``: no batching, fixed 5,000 msg/s. Floor: publish p99 <= 10 ms.
  The latency counts from each message's scheduled send time (no coordinated
  omission).

Baselines, measured in the same script on the same machine:

* ``sink`` (default): ``quasar perf sink``, a null broker that receipts every SEND at
  once and forwards it to the consumer from memory (no storage, no fsync, no
  cursors). It is the ceiling of *this load generator on this machine*: the clients,
  loopback TCP and the CPU they share. "vs sink" = broker figure / sink figure, so
  1.00 means the broker costs nothing visible and 0.50 means it halves what the
  clients could otherwise do.
* ``nosync``: the same broker with ``journalSyncData=false``; "vs nosync" isolates
  what fsync-before-receipt costs.

Broker CPU is read from /proc for the broker process over each run; "other" is CPU
used on the machine by processes outside the run (other work on a shared machine
makes the figures noisy; it is reported so a reader can tell).

Transactions (``--transactions``: this set runs instead of the scenarios above)::

    python benchmarks/run_all.py --transactions [--seconds 20] [--warmup 5] [--repeat N]
                                 [--txn-concurrency 16] [--out FILE.json]

Each run gets a fresh broker (default configuration unless a scenario says otherwise)
so that what the broker wrote can be counted per run. ``quasar perf transaction`` runs
each shape with transactions and with ``--txn-disable`` (the same loop with plain sends
and acks):

* ``produce-50``: ``-nmc 0 -nmp 50 -c <--txn-concurrency>``, 1 KB. Floor: transactional
  msg/s >= 70 % of ``--txn-disable``.
* ``consume-produce-64``: ``-nmc 1 -nmp 1 -c 64`` (prefilled input), 1 KB. Floor:
  >= 1,000 txn/s with commit p99 <= 50 ms.
* ``cp-64-batched``: the same with transactions only, against a broker that batches
  both transaction logs (PIP-160: ``transactionLogBatchedWriteEnabled`` and
  ``transactionPendingAckBatchedWriteEnabled`` true, their ``MaxDelayInMillis`` 0, as
  ``docs/operations.md`` recommends). It is judged on the same floor, and reported
  beside the default rather than instead of it (batching is off by default, as in
  Pulsar).

Per transaction it reports the broker's CPU and the entries written to the
transaction log (``__transaction_log_N``, all coordinators), to the pending-ack stores
and to the output topic (data + markers). The admin REST API is asked first for the
transaction log's internal stats; when it has none (system ledgers are not topics) the
counts come from the broker's ledger metadata, read after the broker stopped. Entries
per transaction = entries / transactions opened (ended + failed + abandoned + the one
set-up transaction).

Numbers are for this machine and this commit; nothing here asserts speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from quasar.testing.process import BrokerProcess, free_port  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    args: tuple[str, ...]
    floor_text: str

    def check(self, produce: dict[str, Any], consume: dict[str, Any]) -> bool | None:
        """Whether the run meets the floor (None: the run failed)."""
        if "error" in produce or "error" in consume:
            return None
        pub = produce["throughput"]["msg_s"]
        sub = consume["throughput"]["msg_s"]
        if self.name == "batched-max":
            return pub >= 100_000 and sub >= 100_000
        if self.name == "unbatched-max":
            return pub >= 15_000
        if self.name == "unbatched-5k":
            return produce["latency_ms"]["p99"] <= 10.0
        raise AssertionError(self.name)


SCENARIOS = [
    Scenario(
        "batched-max",
        "batched 1 KB, unbounded",
        ("--batching", "-bd", "1", "-bb", "131072", "-bm", "1000"),
        ">= 100,000 msg/s published and consumed",
    ),
    Scenario(
        "unbatched-max",
        "unbatched 1 KB, unbounded",
        ("--no-batching",),
        ">= 15,000 msg/s published",
    ),
    Scenario(
        "unbatched-5k",
        "unbatched 1 KB at 5,000 msg/s",
        ("--no-batching", "-r", "5000"),
        "publish p99 <= 10 ms",
    ),
]


# --- CPU accounting ------------------------------------------------------------------


def process_cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # Fields after the command name start at field 3 (state): utime is 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy_s() -> float:
    """CPU seconds all cores spent not idle since boot."""
    parts = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in parts]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLK_TCK


# --- targets ---------------------------------------------------------------------------


@dataclass
class Target:
    """Something ``quasar perf`` can run against: the broker or a baseline."""

    name: str
    url: str = ""
    admin_url: str = ""
    pid: int = 0
    _broker: BrokerProcess | None = None
    _proc: subprocess.Popen[bytes] | None = None
    _log: Any = None

    def stop(self) -> None:
        if self._broker is not None:
            self._broker.stop()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._log is not None:
            self._log.close()


def start_broker(name: str, workdir: Path, env: dict[str, str]) -> Target:
    data = workdir / name / "data"
    data.parent.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(data, extra_env=env, log_path=workdir / name / "broker.log")
    broker.start()
    assert broker.proc is not None
    return Target(name, broker.url, broker.admin_url, broker.proc.pid, _broker=broker)


def start_sink(workdir: Path) -> Target:
    port = free_port()
    (workdir / "sink").mkdir(parents=True, exist_ok=True)
    log = open(workdir / "sink" / "sink.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "quasar.perf", "sink", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the perf sink did not start") from None
            time.sleep(0.05)  # polling interval of a bounded readiness loop
    return Target(
        "sink", f"pulsar://127.0.0.1:{port}", "", proc.pid, _proc=proc, _log=log
    )


# --- runs ------------------------------------------------------------------------------


@dataclass
class Run:
    scenario: Scenario
    client: str
    target: str
    produce: dict[str, Any] = field(default_factory=dict)
    consume: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    target_cpu_s: float = 0.0
    machine_busy_s: float = 0.0
    ok: bool | None = None
    other_before: float = 0.0

    def figure(self, role: str, *path: str) -> float | None:
        node: Any = self.produce if role == "produce" else self.consume
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return float(node)

    def to_json(self) -> dict[str, Any]:
        gen_cpu = sum(
            (
                part.get("cpu", {}).get("seconds", 0.0)
                for part in (self.produce, self.consume)
            ),
            0.0,
        )
        published = self.figure("produce", "messages") or 0.0
        return {
            "scenario": self.scenario.name,
            "title": self.scenario.title,
            "client": self.client,
            "target": self.target,
            "floor": self.scenario.floor_text,
            "meets_floor": self.ok,
            "wall_s": round(self.wall_s, 3),
            "target_cpu_s": round(self.target_cpu_s, 3),
            "target_cpu_us_per_msg": round(self.target_cpu_s * 1e6 / published, 2)
            if published
            else None,
            "generator_cpu_s": round(gen_cpu, 3),
            # Busy CPU on the machine not explained by the target and the generator.
            "other_cpu_s": round(
                max(0.0, self.machine_busy_s - self.target_cpu_s - gen_cpu), 3
            ),
            "other_cores_before": round(self.other_before, 3),
            "produce": self.produce,
            "consume": self.consume,
        }


def wait_for_quiet(target: Target, max_wait_s: float, threshold: float = 0.25) -> float:
    """Wait (at most ``max_wait_s``) until other processes use < ``threshold`` cores.

    On a shared machine other work steals CPU from the broker and the clients and
    shows up as tail latency; starting runs in a quiet moment makes figures more
    comparable. Returns the last busy figure (cores), whether or not it got quiet.
    """
    deadline = time.monotonic() + max_wait_s
    while True:
        cpu0, busy0 = process_cpu_s(target.pid), machine_busy_s()
        time.sleep(1.0)
        other = machine_busy_s() - busy0 - (process_cpu_s(target.pid) - cpu0)
        if other < threshold or time.monotonic() >= deadline:
            return other


def client_args(client: str) -> list[str]:
    """``quasar`` / ``pulsar``, or ``PRODUCER/CONSUMER`` for a mixed pair."""
    if "/" in client:
        producer, consumer = client.split("/", 1)
        return ["--producer-client", producer, "--consumer-client", consumer]
    return ["--client", client]


def consumer_args(scenario: Scenario, client: str) -> list[str]:
    """Batched runs with the official consumer use its ``batch_receive()``."""
    consumer = client.split("/", 1)[-1]
    if scenario.name == "batched-max" and consumer == "pulsar":
        return ["--batch-receive", "1000"]
    return []


def run_one(
    scenario: Scenario,
    client: str,
    target: Target,
    seconds: float,
    warmup: float,
    workdir: Path,
) -> Run:
    tag = f"{target.name}-{scenario.name}-{client.replace('/', '-')}-{time.time_ns()}"
    out = workdir / f"{tag}.json"
    log = workdir / f"{tag}.log"
    cmd = [
        sys.executable,
        "-m",
        "quasar.perf",
        "pubsub",
        "-u",
        target.url,
        *client_args(client),
        "-s",
        "1024",
        "-t",
        str(seconds),
        "--warmup",
        str(warmup),
        "-i",
        "5",
        "--json",
        str(out),
        *scenario.args,
        *consumer_args(scenario, client),
    ]
    if target.admin_url:
        cmd += ["--admin-url", target.admin_url]
    run = Run(scenario, client, target.name)
    cpu0, busy0, t0 = process_cpu_s(target.pid), machine_busy_s(), time.monotonic()
    with open(log, "wb") as f:
        proc = subprocess.run(
            cmd,
            stdout=f,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
            timeout=seconds + 180,
        )
    run.wall_s = time.monotonic() - t0
    run.target_cpu_s = process_cpu_s(target.pid) - cpu0
    run.machine_busy_s = machine_busy_s() - busy0
    if out.exists():
        data = json.loads(out.read_text())
        run.produce, run.consume = data.get("produce", {}), data.get("consume", {})
    else:
        err = {"error": f"exit {proc.returncode}; see {log}"}
        run.produce, run.consume = err, err
    run.ok = scenario.check(run.produce, run.consume)
    return run


def representative(runs: list[Run]) -> Run:
    """The median run of a repeated measurement, by the figure its floor is about."""

    def key(r: Run) -> float:
        if r.ok is None:
            return -1.0
        if r.scenario.name == "unbatched-5k":
            return -(r.figure("produce", "latency_ms", "p99") or 0.0)
        pub = r.figure("produce", "throughput", "msg_s") or 0.0
        sub = r.figure("consume", "throughput", "msg_s") or 0.0
        return min(pub, sub) if r.scenario.name == "batched-max" else pub

    ordered = sorted(runs, key=key)
    return ordered[(len(ordered) - 1) // 2]


# --- report ----------------------------------------------------------------------------


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def table(runs: list[Run]) -> str:
    header = (
        f"{'scenario':<14} {'client':<13} {'target':<7} {'pub msg/s':>10} {'sub msg/s':>10}"
        f" {'pub p50':>8} {'pub p99':>8} {'p99.9':>8} {'e2e p50':>8} {'e2e p99':>9}"
        f" {'gen cpu':>7} {'brk cpu':>7} {'brk us/m':>8} {'other':>6}  floor"
    )
    lines = [header, "-" * len(header)]
    for r in runs:
        j = r.to_json()
        window = r.figure("produce", "window", "seconds") or r.wall_s or 1.0
        verdict = {True: "PASS", False: "below", None: "FAILED"}[r.ok]
        if r.target != "broker":
            verdict = "(baseline)"
        lines.append(
            f"{r.scenario.name:<14} {r.client:<13} {r.target:<7}"
            f" {_fmt(r.figure('produce', 'throughput', 'msg_s')):>10}"
            f" {_fmt(r.figure('consume', 'throughput', 'msg_s')):>10}"
            f" {_fmt(r.figure('produce', 'latency_ms', 'p50'), '.2f'):>8}"
            f" {_fmt(r.figure('produce', 'latency_ms', 'p99'), '.2f'):>8}"
            f" {_fmt(r.figure('produce', 'latency_ms', 'p99.9'), '.2f'):>8}"
            f" {_fmt(r.figure('consume', 'latency_ms', 'p50'), '.1f'):>8}"
            f" {_fmt(r.figure('consume', 'latency_ms', 'p99'), '.1f'):>9}"
            f" {j['generator_cpu_s'] / r.wall_s:>7.2f}"
            f" {r.target_cpu_s / window if r.target_cpu_s else 0.0:>7.2f}"
            f" {_fmt(j['target_cpu_us_per_msg'], '.1f'):>8}"
            f" {j['other_cpu_s'] / r.wall_s:>6.2f}  {verdict}"
        )
    return "\n".join(lines)


def relative(runs: list[Run], baseline: str) -> tuple[str, list[dict[str, Any]]]:
    """Broker figures relative to the same scenario and client on ``baseline``."""
    base = {(r.scenario.name, r.client): r for r in runs if r.target == baseline}
    rows, out = [], []
    header = (
        f"{'scenario':<14} {'client':<13} {'pub vs ' + baseline:>14} {'sub vs ' + baseline:>14}"
        f" {'pub p99 ms (base)':>18} {'e2e p99 ms (base)':>18}"
    )
    for r in runs:
        if r.target != "broker":
            continue
        b = base.get((r.scenario.name, r.client))
        if b is None:
            continue

        def ratio(role: str, b: Run = b, r: Run = r) -> float | None:
            x = r.figure(role, "throughput", "msg_s")
            y = b.figure(role, "throughput", "msg_s")
            return x / y if x is not None and y else None

        item = {
            "scenario": r.scenario.name,
            "client": r.client,
            "baseline": baseline,
            "publish_rate_ratio": ratio("produce"),
            "consume_rate_ratio": ratio("consume"),
            "publish_p99_ms": r.figure("produce", "latency_ms", "p99"),
            "baseline_publish_p99_ms": b.figure("produce", "latency_ms", "p99"),
            "e2e_p99_ms": r.figure("consume", "latency_ms", "p99"),
            "baseline_e2e_p99_ms": b.figure("consume", "latency_ms", "p99"),
        }
        out.append(item)
        rows.append(
            f"{r.scenario.name:<14} {r.client:<13}"
            f" {_fmt(item['publish_rate_ratio'], '.2f'):>14}"
            f" {_fmt(item['consume_rate_ratio'], '.2f'):>14}"
            f" {_fmt(item['publish_p99_ms'], '.2f'):>8} ({_fmt(item['baseline_publish_p99_ms'], '.2f')})"
            f"   {_fmt(item['e2e_p99_ms'], '.1f'):>8} ({_fmt(item['baseline_e2e_p99_ms'], '.1f')})"
        )
    return "\n".join([header, "-" * len(header), *rows]), out


def machine_info() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = ""
    try:
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split("\n")
    except OSError:
        dirty = []
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        import pulsar  # noqa: F401

        pulsar_version = version("pulsar-client")
    except Exception:
        pulsar_version = None
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
        # Files changed in the work tree when the run started: the figures are for
        # the commit plus these changes.
        "modified_files": [d[3:] for d in dirty if d.strip()],
        "pulsar_client": pulsar_version,
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
    }


# --- transactions ----------------------------------------------------------------------


@dataclass(frozen=True)
class TxnScenario:
    name: str
    title: str
    args: tuple[str, ...]
    floor_text: str
    # Messages published (by ``quasar perf produce``, before the measured run and its
    # CPU accounting) to the input topic; 0: produce-only.
    prefill: int = 0
    # Broker settings as QUASAR_<key> environment variables; empty: the defaults.
    broker_env: tuple[tuple[str, str], ...] = ()
    # Also run the loop with --txn-disable (a broker setting that only concerns
    # transactions leaves that run unchanged, so a variant skips it).
    baseline: bool = True


# Both transaction logs batched, written at the end of the event-loop turn.
BATCHED_LOGS = tuple(
    (f"QUASAR_{prefix}BatchedWrite{key}", value)
    for prefix in ("transactionLog", "transactionPendingAck")
    for key, value in (("Enabled", "true"), ("MaxDelayInMillis", "0"))
)


def txn_scenarios(concurrency: int, seconds: float) -> list[TxnScenario]:
    # Enough input for the plain loop (which runs at well over 10,000/s) to last the
    # run; a run that drains it still reports rates over the time it had input.
    prefill = int(min(600_000, max(50_000, 25_000 * seconds)))
    consume_produce = TxnScenario(
        "consume-produce-64",
        "1 consumed + 1 produced per txn, 64 in flight",
        ("-nmc", "1", "-nmp", "1", "-c", "64"),
        ">= 1,000 txn/s and commit p99 <= 50 ms",
        prefill=prefill,
    )
    return [
        TxnScenario(
            "produce-50",
            f"produce only, 50 msgs/txn, {concurrency} in flight",
            ("-nmc", "0", "-nmp", "50", "-c", str(concurrency)),
            "txn msg/s >= 70 % of --txn-disable",
        ),
        consume_produce,
        replace(
            consume_produce,
            name="cp-64-batched",
            title=consume_produce.title + ", PIP-160 batching on",
            broker_env=BATCHED_LOGS,
            baseline=False,
        ),
    ]


TXN_LOG_PREFIX = "pulsar/system/persistent/__transaction_log_"
PENDING_ACK_SUFFIX = "__transaction_pending_ack"


def ledger_entries_offline(data_dir: Path) -> dict[str, int]:
    """Entries per managed ledger, from a *stopped* broker's ledger metadata.

    Read-only; the format is the broker's own (``/managed-ledgers/<name>`` keys whose
    value lists the ledgers with their entry counts). Empty if it cannot be read.
    """
    import sqlite3
    from urllib.parse import unquote

    db = data_dir / "metadata.db"
    out: dict[str, int] = {}
    if not db.exists():
        return out
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT path, value FROM kv WHERE path LIKE '/managed-ledgers/%'"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return out
    for path, value in rows:
        rest = path[len("/managed-ledgers/") :]
        if "/" in rest:
            continue  # a cursor of that ledger
        try:
            meta = json.loads(value)
            out[unquote(rest)] = sum(int(li["entries"]) for li in meta["ledgers"])
        except (ValueError, KeyError, TypeError):
            continue
    return out


def admin_get(admin_url: str, path: str) -> Any:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(admin_url + path, timeout=10) as r:
            return json.loads(r.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def txn_log_entries_live(admin_url: str, count: int = 16) -> int | None:
    """Entries of every ``__transaction_log_N`` from the admin REST API (None: not
    exposed)."""
    total, seen = 0, False
    for n in range(count):
        stats = admin_get(
            admin_url,
            f"/admin/v2/persistent/pulsar/system/__transaction_log_{n}/internalStats",
        )
        if isinstance(stats, dict) and "numberOfEntries" in stats:
            total += int(stats["numberOfEntries"])
            seen = True
    return total if seen else None


@dataclass
class TxnRun:
    scenario: TxnScenario
    txn: bool
    summary: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    broker_cpu_s: float = 0.0
    machine_busy_s: float = 0.0
    other_before: float = 0.0
    entries: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.summary) and "error" not in self.summary

    def figure(self, *path: str) -> float | None:
        node: Any = self.summary
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return None if node is None else float(node)

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        window = self.figure("window", "seconds") or 0.0
        opened = (
            s.get("transactions", 0)
            + s.get("errors", 0)
            + s.get("abandoned_transactions", 0)
            + s.get("setup_transactions", 0)
        )
        per_txn = {
            k: round(v / opened, 3)
            for k, v in self.entries.items()
            if isinstance(v, int) and opened
        }
        gen = s.get("cpu", {}).get("seconds", 0.0)
        return {
            "scenario": self.scenario.name,
            "title": self.scenario.title,
            "transactions": self.txn,
            "wall_s": round(self.wall_s, 3),
            "broker_cpu_s": round(self.broker_cpu_s, 3),
            "broker_cores": round(self.broker_cpu_s / self.wall_s, 3)
            if self.wall_s
            else None,
            "broker_cpu_us_per_txn": round(
                self.broker_cpu_s * 1e6 / s["transactions"], 1
            )
            if s.get("transactions")
            else None,
            "generator_cpu_s": gen,
            "other_cpu_s": round(
                max(0.0, self.machine_busy_s - self.broker_cpu_s - gen), 3
            ),
            "other_cores_before": round(self.other_before, 3),
            "window_s": window,
            "transactions_opened": opened,
            "entries": self.entries,
            "entries_per_txn": per_txn,
            "summary": s,
        }


def run_txn_one(
    scenario: TxnScenario,
    txn: bool,
    seconds: float,
    warmup: float,
    workdir: Path,
    quiet_wait: float,
) -> TxnRun:
    tag = f"txn-{scenario.name}-{'txn' if txn else 'plain'}-{time.time_ns()}"
    target = start_broker(tag, workdir, dict(scenario.broker_env))
    assert target._broker is not None
    data_dir = target._broker.data_dir
    run = TxnRun(scenario, txn)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    try:
        extra: list[str] = []
        if scenario.prefill:
            topic = f"perf-txn-in-{time.time_ns()}"
            subprocess.run(
                [
                    sys.executable, "-m", "quasar.perf", "produce", "-u", target.url,
                    "-s", "1024", "-m", str(scenario.prefill), "-i", "60", topic,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                timeout=600,
                check=True,
            )
            extra = ["--input", topic, "-ss", "perf-txn", "--prefill", "0"]
        run.other_before = wait_for_quiet(target, quiet_wait)
        print(
            f"running {scenario.name} {'with' if txn else 'without'} transactions"
            f" (other load {run.other_before:.2f} cores)",
            file=sys.stderr,
            flush=True,
        )
        out = workdir / f"{tag}.json"
        cmd = [
            sys.executable, "-m", "quasar.perf", "transaction",
            "-u", target.url, "-s", "1024", "-t", str(seconds),
            "--warmup", str(warmup), "-i", "5", "--json", str(out),
            *scenario.args,
            *extra,
        ]
        if not txn:
            cmd.append("--txn-disable")
        cpu0, busy0, t0 = process_cpu_s(target.pid), machine_busy_s(), time.monotonic()
        with open(workdir / f"{tag}.log", "wb") as f:
            proc = subprocess.run(
                cmd,
                stdout=f,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=seconds + 300,
            )
        run.wall_s = time.monotonic() - t0
        run.broker_cpu_s = process_cpu_s(target.pid) - cpu0
        run.machine_busy_s = machine_busy_s() - busy0
        if out.exists():
            run.summary = json.loads(out.read_text())
        else:
            run.summary = {"error": f"exit {proc.returncode}; see {workdir / tag}.log"}
        live = txn_log_entries_live(target.admin_url)
        if live is not None:
            run.entries["transaction_log"] = live
            run.entries["source"] = "admin internalStats"
        for topic in run.summary.get("output_topics", []):
            stats = admin_get(
                target.admin_url,
                f"/admin/v2/persistent/public/default/{topic}/internalStats",
            )
            if isinstance(stats, dict) and "numberOfEntries" in stats:
                run.entries["output_topic"] = run.entries.get(
                    "output_topic", 0
                ) + int(stats["numberOfEntries"])
    finally:
        target.stop()
    offline = ledger_entries_offline(data_dir)
    if offline and "transaction_log" not in run.entries:
        run.entries["transaction_log"] = sum(
            v for k, v in offline.items() if k.startswith(TXN_LOG_PREFIX)
        )
        run.entries["source"] = "ledger metadata after stop"
    if offline:
        run.entries["pending_ack_log"] = sum(
            v for k, v in offline.items() if k.endswith(PENDING_ACK_SUFFIX)
        )
    return run


def txn_table(runs: list[TxnRun]) -> str:
    header = (
        f"{'scenario':<19} {'txn':<4} {'txn/s':>8} {'prod msg/s':>10} {'cons msg/s':>10}"
        f" {'commit p50':>10} {'commit p99':>10} {'txn p50':>8} {'txn p99':>8}"
        f" {'err':>5} {'gen cpu':>7} {'brk cpu':>7} {'brk us/txn':>10}"
        f" {'log/txn':>7} {'ack/txn':>7} {'out/txn':>7} {'other':>6}"
    )
    lines = [header, "-" * len(header)]
    for r in runs:
        j = r.to_json()
        e = j["entries_per_txn"]
        wall = r.wall_s or 1.0
        lines.append(
            f"{r.scenario.name:<19} {'yes' if r.txn else 'no':<4}"
            f" {_fmt(r.figure('throughput', 'txn_s')):>8}"
            f" {_fmt(r.figure('throughput', 'produced_msg_s')):>10}"
            f" {_fmt(r.figure('throughput', 'consumed_msg_s')):>10}"
            f" {_fmt(r.figure('latency_ms', 'commit', 'p50'), '.2f'):>10}"
            f" {_fmt(r.figure('latency_ms', 'commit', 'p99'), '.2f'):>10}"
            f" {_fmt(r.figure('latency_ms', 'transaction', 'p50'), '.2f'):>8}"
            f" {_fmt(r.figure('latency_ms', 'transaction', 'p99'), '.2f'):>8}"
            f" {_fmt(r.figure('errors')):>5}"
            f" {j['generator_cpu_s'] / wall:>7.2f}"
            f" {(j['broker_cores'] or 0.0):>7.2f}"
            f" {_fmt(j['broker_cpu_us_per_txn'], ',.0f'):>10}"
            f" {_fmt(e.get('transaction_log') if r.txn else None, '.2f'):>7}"
            f" {_fmt(e.get('pending_ack_log') if r.txn else None, '.2f'):>7}"
            f" {_fmt(e.get('output_topic'), '.2f'):>7}"
            f" {j['other_cpu_s'] / wall:>6.2f}"
        )
    return "\n".join(lines)


def txn_verdicts(runs: list[TxnRun]) -> list[dict[str, Any]]:
    out = []
    for r in runs:
        if not r.txn:
            continue
        base = next(
            (b for b in runs if b.scenario is r.scenario and not b.txn), None
        )
        item: dict[str, Any] = {"scenario": r.scenario.name, "floor": r.scenario.floor_text}
        if not r.ok:
            item["verdict"] = "FAILED"
        elif r.scenario.name == "produce-50":
            x = r.figure("throughput", "produced_msg_s")
            y = base.figure("throughput", "produced_msg_s") if base else None
            ratio = x / y if x is not None and y else None
            item["ratio_vs_txn_disable"] = None if ratio is None else round(ratio, 3)
            item["verdict"] = (
                "-" if ratio is None else ("PASS" if ratio >= 0.70 else "BELOW")
            )
        else:
            rate = r.figure("throughput", "txn_s") or 0.0
            p99 = r.figure("latency_ms", "commit", "p99")
            item["txn_s"], item["commit_p99_ms"] = rate, p99
            ok = rate >= 1000 and p99 is not None and p99 <= 50.0
            item["verdict"] = "PASS" if ok else "BELOW"
            if base is not None and base.figure("throughput", "txn_s"):
                item["ratio_vs_txn_disable"] = round(
                    rate / (base.figure("throughput", "txn_s") or 1.0), 3
                )
        out.append(item)
    return out


def run_transactions(args: argparse.Namespace) -> int:
    info = machine_info()
    scenarios = txn_scenarios(args.txn_concurrency, args.seconds)
    if args.keep_data:
        workdir = Path(args.keep_data)
        workdir.mkdir(parents=True, exist_ok=True)
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="quasar-bench-txn-")
        workdir = Path(tmp.name)
    runs: list[TxnRun] = []
    all_runs: list[TxnRun] = []
    try:
        for scenario in scenarios:
            for txn in (True, False) if scenario.baseline else (True,):
                tries = [
                    run_txn_one(
                        scenario, txn, args.seconds, args.warmup, workdir, args.quiet_wait
                    )
                    for _ in range(max(1, args.repeat))
                ]
                tries.sort(key=lambda r: r.figure("throughput", "txn_s") or -1.0)
                all_runs.extend(tries)
                runs.append(tries[(len(tries) - 1) // 2])
    finally:
        if tmp is not None:
            tmp.cleanup()
    print(
        f"\nquasar transaction benchmarks: {info['cpus']} CPUs ({info['cpu_model']}), "
        f"Python {info['python']}, commit {info['commit'][:10]}, "
        f"{args.seconds:g} s runs with {args.warmup:g} s warm-up, a fresh broker per run\n"
    )
    print(txn_table(runs))
    print(
        "\ncpu columns are cores; log/ack/out per txn = entries written to the transaction"
        " log, the pending-ack stores and the output topic per transaction opened"
    )
    verdicts = txn_verdicts(runs)
    print("\nfloors:")
    for v in verdicts:
        if "txn_s" in v:  # an absolute floor: show the figures it is judged on
            p99 = v.get("commit_p99_ms")
            extra = f" ({v['txn_s']:,.0f} txn/s, commit p99 " + (
                "-)" if p99 is None else f"{p99:.1f} ms)"
            )
        elif v.get("ratio_vs_txn_disable") is not None:
            extra = f" (ratio {v['ratio_vs_txn_disable']:.2f})"
        else:
            extra = ""
        print(f"  {v['scenario']:<19} {v['floor']:<40} {v['verdict']}{extra}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": info,
                "settings": {
                    "seconds": args.seconds,
                    "warmup": args.warmup,
                    "repeat": args.repeat,
                    "txn_concurrency": args.txn_concurrency,
                    "quiet_wait_s": args.quiet_wait,
                    "broker_config": "defaults (journalSyncData=true, journalMaxGroupWaitMSec=1)",
                    "broker_env": {s.name: dict(s.broker_env) for s in scenarios if s.broker_env},
                },
                "runs": [r.to_json() for r in runs],
                "all_runs": [r.to_json() for r in all_runs] if args.repeat > 1 else [],
                "floors": verdicts,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="per run, warm-up included"
    )
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument(
        "--clients",
        default="quasar,pulsar",
        help="comma-separated: quasar, pulsar, or PRODUCER/CONSUMER such as "
        "quasar/pulsar (default quasar,pulsar)",
    )
    parser.add_argument(
        "--baseline", choices=("sink", "nosync", "all", "none"), default="sink"
    )
    parser.add_argument("--scenarios", default=",".join(s.name for s in SCENARIOS))
    parser.add_argument(
        "--out",
        default=str(
            Path(tempfile.gettempdir())
            / f"quasar-bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
        ),
        help="where to write the figures as JSON (default: a new file in the temp dir)",
    )
    parser.add_argument("--keep-data", metavar="DIR", help="work in DIR and keep it")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per scenario, client and target; the table shows the median (default 1)",
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=20.0,
        help="before each run, wait up to this many seconds for other processes to "
        "leave the CPUs idle (default 20; 0 = start at once)",
    )
    parser.add_argument(
        "--transactions",
        action="store_true",
        help="run the transaction set (quasar perf transaction) instead of the "
        "scenarios above",
    )
    parser.add_argument(
        "--txn-concurrency",
        type=int,
        default=16,
        help="transactions in flight in the produce-50 transaction scenario (default 16)",
    )
    args = parser.parse_args(argv)
    if args.transactions:
        return run_transactions(args)

    clients = [c for c in args.clients.split(",") if c]
    wanted = set(args.scenarios.split(","))
    scenarios = [s for s in SCENARIOS if s.name in wanted]
    baselines = {
        "sink": ["sink"],
        "nosync": ["nosync"],
        "all": ["sink", "nosync"],
        "none": [],
    }[args.baseline]
    if args.keep_data:
        workdir = Path(args.keep_data)
        workdir.mkdir(parents=True, exist_ok=True)
        tmp = None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="quasar-bench-")
        workdir = Path(tmp.name)

    runs: list[Run] = []  # one per scenario, client and target (the median)
    all_runs: list[Run] = []
    plan: list[tuple[str, Any]] = [
        ("broker", lambda: start_broker("broker", workdir, {}))
    ]
    for b in baselines:
        if b == "sink":
            plan.append(("sink", lambda: start_sink(workdir)))
        else:
            plan.append(
                (
                    "nosync",
                    lambda: start_broker(
                        "nosync", workdir, {"QUASAR_journalSyncData": "false"}
                    ),
                )
            )
    info = machine_info()
    try:
        for name, start in plan:
            target = start()
            try:
                for scenario in scenarios:
                    for client in clients:
                        tries = []
                        for i in range(max(1, args.repeat)):
                            other = wait_for_quiet(target, args.quiet_wait)
                            print(
                                f"running {scenario.name} with {client} against {name}"
                                f" ({i + 1}/{args.repeat}; other load {other:.2f} cores)",
                                file=sys.stderr,
                                flush=True,
                            )
                            run = run_one(
                                scenario,
                                client,
                                target,
                                args.seconds,
                                args.warmup,
                                workdir,
                            )
                            run.other_before = other
                            tries.append(run)
                        all_runs.extend(tries)
                        runs.append(representative(tries))
            finally:
                target.stop()
    finally:
        if tmp is not None:
            tmp.cleanup()

    print(
        f"\nquasar benchmarks: {info['cpus']} CPUs ({info['cpu_model']}), "
        f"Python {info['python']}, commit {info['commit'][:10]}, "
        f"{args.seconds:g} s runs with {args.warmup:g} s warm-up\n"
    )
    print(table(runs))
    print(
        "\ncpu columns are cores (CPU seconds / wall seconds); brk us/m = broker CPU per published message"
    )
    relatives: list[dict[str, Any]] = []
    for b in baselines:
        text, rel = relative(runs, b)
        relatives += rel
        print(
            f"\nbroker relative to the {b} baseline (1.00 = as fast as the baseline)\n{text}"
        )
    print("\nfloors (broker, each client):")
    for s in scenarios:
        for client in clients:
            r = next(
                (
                    x
                    for x in runs
                    if x.target == "broker" and x.scenario is s and x.client == client
                ),
                None,
            )
            if r is not None:
                verdict = {True: "PASS", False: "BELOW", None: "FAILED"}[r.ok]
                print(f"  {s.name:<14} {client:<13} {s.floor_text:<42} {verdict}")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": info,
                "settings": {
                    "seconds": args.seconds,
                    "repeat": args.repeat,
                    "quiet_wait_s": args.quiet_wait,
                    "warmup": args.warmup,
                    "clients": clients,
                    "baselines": baselines,
                    "broker_config": "defaults (journalSyncData=true, journalMaxGroupWaitMSec=1)",
                },
                "runs": [r.to_json() for r in runs],
                "all_runs": [r.to_json() for r in all_runs] if args.repeat > 1 else [],
                "relative": relatives,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
