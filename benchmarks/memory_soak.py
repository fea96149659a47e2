#!/usr/bin/env python3
"""The memory soak at scale (``make soak``): many times the entry cache published past a
consumer that never reads and one stopped at its unacked limit.

    python benchmarks/memory_soak.py [--cache-mb 8] [--multiple 100]
                                     [--message-bytes 16384] [--samples 100]
                                     [--client quasar|pulsar] [--keep DIR]

A fresh broker with the plan's settings (``quasar.testing.soak.SoakPlan``), one run,
then the broker's RSS samples (start, after the warm-up, median, max and end of the
samples after it) and the bytes published, each also as a multiple of the entry cache,
and the growth over the warm-up against the bound the settings allow. Exits non-zero
when a message was lost or reordered, or the growth passed the bound.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from quasar.testing.process import BrokerProcess  # noqa: E402
from quasar.testing.soak import SoakPlan, run_soak  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-mb", type=int, default=8)
    parser.add_argument("--multiple", type=int, default=100)
    parser.add_argument("--message-bytes", type=int, default=16 * 1024)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--client", choices=("quasar", "pulsar"), default="quasar")
    parser.add_argument("--keep", type=Path, help="put the broker's data and log here")
    args = parser.parse_args()
    plan = SoakPlan(
        cache_mb=args.cache_mb,
        multiple=args.multiple,
        message_bytes=args.message_bytes,
        samples=args.samples,
    )
    mod = importlib.import_module("pulsar" if args.client == "pulsar" else "quasar.client")
    with TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        broker = BrokerProcess(base / "data", settings=plan.broker_settings()).start()
        try:
            topic = f"persistent://public/default/soak-{uuid.uuid4().hex[:8]}"
            report = run_soak(broker, mod, topic, plan)
        finally:
            broker.stop()
    print(f"client {args.client}")
    print("\n".join(report.lines()))
    if report.growth_bytes >= plan.memory_bound_bytes():
        print("FAIL: the broker grew past the bound its settings allow")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
