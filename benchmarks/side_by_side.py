#!/usr/bin/env python3
"""Two builds of the broker compared by CPU per unit of work, running at the same time.

    python benchmarks/side_by_side.py (--base REV | --a-src DIR) [--b-src DIR]
                                      [--shape publish|publish-batched|produce-50|1c1p]
                                      [--concurrency 64] [--seconds 12] [--pairs 4]
                                      [--own-clients] [--out FILE.json]

Build A is ``--a-src`` (a directory holding the ``quasar`` package) or this
repository's ``src`` at git revision ``--base``; build B is ``--b-src``, this
repository's ``src`` by default. Each pair starts one broker of each build, each with
its own data directory and ports, and one load generator per broker, all at once;
they stop together. Both generators run build B's client, or each its own build's with
``--own-clients`` (to compare client changes). The script reads each broker's
event-loop thread CPU (user + system, ``/proc``) before and after and prints it per
unit of work, next to each run's rate, p99 latency and the generator's CPU per unit
(all its threads, from its summary). The brokers are started in the opposite order in
every other pair.

Shapes (1 KB messages):

* ``publish``: ``quasar perf produce`` without batching at a fixed 4,000 msg/s; the
  unit is one published message (one SEND, one entry, one receipt).
* ``publish-batched``: ``quasar perf produce`` with the default batching at a fixed
  40,000 msg/s; the unit is one message.
* ``produce-50``: ``quasar perf transaction -nmc 0 -nmp 50``; the unit is one
  transaction of 50 sends.
* ``1c1p``: ``quasar perf transaction -nmc 1 -nmp 1``; the unit is one transaction
  that consumes one message and produces one.

Fixed rates keep both brokers below saturation, so each does the same work and the
CPU per unit is what differs.

Why: the host of this project moves throughput by up to 30 % between runs minutes
apart, so one run after the other needs many pairs to show a 5 % change. Side by side,
both builds see the same host at the same time, and a 5 % difference in CPU per
transaction shows in every pair. The absolute figures are lower than a run alone (two
pairs share two cores); compare the two columns, not them with other runs.

``--base REV`` exports ``src`` at REV with ``git archive`` and copies this tree's built
C extensions (``*.so``) into it, so REV must have the same C sources. Linux only.
Nothing here asserts speed; ``docs/performance.md`` says how to read the figures.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from quasar.testing.process import BrokerProcess  # noqa: E402

TXN_SHAPES = {"produce-50": ["-nmc", "0", "-nmp", "50"], "1c1p": ["-nmc", "1", "-nmp", "1"]}
PUBLISH_SHAPES = {
    "publish": ["--no-batching", "-r", "4000"],
    "publish-batched": ["--batching", "-r", "40000"],
}
SHAPES = sorted([*TXN_SHAPES, *PUBLISH_SHAPES])
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def loop_cpu_s(pid: int) -> float:
    """User + system CPU of a process's main thread (the broker's event loop)."""
    raw = Path(f"/proc/{pid}/task/{pid}/stat").read_bytes()
    fields = raw[raw.rindex(b")") + 2 :].split()  # fields[11], [12]: utime, stime
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def export_revision(rev: str, dest: Path) -> Path:
    """``src`` of ``rev`` under ``dest``, with this tree's built C extensions."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "src"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    for built in (ROOT / "src").rglob("*.so"):
        target = dest / built.relative_to(ROOT)
        if target.parent.is_dir():
            shutil.copy2(built, target)
    # Older revisions have quasar as a namespace package, which Python would merge
    # with (or lose to) the installed tree's regular package: make it regular too.
    (dest / "src" / "quasar" / "__init__.py").touch()
    return dest / "src"


def perf_command(broker: BrokerProcess, args: argparse.Namespace, out: Path) -> list[str]:
    if args.shape in PUBLISH_SHAPES:
        return [
            sys.executable, "-m", "quasar.perf", "produce", "-u", broker.url,
            "-s", "1024", "-t", str(args.seconds), "--warmup", "2", "--json", str(out),
            *PUBLISH_SHAPES[args.shape], "side-by-side",
        ]
    return [
        sys.executable, "-m", "quasar.perf", "transaction", "-u", broker.url,
        "--admin-url", broker.admin_url, "-s", "1024", "-t", str(args.seconds),
        "-c", str(args.concurrency), "--json", str(out), *TXN_SHAPES[args.shape],
    ]


def figures(summary: dict[str, Any], loop_cpu_s: float) -> dict[str, Any]:
    """One run's figures per unit of work (a message or a transaction)."""
    if "transactions" in summary:
        units = summary["transactions"] or 1
        p99 = summary["latency_ms"].get("commit", {}).get("p99")
        return {
            "rate": summary["throughput"]["txn_s"], "p99_ms": p99,
            "broker_loop_us": loop_cpu_s / units * 1e6,
            "generator_us": summary["cpu"]["us_per_txn"], "units": units,
        }
    # The broker ran for the whole run, warm-up included: divide by every message.
    units = summary["messages"] or 1
    return {
        "rate": summary["throughput"]["msg_s"], "p99_ms": summary["latency_ms"].get("p99"),
        "broker_loop_us": loop_cpu_s / units * 1e6,
        "generator_us": summary["cpu"]["us_per_msg"], "units": units,
    }


def run_pair(
    args: argparse.Namespace, srcs: dict[str, Path], order: list[str], workdir: Path
) -> dict[str, dict[str, Any]]:
    """One pair: both brokers and both generators at once; figures per build."""
    brokers: dict[str, BrokerProcess] = {}
    try:
        for name in order:
            brokers[name] = BrokerProcess(
                workdir / f"data-{name}",
                extra_env={"PYTHONPATH": str(srcs[name])},
                log_path=workdir / f"broker-{name}.log",
            ).start()
        cpu0 = {}
        for name, broker in brokers.items():
            assert broker.proc is not None
            cpu0[name] = loop_cpu_s(broker.proc.pid)
        perfs = {}
        for name in order:
            client_src = srcs[name] if args.own_clients else srcs["B"]
            with open(workdir / f"perf-{name}.log", "wb") as log:
                perfs[name] = subprocess.Popen(
                    perf_command(brokers[name], args, workdir / f"perf-{name}.json"),
                    stdout=log, stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONPATH": str(client_src)},
                )
        for perf in perfs.values():
            perf.wait(timeout=args.seconds + 600)
        out: dict[str, dict[str, Any]] = {}
        for name, broker in brokers.items():
            assert broker.proc is not None
            cpu = loop_cpu_s(broker.proc.pid) - cpu0[name]
            summary = json.loads((workdir / f"perf-{name}.json").read_text())
            out[name] = figures(summary, cpu)
        return out
    finally:
        for broker in brokers.values():
            broker.stop()
        for name in order:
            shutil.rmtree(workdir / f"data-{name}", ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--base", help="git revision of build A")
    which.add_argument("--a-src", type=Path, help="source directory of build A")
    parser.add_argument("--b-src", type=Path, default=ROOT / "src",
                        help="source directory of build B (default: this tree)")
    parser.add_argument("--shape", choices=SHAPES, default="produce-50")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=12)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--own-clients", action="store_true",
                        help="each generator runs its own build's client (default: B's)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON")
    args = parser.parse_args(argv)

    with TemporaryDirectory(prefix="side-by-side-") as tmp:
        workdir = Path(tmp)
        a_src = args.a_src if args.base is None else export_revision(args.base, workdir / "a")
        srcs = {"A": a_src.resolve(), "B": args.b_src.resolve()}
        clients = "each its own build's" if args.own_clients else "B's"
        shape = args.shape if args.shape in PUBLISH_SHAPES else (
            f"{args.shape}, -c {args.concurrency}")
        print(f"A: {args.base or srcs['A']}\nB: {srcs['B']}\n"
              f"{shape}, {args.seconds:g} s, {args.pairs} pairs, "
              f"generators running {clients} client")
        unit = "txn" if args.shape in TXN_SHAPES else "msg"
        print(f"{'pair':>4}  {'A ' + unit + '/s':>8} {'B ' + unit + '/s':>8}  {'A p99':>6} "
              f"{'B p99':>6}  {'A loop µs':>9} {'B loop µs':>9}  {'B/A':>6}  "
              f"{'A gen µs':>8} {'B gen µs':>8}")
        pairs = []
        for i in range(args.pairs):
            order = ["A", "B"] if i % 2 == 0 else ["B", "A"]
            got = run_pair(args, srcs, order, workdir)
            a, b = got["A"], got["B"]
            ratio = b["broker_loop_us"] / a["broker_loop_us"]
            pairs.append({"order": order, "A": a, "B": b, "loop_ratio": ratio})
            print(f"{i + 1:>4}  {a['rate']:>8,.0f} {b['rate']:>8,.0f}  "
                  f"{a['p99_ms'] or 0:>6.1f} {b['p99_ms'] or 0:>6.1f}  "
                  f"{a['broker_loop_us']:>9,.1f} {b['broker_loop_us']:>9,.1f}"
                  f"  {ratio:>6.3f}  {a['generator_us']:>8,.1f}"
                  f" {b['generator_us']:>8,.1f}")
        median = statistics.median(p["loop_ratio"] for p in pairs)
        print(f"broker loop CPU per {unit}, B against A: median {median:.3f}")
        if args.out is not None:
            args.out.write_text(json.dumps(
                {"base": args.base, "a_src": str(srcs["A"]), "b_src": str(srcs["B"]),
                 "shape": args.shape, "concurrency": args.concurrency,
                 "own_clients": args.own_clients,
                 "seconds": args.seconds, "pairs": pairs, "median_loop_ratio": median},
                indent=2,
            ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
