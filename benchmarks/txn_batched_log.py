#!/usr/bin/env python3
"""PIP-160 batched transaction logs: the same transactional workload with batching off,
then on, in one script, and the ratio.

    python benchmarks/txn_batched_log.py [--seconds 20] [--warmup 5] [--concurrency 64]
                                         [--coordinators 16,1] [--repeat 1]
                                         [--max-delay-ms 1] [--out FILE.json]

Each mode gets a fresh broker (default configuration, fsync on) started with
``transactionLogBatchedWriteEnabled`` and ``transactionPendingAckBatchedWriteEnabled``
set to the mode (thresholds at Pulsar's defaults: 512 records, 4 MiB, 1 ms, unless
``--max-delay-ms``). The input topic is prefilled, then ``quasar perf transaction
-nmc 1 -nmp 1 -c 64`` runs: every transaction consumes one message and acks it in the
transaction, produces one, and commits; 64 are in flight.

The log figures come from the broker's ``/metrics``, scraped before and after the
run: ``quasar_{txn_tc|pending_ack}_log_{records|entries}_written_total`` count every
record appended to a coordinator log or a pending-ack log and every entry that held
them, with batching off or on. The script prints, per mode: entries per log record
(coordinator log and pending-ack logs), txn/s, commit latency p50/p99, and the
on/off ratios. With ``--repeat N`` the modes alternate N times (off, on, off, on, ...)
and the median of each is reported, which tames a shared machine's noise.

``--coordinators`` runs the pair once per coordinator count
(``transactionCoordinatorCount``; 1 is the standalone default, 16 a cluster's). A coordinator batches only the
records of transactions in flight on it at the same time, and a transaction has one
record in flight at a time, so with C coordinators and 64 transactions in flight a
coordinator-log entry holds at most about 64 / C records: 4 with 16, 64 with one. The
pending-ack log of the one input subscription sees all 64.

Numbers are for this machine and this commit; nothing here asserts speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from quasar.testing.process import BrokerProcess  # noqa: E402

COUNTERS = {
    "tc_records": "quasar_txn_tc_log_records_written_total",
    "tc_entries": "quasar_txn_tc_log_entries_written_total",
    "pa_records": "quasar_pending_ack_log_records_written_total",
    "pa_entries": "quasar_pending_ack_log_entries_written_total",
}


def scrape(admin_url: str) -> dict[str, float]:
    """The four counters, summed over their label sets."""
    with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = dict.fromkeys(COUNTERS, 0.0)
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        for key, metric in COUNTERS.items():
            if name == metric:
                out[key] += float(line.rsplit(" ", 1)[1])
    return out


def run_mode(
    batched: bool, coordinators: int, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    flag = "true" if batched else "false"
    env = {
        "QUASAR_transactionCoordinatorCount": str(coordinators),
        "QUASAR_transactionLogBatchedWriteEnabled": flag,
        "QUASAR_transactionPendingAckBatchedWriteEnabled": flag,
        "QUASAR_transactionLogBatchedWriteMaxDelayInMillis": str(args.max_delay_ms),
        "QUASAR_transactionPendingAckBatchedWriteMaxDelayInMillis": str(args.max_delay_ms),
    }
    print(f"running batching {'on' if batched else 'off'}, {coordinators} coordinators",
          file=sys.stderr, flush=True)
    run = run_transactions(env, args, workdir,
                           tag=f"{'on' if batched else 'off'}-{coordinators}")
    return {"batched": batched, "coordinators": coordinators, **run}


def run_transactions(
    env: dict[str, str], args: argparse.Namespace, workdir: Path, tag: str
) -> dict[str, Any]:
    """A fresh broker with ``env`` (``QUASAR_<key>`` settings), a prefilled input
    topic, then ``quasar perf transaction -nmc 1 -nmp 1 -c args.concurrency``.

    Returns the perf summary and the log counters' growth during the run.
    """
    tag = f"{tag}-{time.time_ns()}"
    broker = BrokerProcess(workdir / tag / "data", extra_env=env,
                           log_path=workdir / f"{tag}.broker.log")
    broker.start()
    penv = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    try:
        topic = f"perf-txn-in-{time.time_ns()}"
        prefill = int(max(20_000, 2_500 * (args.seconds + args.warmup)))
        subprocess.run(
            [sys.executable, "-m", "quasar.perf", "produce", "-u", broker.url, "-s", "1024",
             "-m", str(prefill), "-i", "60", topic],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=penv, timeout=600,
            check=True,
        )
        before = scrape(broker.admin_url)
        out = workdir / f"{tag}.json"
        with open(workdir / f"{tag}.perf.log", "wb") as log:
            subprocess.run(
                [sys.executable, "-m", "quasar.perf", "transaction", "-u", broker.url,
                 "-s", "1024", "-t", str(args.seconds), "--warmup", str(args.warmup),
                 "-i", "5", "--json", str(out), "-nmc", "1", "-nmp", "1",
                 "-c", str(args.concurrency), "--input", topic, "-ss", "perf-txn",
                 "--prefill", "0"],
                stdout=log, stderr=subprocess.STDOUT, env=penv,
                timeout=args.seconds + args.warmup + 300,
            )
        after = scrape(broker.admin_url)
    finally:
        broker.stop()
    summary = json.loads(out.read_text()) if out.exists() else {"error": "no summary"}
    delta = {k: after[k] - before[k] for k in COUNTERS}
    return {"summary": summary, "counters": delta}


def _get(summary: dict[str, Any], *path: str) -> float | None:
    node: Any = summary
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return None if node is None else float(node)


def figures(run: dict[str, Any]) -> dict[str, float | None]:
    c, s = run["counters"], run["summary"]

    def ratio(a: str, b: str) -> float | None:
        return c[a] / c[b] if c[b] else None

    return {
        "tc_entries_per_record": ratio("tc_entries", "tc_records"),
        "pa_entries_per_record": ratio("pa_entries", "pa_records"),
        "all_entries_per_record": (c["tc_entries"] + c["pa_entries"])
        / (c["tc_records"] + c["pa_records"]) if c["tc_records"] + c["pa_records"] else None,
        "txn_s": _get(s, "throughput", "txn_s"),
        "commit_p50_ms": _get(s, "latency_ms", "commit", "p50"),
        "commit_p99_ms": _get(s, "latency_ms", "commit", "p99"),
        "errors": _get(s, "errors"),
    }


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def report(runs: list[dict[str, Any]], coordinators: int) -> tuple[list[str], dict[str, Any]]:
    table: dict[bool, dict[str, float | None]] = {}
    for batched in (False, True):
        per = [figures(r) for r in runs
               if r["batched"] is batched and r["coordinators"] == coordinators]
        table[batched] = {k: median([p[k] for p in per]) for k in per[0]}
    lines = []
    for batched in (False, True):
        f = table[batched]
        lines.append(
            f"{coordinators:>5} {'on' if batched else 'off':<9} "
            f"{_fmt(f['tc_entries_per_record'], '.3f'):>14} "
            f"{_fmt(f['pa_entries_per_record'], '.3f'):>15} "
            f"{_fmt(f['all_entries_per_record'], '.3f'):>14} {_fmt(f['txn_s'], ',.0f'):>8} "
            f"{_fmt(f['commit_p50_ms'], '.2f'):>13} {_fmt(f['commit_p99_ms'], '.2f'):>13} "
            f"{_fmt(f['errors'], '.0f'):>6}"
        )
    off, on = table[False], table[True]

    def gain(key: str, invert: bool = False) -> float | None:
        a, b = off[key], on[key]
        if a is None or b is None or not (b if not invert else a):
            return None
        return a / b if invert else b / a

    ratios = {
        "log_entries_reduction": gain("all_entries_per_record", invert=True),
        "tc_entries_reduction": gain("tc_entries_per_record", invert=True),
        "pa_entries_reduction": gain("pa_entries_per_record", invert=True),
        "txn_s_ratio": gain("txn_s"),
    }
    lines.append(
        f"{'':>5} on vs off: log entries per record "
        f"{_fmt(ratios['log_entries_reduction'], '.1f')}x fewer (coordinator "
        f"{_fmt(ratios['tc_entries_reduction'], '.1f')}x, pending-ack "
        f"{_fmt(ratios['pa_entries_reduction'], '.1f')}x); txn/s "
        f"{_fmt(ratios['txn_s_ratio'], '.2f')}x"
    )
    return lines, {"table": {str(k): v for k, v in table.items()}, "ratios": ratios}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--coordinators", default="1",
                        help="comma-separated coordinator counts (default 1, the "
                        "standalone default; 16 is a cluster's)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-delay-ms", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    counts = [int(c) for c in args.coordinators.split(",") if c.strip()]
    workdir = Path(tempfile.mkdtemp(prefix="quasar-pip160-"))
    runs: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        for count in counts:
            for batched in (False, True):
                runs.append(run_mode(batched, count, args, workdir))
    header = (f"{'coord':>5} {'batching':<9} {'tc entries/rec':>14} {'ack entries/rec':>15} "
              f"{'all entr/rec':>14} {'txn/s':>8} {'commit p50 ms':>13} "
              f"{'commit p99 ms':>13} {'errors':>6}")
    lines = [header, "-" * len(header)]
    results = {}
    for count in counts:
        rows, result = report(runs, count)
        lines.extend(rows)
        results[count] = result
    print("\n".join(lines))
    out = args.out or workdir / "txn_batched_log.json"
    out.write_text(json.dumps({"runs": runs, "results": results,
                               "args": vars(args) | {"out": str(out)}},
                              indent=2, default=str))
    print(f"\nfigures: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
