"""``quasar chaos``: run a seeded chaos plan and print its summary.

Exit status: 0 when the checker found no violation, 1 when it found any (or the
run could not reach a verdict), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import tempfile
from pathlib import Path

from quasar.testing.chaos.registry import unavailable_kinds
from quasar.testing.chaos.runner import run
from quasar.testing.chaos.schedule import DISK_FULL, FAULT_KINDS, make_plan


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quasar chaos",
        description="A seeded randomized workload under faults, judged by the "
        "history checker (docs/reliability.md).",
    )
    parser.add_argument("--seed", type=int, help="replays a run (default: random)")
    parser.add_argument("--duration-s", type=float, default=60.0,
                        help="workload phase, seconds (default 60)")
    parser.add_argument("--operations", type=int, default=2000,
                        help="operations to reach before stopping early (default 2000)")
    parser.add_argument("--faults", type=int, default=5,
                        help="faults spread over the run (default 5)")
    parser.add_argument("--fault-kinds",
                        help=f"comma-separated subset of {','.join(FAULT_KINDS)} "
                        "(default: every kind this machine can run)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--send-rate", type=float,
                        help="each producer's sends per second (default 15; 0: unpaced, "
                        "producers send as fast as the broker answers)")
    parser.add_argument("--workdir", type=Path,
                        help="keeps histories and logs here (default: a temporary "
                        "directory, kept)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    kinds = _fault_kinds(args.fault_kinds)
    if kinds is None:
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(31)
    try:
        plan = make_plan(seed, duration_s=args.duration_s, operations=args.operations,
                         faults=args.faults, partitions=args.partitions, kinds=kinds)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"quasar-chaos-{seed}-"))
    print(f"chaos seed {seed}: {len(plan.faults)} faults planned, histories in {workdir}",
          flush=True)
    # SIGTERM (and SIGINT, which a background job ignores) ends the run through
    # the runner's cleanup, so no broker or worker process outlives it.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        summary = run(plan, workdir, send_rate=args.send_rate)
    except KeyboardInterrupt:
        print(f"interrupted; histories so far in {workdir}", file=sys.stderr)
        return 1
    print(summary.text(), flush=True)
    return 0 if summary.ok else 1


def _fault_kinds(asked: str | None) -> tuple[str, ...] | None:
    """The kinds to plan: those asked for, or by default every kind this machine
    can run (the others named in a note); None after printing a usage error."""
    if asked is None:
        unavailable = unavailable_kinds()
        for kind, why in sorted(unavailable.items()):
            print(f"note: fault kind {kind} left out: {why}", flush=True)
        return tuple(k for k in FAULT_KINDS if k not in unavailable)
    kinds = tuple(k for k in asked.split(",") if k)
    unknown = set(kinds) - set(FAULT_KINDS)
    if unknown:
        print(f"error: unknown fault kinds {sorted(unknown)}", file=sys.stderr)
        return None
    # Only a kind with a requirement is probed (disk-full mounts a tmpfs to find out).
    unavailable = unavailable_kinds() if DISK_FULL in kinds else {}
    for kind in kinds:
        if kind in unavailable:
            print(f"error: fault kind {kind} cannot run here: {unavailable[kind]}",
                  file=sys.stderr)
            return None
    return kinds


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
