#!/usr/bin/env python3
"""Transactions measured as the industry measures them, in one script.

    python benchmarks/txn_industry.py [--seconds 20] [--warmup 5] [--interval-ms 100]
                                      [--lanes 1] [--rate MSG_PER_S]
                                      [--in-flight 1,8,64,256]
                                      [--batched off,on] [--parts a,b] [--repeat 1]
                                      [--profile-seconds 10] [--out FILE.json]

(a) Produce-only throughput with transactions committed every ``--interval-ms``
    (Kafka's transactional producer benchmark: ``quasar perf transaction
    --txn-interval-ms 100``) against the same lanes without transactions
    (``--txn-disable``): same producer settings (batching on, 1 ms, 1,000 messages,
    128 KiB, 1,000 pending, as the baseline uses), 1 KiB messages, ``--lanes``
    producers. Prints both msg/s and their ratio (target >= 0.90), and the CPU per
    message of the load generator and the broker in each mode. With ``--rate`` the
    pair runs again at that fixed rate, where both modes do the same work and only
    the CPU per message differs.
(b) 1 message consumed + 1 produced per transaction (``-nmc 1 -nmp 1``) at each
    ``--in-flight`` count, with the batched transaction logs (PIP-160:
    ``transactionLogBatchedWriteEnabled`` and
    ``transactionPendingAckBatchedWriteEnabled``) off and on: txn/s and commit
    p50/p99 (target at 64 in flight: >= 1,500 txn/s, p99 <= 30 ms).

Every run gets a fresh broker (default configuration, fsync on) and fresh topics.
Part (b)'s input topic is prefilled before the clock starts. With ``--repeat N``
each configuration runs N times, interleaved, and the medians are reported.

Also measured per run: the broker's CPU (user + system, all threads, from
``/proc/<pid>/stat``) per transaction or per message, and the load average at the
start and end of the script and of every run (the machine may be shared: compare
figures only within one run of this script).

``--profile-seconds S`` (needs ``py-spy``) samples the broker for S seconds after the
warm-up in (a)'s transactional run and in (b)'s runs at 64 in flight, and prints the
functions with the most self time (samples whose innermost frame they are).

Numbers are for this machine and this commit; nothing here asserts speed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from quasar.testing.process import BrokerProcess  # noqa: E402

BATCHED_KEYS = (
    "transactionLogBatchedWriteEnabled",
    "transactionPendingAckBatchedWriteEnabled",
)
TOP_FUNCTIONS = 15


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, all its threads (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def py_spy() -> str | None:
    return shutil.which("py-spy") or shutil.which(
        "py-spy", path=str(Path(sys.executable).parent)
    )


def start_profile(pid: int, seconds: float, delay: float, raw: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid`` for ``seconds`` after ``delay`` (collapsed stacks).

    ``--gil``: only the thread holding the GIL is sampled, so the samples are the
    broker's Python CPU (the event loop's work and the writer thread's Python parts),
    not the writer thread waiting in write() or fdatasync().
    """
    tool = py_spy()
    assert tool is not None
    script = (
        f"sleep {delay:.1f} && exec {tool} record --nonblocking --gil --rate 250 --format raw "
        f"--duration {int(seconds)} --pid {pid} -o {raw}"
    )
    return subprocess.Popen(
        ["sh", "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def read_stacks(raw: Path) -> list[tuple[list[str], int]]:
    stacks = []
    if raw.exists():
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                stacks.append((stack.split(";"), int(count)))
    return stacks


def top_functions(raw: Path, n: int = TOP_FUNCTIONS) -> dict[str, Any]:
    """The functions innermost in the most samples (self), and the quasar functions
    on the stack in the most samples (inclusive)."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for frames, count in read_stacks(raw):
        total += count
        # By function, not by line: "f (path.py:12)" -> "f (path.py)".
        names = [re.sub(r":\d+\)$", ")", frame) for frame in frames]
        own[names[-1]] += count
        for name in set(names):
            if "quasar/" in name:
                inclusive[name] += count

    def rows(counter: collections.Counter[str]) -> list[dict[str, Any]]:
        return [
            {"function": name, "samples": c, "share": round(c / total, 4)}
            for name, c in counter.most_common(n)
        ]

    return {"samples": total, "self": rows(own), "inclusive": rows(inclusive)}


def perf(args: list[str], timeout: float, log: Path) -> dict[str, Any]:
    """Run ``quasar perf transaction ARGS --json FILE``; the summary."""
    out = log.with_suffix(".json")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with open(log, "wb") as f:
        subprocess.run(
            [sys.executable, "-m", "quasar.perf", "transaction", *args, "--json", str(out)],
            stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout,
        )
    if not out.exists():
        return {"error": f"no summary; see {log}"}
    return json.loads(out.read_text())


def one_run(
    name: str,
    perf_args: list[str],
    env: dict[str, str],
    args: argparse.Namespace,
    workdir: Path,
    profile: bool,
) -> dict[str, Any]:
    tag = f"{name}-{time.time_ns()}"
    print(f"running {name}", file=sys.stderr, flush=True)
    broker = BrokerProcess(
        workdir / tag / "data", extra_env=env, log_path=workdir / f"{tag}.broker.log"
    )
    broker.start()
    pid = broker.proc.pid
    load_start = loadavg()
    profiler = None
    raw = workdir / f"{tag}.profile.txt"
    try:
        if profile and args.profile_seconds > 0:
            profiler = start_profile(pid, args.profile_seconds, args.warmup + 1.0, raw)
        cpu0 = cpu_seconds(pid)
        summary = perf(
            ["-u", broker.url, "-s", "1024", "-t", str(args.seconds + args.warmup),
             "--warmup", str(args.warmup), "-i", "5", *perf_args],
            timeout=args.seconds + args.warmup + 600,
            log=workdir / f"{tag}.perf.log",
        )
        broker_cpu = cpu_seconds(pid) - cpu0
        if profiler is not None:
            profiler.wait(timeout=args.seconds + args.warmup + 120)
    finally:
        broker.stop()
        # A full-speed run stores gigabytes; its logs, perf output and profile stay.
        shutil.rmtree(workdir / tag, ignore_errors=True)
    return {
        "name": name,
        "args": perf_args,
        "env": env,
        "load_start": load_start,
        "load_end": loadavg(),
        "broker_cpu_s": round(broker_cpu, 3),
        "summary": summary,
        "profile": top_functions(raw) if profiler is not None else None,
    }


def _get(node: Any, *path: str) -> float | None:
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return None if node is None else float(node)


def figures(run: dict[str, Any]) -> dict[str, float | None]:
    s = run["summary"]
    txns = _get(s, "transactions")
    msgs = _get(s, "messages_produced")
    cpu = run["broker_cpu_s"]
    return {
        "msg_s": _get(s, "throughput", "produced_msg_s"),
        "txn_s": _get(s, "throughput", "txn_s"),
        "per_txn": _get(s, "throughput", "produced_per_txn"),
        "commit_p50_ms": _get(s, "latency_ms", "commit", "p50"),
        "commit_p99_ms": _get(s, "latency_ms", "commit", "p99"),
        "errors": _get(s, "errors"),
        "broker_us_per_txn": round(cpu * 1e6 / txns, 1) if txns else None,
        "broker_us_per_msg": round(cpu * 1e6 / msgs, 2) if msgs else None,
        "client_cores": _get(s, "cpu", "cores"),
        "client_us_per_msg": _get(s, "cpu", "us_per_msg"),
    }


def median_of(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    per = [figures(r) for r in runs]
    out: dict[str, float | None] = {}
    for key in per[0]:
        values = [p[key] for p in per if p[key] is not None]
        out[key] = statistics.median(values) if values else None
    return out


def _f(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def batched_env(on: bool, max_delay_ms: int) -> dict[str, str]:
    env = {f"QUASAR_{key}": "true" if on else "false" for key in BATCHED_KEYS}
    env["QUASAR_transactionLogBatchedWriteMaxDelayInMillis"] = str(max_delay_ms)
    env["QUASAR_transactionPendingAckBatchedWriteMaxDelayInMillis"] = str(max_delay_ms)
    return env


def part_a(
    args: argparse.Namespace, workdir: Path, rate: float = 0.0
) -> tuple[list[str], dict[str, Any]]:
    common = ["--txn-interval-ms", str(args.interval_ms), "-c", str(args.lanes)]
    if rate > 0:
        common += ["-r", str(rate)]
    label = f"a{'-' + str(int(rate)) if rate else ''}"
    runs: dict[str, list[dict[str, Any]]] = {"no-txn": [], "txn": []}
    for i in range(args.repeat):
        order = ["no-txn", "txn"] if i % 2 == 0 else ["txn", "no-txn"]
        for mode in order:
            extra = ["--txn-disable"] if mode == "no-txn" else []
            runs[mode].append(
                one_run(f"{label}-{mode}", common + extra, {}, args, workdir,
                        profile=mode == "txn" and i == 0 and not rate)
            )
    base, txn = median_of(runs["no-txn"]), median_of(runs["txn"])
    ratio = txn["msg_s"] / base["msg_s"] if txn["msg_s"] and base["msg_s"] else None
    pace = f"at {rate:,.0f} msg/s" if rate else "at full speed"
    lines = [
        f"(a) produce-only, {args.lanes} lane(s), 1 KiB, batched producer, {pace}; "
        f"transactions committed every {args.interval_ms} ms against none",
        f"{'mode':<8} {'msg/s':>10} {'txn/s':>7} {'msgs/txn':>9} {'commit p50':>10} "
        f"{'commit p99':>10} {'broker us/msg':>13} {'errors':>6}",
    ]
    for mode, f in (("no-txn", base), ("txn", txn)):
        lines.append(
            f"{mode:<8} {_f(f['msg_s'], ',.0f'):>10} "
            f"{_f(f['txn_s'] if mode == 'txn' else None, ',.1f'):>7} "
            f"{_f(f['per_txn'] if mode == 'txn' else None, ',.0f'):>9} "
            f"{_f(f['commit_p50_ms'], '.1f'):>10} {_f(f['commit_p99_ms'], '.1f'):>10} "
            f"{_f(f['broker_us_per_msg'], '.2f'):>13} {_f(f['errors'], '.0f'):>6}"
        )
    lines.append(f"ratio txn / no-txn msg/s: {_f(ratio, '.3f')}  (target >= 0.90)")
    cpu: dict[str, float | None] = {}
    for mode, f in (("no-txn", base), ("txn", txn)):
        client = f["client_us_per_msg"]
        broker = f["broker_us_per_msg"]
        cpu[mode] = client + broker if client is not None and broker is not None else None
        lines.append(
            f"CPU per message, {mode}: client {_f(client, '.2f')} us + broker "
            f"{_f(broker, '.2f')} us = {_f(cpu[mode], '.2f')} us"
        )
    cpu_ratio = cpu["txn"] / cpu["no-txn"] if cpu["txn"] and cpu["no-txn"] else None
    lines.append(
        f"CPU per message, no-txn / txn: {_f(1 / cpu_ratio if cpu_ratio else None, '.3f')}"
        " (the rate ratio on a machine whose cores the two processes fill)"
    )
    return lines, {"runs": runs, "median": {"no-txn": base, "txn": txn}, "ratio": ratio,
                   "cpu_us_per_msg": cpu}


def part_b(args: argparse.Namespace, workdir: Path) -> tuple[list[str], dict[str, Any]]:
    runs: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    prefill = int(max(20_000, 3_500 * (args.seconds + args.warmup)))
    for i in range(args.repeat):
        for batched in args.batched:
            for c in args.in_flight:
                key = f"{batched}-{c}"
                runs[key].append(
                    one_run(
                        f"b-batched-{key}",
                        ["-nmc", "1", "-nmp", "1", "-c", str(c), "--prefill", str(prefill)],
                        batched_env(batched == "on", args.max_delay_ms),
                        args, workdir, profile=c == 64 and i == 0,
                    )
                )
    lines = [
        "(b) 1 consumed + 1 produced per transaction, 1 KiB; batched logs (PIP-160) off/on",
        f"{'batched':<8} {'in flight':>9} {'txn/s':>8} {'commit p50':>10} {'commit p99':>10} "
        f"{'broker us/txn':>13} {'errors':>6}",
    ]
    medians: dict[str, Any] = {}
    for batched in args.batched:
        for c in args.in_flight:
            key = f"{batched}-{c}"
            f = medians[key] = median_of(runs[key])
            lines.append(
                f"{batched:<8} {c:>9} {_f(f['txn_s'], ',.0f'):>8} "
                f"{_f(f['commit_p50_ms'], '.1f'):>10} {_f(f['commit_p99_ms'], '.1f'):>10} "
                f"{_f(f['broker_us_per_txn'], ',.0f'):>13} {_f(f['errors'], '.0f'):>6}"
            )
    lines.append("target at 64 in flight: >= 1,500 txn/s, commit p99 <= 30 ms")
    return lines, {"runs": dict(runs), "median": medians}


def profile_lines(result: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for part in ("a", "a_rate", "b"):
        for group in result.get(part, {}).get("runs", {}).values():
            for run in group:
                prof = run.get("profile")
                if not prof or not prof["samples"]:
                    continue
                for kind in ("self", "inclusive"):
                    lines.append(
                        f"broker {kind} time, {run['name']} "
                        f"(share of {prof['samples']:,} samples holding the GIL):"
                    )
                    lines += [
                        f"  {t['share'] * 100:5.1f}%  {t['function']}" for t in prof[kind]
                    ]
    return lines


def csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--seconds", type=float, default=20, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--lanes", type=int, default=1, help="(a)'s producers")
    parser.add_argument("--rate", type=float, default=0,
                        help="also run (a) at this fixed msg/s (both modes), to compare "
                        "CPU per message at equal work")
    parser.add_argument("--in-flight", type=lambda t: [int(x) for x in csv(t)],
                        default=[1, 8, 64, 256])
    parser.add_argument("--batched", type=csv, default=["off", "on"])
    parser.add_argument("--max-delay-ms", type=int, default=1,
                        help="the batched logs' MaxDelayInMillis (Pulsar's default 1)")
    parser.add_argument("--parts", type=csv, default=["a", "b"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile-seconds", type=float, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.profile_seconds > 0 and py_spy() is None:
        parser.error("--profile-seconds needs py-spy (pip install py-spy)")
    if not set(args.batched) <= {"off", "on"} or not set(args.parts) <= {"a", "b"}:
        parser.error("--batched takes off,on and --parts a,b")
    workdir = Path(tempfile.mkdtemp(prefix="quasar-txn-industry-"))
    load_start = loadavg()
    print(f"load average at start: {load_start}  ({os.cpu_count()} cores)", flush=True)
    result: dict[str, Any] = {"args": {**vars(args), "out": str(args.out)},
                              "load_start": load_start}
    lines: list[str] = []
    if "a" in args.parts:
        table, result["a"] = part_a(args, workdir)
        lines += [*table, ""]
        if args.rate > 0:
            table, result["a_rate"] = part_a(args, workdir, args.rate)
            lines += [*table, ""]
    if "b" in args.parts:
        table, result["b"] = part_b(args, workdir)
        lines += [*table, ""]
    lines += profile_lines(result)
    result["load_end"] = loadavg()
    lines.append(f"load average at start {load_start}, at end {result['load_end']}")
    print("\n".join(lines))
    out = args.out or workdir / "txn_industry.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    print(f"\nfigures: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
