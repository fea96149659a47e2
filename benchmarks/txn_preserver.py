#!/usr/bin/env python3
"""PIP-255 preserver cost: the same transactional workload with the terminated-
transaction preserver off (``transactionMetaPersistCount=0``) and on (64, the default),
in one script, and the ratio.

    python benchmarks/txn_preserver.py [--seconds 20] [--warmup 5] [--concurrency 64]
                                       [--repeat 3] [--out FILE.json]

Each mode gets a fresh broker (default configuration otherwise, fsync on), a prefilled
input topic, and ``quasar perf transaction -nmc 1 -nmp 1 -c 64`` (the workload of
``txn_batched_log.py``; every transaction has the perf tool's one client name, so the
preserver rewrites that name's entry on every flush: its worst case). With ``--repeat
N`` the modes alternate N times and medians are reported. The target: on >= 0.90
of off. Numbers are for this machine and this commit; nothing here asserts speed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from txn_batched_log import _fmt, _get, median, run_transactions  # noqa: E402

MODES = {"off": "0", "on": "64"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="quasar-preserver-"))
    runs: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        for mode, count in MODES.items():
            print(f"running preserver {mode}", file=sys.stderr, flush=True)
            env = {"QUASAR_transactionMetaPersistCount": count}
            runs.append({"mode": mode, **run_transactions(env, args, workdir, mode)})
    table: dict[str, dict[str, float | None]] = {}
    for mode in MODES:
        summaries = [r["summary"] for r in runs if r["mode"] == mode]
        table[mode] = {
            "txn_s": median([_get(s, "throughput", "txn_s") for s in summaries]),
            "commit_p50_ms": median([_get(s, "latency_ms", "commit", "p50")
                                     for s in summaries]),
            "commit_p99_ms": median([_get(s, "latency_ms", "commit", "p99")
                                     for s in summaries]),
            "errors": median([_get(s, "errors") for s in summaries]),
        }
    print(f"{'preserver':<10} {'txn/s':>8} {'commit p50 ms':>13} {'commit p99 ms':>13} "
          f"{'errors':>6}")
    for mode, f in table.items():
        print(f"{mode:<10} {_fmt(f['txn_s'], ',.0f'):>8} {_fmt(f['commit_p50_ms'], '.2f'):>13} "
              f"{_fmt(f['commit_p99_ms'], '.2f'):>13} {_fmt(f['errors'], '.0f'):>6}")
    off, on = table["off"]["txn_s"], table["on"]["txn_s"]
    ratio = on / off if on is not None and off else None
    print(f"on vs off: txn/s {_fmt(ratio, '.2f')}x (bar: >= 0.90)")
    singles = {m: [_get(r["summary"], "throughput", "txn_s") for r in runs if r["mode"] == m]
               for m in MODES}
    print(f"single runs txn/s: {singles}")
    out = args.out or workdir / "txn_preserver.json"
    out.write_text(json.dumps({"runs": runs, "table": table, "ratio": ratio,
                               "args": vars(args) | {"out": str(out)}},
                              indent=2, default=str))
    print(f"\nfigures: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
