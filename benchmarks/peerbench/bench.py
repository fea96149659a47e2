"""One system's runs: each workload timed, then a separate fsync-counting pass.

Server CPU is the user + system time of the server's process tree from before the
producer starts to after the consumer has everything (W4: around the fill and around
the drain), divided by the messages published in that time (W4 drain: consumed).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from peerbench.loadgen import Runner
from peerbench.procstat import SyncCounter, tree_cpu_s
from peerbench.quasar_perf import QuasarPerfRunner
from peerbench.server import ServerProcess
from peerbench.systems import System
from peerbench.workloads import Workload

# The counting pass is short: it only has to see enough messages and fsyncs to divide.
SYNC_PASS_S = 3.0


def _runner(system: System, server: ServerProcess, name: str, work_dir: Path, bench_dir: str) -> Any:
    spec = {**server.spec(), **system.spec, "name": name, "bench_dir": bench_dir}
    if system.server == "quasar":
        return QuasarPerfRunner(spec, work_dir)
    return Runner(spec)


def _per_message_us(cpu_s: float, messages: int) -> float | None:
    return round(cpu_s * 1e6 / messages, 1) if messages > 0 else None


def _timed(runner: Any, server: ServerProcess, wl: Workload) -> dict[str, Any]:
    runner.setup(wl)
    cpu0 = tree_cpu_s(server.pid)
    got = runner.pair(wl)
    cpu = tree_cpu_s(server.pid) - cpu0
    messages = int(got.get("produce", {}).get("messages", 0))
    return {**got, "server_cpu_s": round(cpu, 3), "server_cpu_us_per_msg": _per_message_us(cpu, messages)}


def _backlog(runner: Any, server: ServerProcess, wl: Workload) -> dict[str, Any]:
    runner.setup(wl)
    cpu0 = tree_cpu_s(server.pid)
    fill = runner.fill(wl)
    cpu1 = tree_cpu_s(server.pid)
    drain = runner.drain(wl)
    cpu2 = tree_cpu_s(server.pid)
    fill["server_cpu_us_per_msg"] = _per_message_us(cpu1 - cpu0, int(fill.get("messages", 0)))
    drain["server_cpu_us_per_msg"] = _per_message_us(cpu2 - cpu1, int(drain.get("messages", 0)))
    return {"backlog_messages": wl.backlog_messages, "fill": fill, "drain": drain}


def _sync_pass(runner: Any, server: ServerProcess, wl: Workload, out: Path) -> dict[str, Any]:
    why = SyncCounter.available()
    if why:
        return {"unavailable": why}
    short = replace(wl, duration_s=min(SYNC_PASS_S, wl.duration_s))
    runner.setup(short)
    counter = SyncCounter(server.pid, out)
    counter.start()
    try:
        got = runner.pair(short)
    finally:
        calls = counter.stop()
    messages = int(got.get("produce", {}).get("messages", 0))
    total = sum(calls.values())
    return {
        "seconds": short.duration_s,
        "messages": messages,
        "sync_calls": calls,
        "messages_per_sync": round(messages / total, 2) if total else None,
        "traced_msg_s": got.get("produce", {}).get("msg_s"),
    }


def run_system(system: System, server: ServerProcess, workloads: list[Workload], work_dir: Path,
               bench_dir: str, log: Any) -> dict[str, Any]:
    """Every workload for one system on a running server; errors are recorded per run."""
    runs: dict[str, Any] = {}
    syncs: dict[str, Any] = {}
    for wl in workloads:
        if wl.batching and not system.batching and wl.kind == "W2":
            runs[wl.name] = {"skipped": "the client has no batching"}
            continue
        name = f"peers-{system.name}-{wl.name.replace('@', '-')}-{uuid.uuid4().hex[:6]}".lower()
        runner = _runner(system, server, name, work_dir, bench_dir)
        if wl.kind == "W4" and not system.batching:
            wl = replace(wl, batching=False)
        log(f"{system.name} {wl.name} ...")
        started = time.monotonic()
        try:
            runs[wl.name] = _backlog(runner, server, wl) if wl.kind == "W4" else _timed(runner, server, wl)
        except Exception as exc:  # one failed run must not lose the others
            runs[wl.name] = {"error": repr(exc)}
        log(f"{system.name} {wl.name}: {summary_line(runs[wl.name])} ({time.monotonic() - started:.0f} s)")
    for wl in workloads:
        if wl.kind not in ("W1", "W2") or "skipped" in runs.get(wl.name, {}):
            continue
        name = f"peers-{system.name}-sync-{wl.name}-{uuid.uuid4().hex[:6]}".lower()
        runner = _runner(system, server, name, work_dir, bench_dir)
        try:
            syncs[wl.name] = _sync_pass(runner, server, wl, work_dir / f"strace-{system.name}-{wl.name}.txt")
        except Exception as exc:
            syncs[wl.name] = {"error": repr(exc)}
        log(f"{system.name} fsync pass {wl.name}: {syncs[wl.name]}")
    return {"runs": runs, "fsync": syncs}


def summary_line(run: dict[str, Any]) -> str:
    if "error" in run or "skipped" in run:
        return str(run.get("error") or run.get("skipped"))
    if "drain" in run:
        return (f"fill {run['fill'].get('msg_s')} msg/s, drain {run['drain'].get('msg_s')} msg/s, "
                f"drain {run['drain'].get('server_cpu_us_per_msg')} us/msg")
    p, c = run.get("produce", {}), run.get("consume", {})
    return (f"pub {p.get('msg_s')} msg/s p99 {p.get('publish_latency_ms', {}).get('p99')} ms, "
            f"sub {c.get('msg_s')} msg/s, {run.get('server_cpu_us_per_msg')} us/msg")
