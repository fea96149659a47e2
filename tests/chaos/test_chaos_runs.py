"""Bounded chaos runs: a few seeds of the seeded workload under broker kill -9,
SIGSTOP pauses and worker kills, with compactions racing them, must end with zero
violations (``make chaos`` runs a long one; docs/reliability.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from quasar.testing.chaos.runner import run
from quasar.testing.chaos.schedule import (
    BROKER_KILL,
    BROKER_PAUSE,
    WORKER_KILL,
    make_plan,
)

# Each seed's plan is fixed; the kinds are listed so that every kind fires at least
# once across the seeds whatever the draw (checked below).
RUNS = [
    (11, (BROKER_KILL, WORKER_KILL)),
    (12, (BROKER_PAUSE, WORKER_KILL)),
    (13, (BROKER_KILL, BROKER_PAUSE)),
]
DURATION_S = 10.0
FAULTS = 2


@pytest.mark.crash
@pytest.mark.timeout(240)
@pytest.mark.parametrize(("seed", "kinds"), RUNS, ids=[f"seed-{s}" for s, _ in RUNS])
def test_a_bounded_chaos_run_finds_no_violation(
    tmp_path: Path, seed: int, kinds: tuple[str, ...]
) -> None:
    plan = make_plan(seed, duration_s=DURATION_S, operations=1_000_000, faults=FAULTS,
                     kinds=kinds)
    summary = run(plan, tmp_path)
    print(summary.text())
    assert summary.report is not None
    assert summary.ok, summary.text() + f"\nhistories in {tmp_path}"
    assert sum(summary.faults.values()) == FAULTS
    # The workload did something of every kind, and the final drain read it.
    for op in ("send", "begin", "committing", "recv", "ack"):
        assert summary.operations[op] > 0, (op, summary.operations)
    assert summary.report.counts["reads"] > 0 and summary.rss_max_bytes > 0
    # Compaction ran during the workload (whatever the faults made of it), and at
    # least the last one completed and was read by a complete compacted pass.
    assert summary.operations["compact"] > 0, summary.operations
    assert summary.report.counts["compactions"] > 0
    assert summary.report.counts["compacted-complete-passes"] > 0


def test_the_bounded_seeds_cover_every_fault_kind() -> None:
    fired = {
        e.kind
        for seed, kinds in RUNS
        for e in make_plan(seed, duration_s=DURATION_S, operations=1, faults=FAULTS,
                           kinds=kinds).faults
    }
    assert fired == {BROKER_KILL, BROKER_PAUSE, WORKER_KILL}
