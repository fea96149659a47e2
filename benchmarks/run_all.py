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

Scenarios (1 topic, 1 partition, 1 KB messages, 1 producer, 1 consumer):

* ``batched-max``: client batching (1 ms, 128 KiB, 1000 msgs), unbounded rate.
  Floor: >= 100,000 msg/s published and consumed.
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
from dataclasses import dataclass, field
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
    args = parser.parse_args(argv)

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
