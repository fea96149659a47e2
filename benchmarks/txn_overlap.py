#!/usr/bin/env python3
"""How the load generator and the broker share the two cores during a transaction run.

    python benchmarks/txn_overlap.py [--shape produce-50|1c1p] [--txn-disable]
                                     [--concurrency 64] [--seconds 20] [--warmup 5]
                                     [--coordinators N] [--out FILE.json]

A fresh broker (default configuration unless ``--coordinators``), then ``quasar perf
transaction`` (``produce-50``: ``-nmc 0 -nmp 50``; ``1c1p``: ``-nmc 1 -nmp 1`` on a
prefilled input topic). During the measured part of the run the script reads, about
every millisecond, the scheduler state of three threads from ``/proc``: the
generator's event loop, the broker's event loop and the broker's busiest other thread
(the group-commit writer). ``R`` is running or waiting for a core; anything else is
asleep (``S``) or in uninterruptible I/O (``D``). It prints how often each combination
occurred and each thread's CPU (user + system) over the same window.

Why: a transaction is a chain of dependent steps that alternate between the two
processes (request, durable write, answer, next request). If the processes mostly run
one at a time, the run is bound by the SUM of their CPU per transaction, not by the
larger of the two, and more transactions in flight do not help. Linux only. Nothing here asserts speed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from quasar.testing.process import BrokerProcess  # noqa: E402

SHAPES = {"produce-50": ["-nmc", "0", "-nmp", "50"], "1c1p": ["-nmc", "1", "-nmp", "1"]}
SAMPLE_INTERVAL_S = 0.001
REPORT_INTERVAL_S = 2  # quasar perf's progress interval (-i): its first line marks the clock
START_TIMEOUT_S = 300.0  # set-up (prefill) before the run's clock starts
PROGRESS_LABELS = (b"[txn]", b"[no-txn]")  # the progress line's tag in either mode
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int, tid: int) -> list[str]:
    """``/proc/<pid>/task/<tid>/stat`` after the command name (which may hold spaces)."""
    raw = Path(f"/proc/{pid}/task/{tid}/stat").read_bytes()
    return raw[raw.rindex(b")") + 2 :].decode().split()


def _cpu_s(pid: int, tid: int) -> float:
    fields = _stat_fields(pid, tid)  # fields[0] is the state; utime, stime are 11, 12
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _busiest_other_thread(pid: int) -> int:
    best, best_cpu = pid, -1.0
    for entry in Path(f"/proc/{pid}/task").iterdir():
        tid = int(entry.name)
        if tid == pid:
            continue
        try:
            cpu = _cpu_s(pid, tid)
        except (FileNotFoundError, ProcessLookupError):
            continue
        if cpu > best_cpu:
            best, best_cpu = tid, cpu
    return best


class StateSampler:
    """Samples the scheduler state of some threads until stopped."""

    def __init__(self, threads: dict[str, tuple[int, int]]) -> None:
        self.threads = threads
        self.counts: collections.Counter[str] = collections.Counter()
        self.cpu_s: dict[str, float] = {}
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        fds = {name: os.open(f"/proc/{pid}/task/{tid}/stat", os.O_RDONLY)
               for name, (pid, tid) in self.threads.items()}
        cpu0 = {name: _cpu_s(*ids) for name, ids in self.threads.items()}
        t0 = time.monotonic()
        try:
            while not self._stop.is_set():
                key = []
                for fd in fds.values():
                    raw = os.pread(fd, 512, 0)
                    key.append(chr(raw[raw.rindex(b")") + 2]))
                if "Z" in key or "X" in key:
                    break  # a process is exiting: the run is over
                self.counts["".join(key)] += 1
                time.sleep(SAMPLE_INTERVAL_S)
            self.seconds = time.monotonic() - t0
            self.cpu_s = {name: _cpu_s(*ids) - cpu0[name]
                          for name, ids in self.threads.items()}
        except (FileNotFoundError, ProcessLookupError):
            self.seconds = time.monotonic() - t0  # a process ended early
        finally:
            for fd in fds.values():
                os.close(fd)


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    env = {"PYTHONPATH": str(ROOT / "src")}
    if args.coordinators:
        env["QUASAR_transactionCoordinatorCount"] = str(args.coordinators)
    broker = BrokerProcess(workdir / "data", extra_env=env,
                           log_path=workdir / "broker.log").start()
    penv = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    assert broker.proc is not None
    broker_pid = broker.proc.pid
    try:
        cmd = [sys.executable, "-m", "quasar.perf", "transaction", "-u", broker.url,
               "--admin-url", broker.admin_url, "-s", "1024", "-t", str(args.seconds),
               "--warmup", str(args.warmup), "-c", str(args.concurrency),
               "-i", str(REPORT_INTERVAL_S), "--json", str(workdir / "perf.json"),
               *SHAPES[args.shape]]
        if args.txn_disable:
            cmd.append("--txn-disable")
        with open(workdir / "perf.log", "wb") as log:
            perf = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=penv)
            try:
                sampler = _sample_run(args, perf, broker_pid, workdir / "perf.log")
                perf.wait(timeout=args.seconds + 300)
            finally:
                if perf.poll() is None:
                    perf.kill()
                    perf.wait()
    finally:
        broker.stop()
    summary_path = workdir / "perf.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    return {"sampler": sampler, "summary": summary}


def _sample_run(
    args: argparse.Namespace, perf: subprocess.Popen[bytes], broker_pid: int, log: Path
) -> StateSampler:
    """Sample from the end of the warm-up until about a second before the run ends.

    The run's clock starts after set-up (prefill, coordinator discovery) and its first
    progress line comes one report interval later: that line marks the clock.
    """
    deadline = time.monotonic() + START_TIMEOUT_S
    while not any(label in log.read_bytes() for label in PROGRESS_LABELS):
        if perf.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"perf did not start its run; see {log}")
        time.sleep(0.05)
    time.sleep(max(0.0, args.warmup - REPORT_INTERVAL_S))
    threads = {
        "generator": (perf.pid, perf.pid),
        "broker loop": (broker_pid, broker_pid),
        "broker writer": (broker_pid, _busiest_other_thread(broker_pid)),
    }
    sampler = StateSampler(threads)
    sampler.start()
    time.sleep(max(1.0, args.seconds - max(args.warmup, REPORT_INTERVAL_S) - 1))
    sampler.stop()
    return sampler


def report(args: argparse.Namespace, sampler: StateSampler, summary: dict[str, Any]) -> dict[str, Any]:
    total = sum(sampler.counts.values()) or 1
    names = list(sampler.threads)
    running = {name: sum(v for k, v in sampler.counts.items() if k[i] == "R") / total
               for i, name in enumerate(names)}
    gen_alone = sum(v for k, v in sampler.counts.items() if k[0] == "R" and k[1] != "R")
    broker_alone = sum(v for k, v in sampler.counts.items() if k[0] != "R" and k[1] == "R")
    both = sum(v for k, v in sampler.counts.items() if k[0] == "R" and k[1] == "R")
    neither = total - gen_alone - broker_alone - both
    throughput = summary.get("throughput", {})
    out = {
        "shape": args.shape, "txn_disable": args.txn_disable,
        "concurrency": args.concurrency,
        "txn_per_s": throughput.get("txn_s"),
        "msg_out_per_s": throughput.get("produced_msg_s"),
        "samples": total,
        "state_counts": dict(sampler.counts.most_common()),
        "running_share": running,
        "loops": {"generator only": gen_alone / total, "broker only": broker_alone / total,
                  "both": both / total, "neither": neither / total},
        "cpu_cores": {name: (cpu / sampler.seconds if sampler.seconds else None)
                      for name, cpu in sampler.cpu_s.items()},
    }
    mode = "--txn-disable" if args.txn_disable else "transactions"
    print(f"{args.shape}, {mode}, -c {args.concurrency}: "
          f"{out['txn_per_s'] or 0:,.1f} loops/s, {out['msg_out_per_s'] or 0:,.1f} msg/s out")
    print(f"states ({' / '.join(names)}; R = running or runnable), {total} samples:")
    for key, n in sampler.counts.most_common():
        print(f"  {key}  {n * 100 / total:5.1f} %")
    print("event loops: " + ", ".join(f"{k} {v * 100:.1f} %" for k, v in out["loops"].items()))
    print("cpu (cores): " + ", ".join(
        f"{k} {v:.2f}" for k, v in out["cpu_cores"].items() if v is not None))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="produce-50")
    parser.add_argument("--txn-disable", action="store_true")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--coordinators", type=int, default=0,
                        help="transactionCoordinatorCount (0: the broker's default)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not Path("/proc/self/task").is_dir():
        print("needs Linux /proc", file=sys.stderr)
        return 2
    with TemporaryDirectory(prefix="quasar-overlap-") as tmp:
        result = run(args, Path(tmp))
        out = report(args, result["sampler"], result["summary"])
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
