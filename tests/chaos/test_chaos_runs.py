"""Bounded chaos runs: a few seeds of the seeded workload under every fault kind
(broker kill -9, SIGSTOP pauses, worker kills, the proxy's blackholes, resets,
mid-frame cuts and delays, a full disk), with compactions racing them, must end with
zero violations (``make chaos`` runs a long one; docs/reliability.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from quasar.testing.chaos.disk_full import mount_refusal
from quasar.testing.chaos.runner import run
from quasar.testing.chaos.schedule import (
    BROKER_KILL,
    BROKER_PAUSE,
    DISK_FULL,
    FAULT_KINDS,
    PROXY_BLACKHOLE,
    PROXY_CUT,
    PROXY_DELAY,
    PROXY_RESET,
    WORKER_KILL,
    make_plan,
)

# Each seed's plan is fixed; the kinds are listed so that every kind fires at least
# once across the seeds whatever the draw (checked below).
RUNS = [
    (11, (BROKER_KILL, WORKER_KILL)),
    (12, (BROKER_PAUSE, PROXY_CUT)),
    (18, (PROXY_BLACKHOLE, PROXY_DELAY)),
    (20, (DISK_FULL, PROXY_RESET)),
]
DURATION_S = 10.0
FAULTS = 2
# Room for what a 10 s run writes and little more: the filler takes the rest.
DISK_SIZE_BYTES = 64 << 20


def _require_mount() -> None:
    refusal = mount_refusal()
    if refusal is None:
        return
    # CI machines allow mounting: there, a run that cannot fill its disk is a failure.
    if os.environ.get("CI") == "true":
        pytest.fail(f"the disk-full chaos run cannot run on CI: {refusal}")
    pytest.skip(f"the disk-full chaos run needs to mount a tmpfs: {refusal}")


@pytest.mark.crash
@pytest.mark.timeout(240)
@pytest.mark.parametrize(("seed", "kinds"), RUNS, ids=[f"seed-{s}" for s, _ in RUNS])
def test_a_bounded_chaos_run_finds_no_violation(
    tmp_path: Path, seed: int, kinds: tuple[str, ...]
) -> None:
    if DISK_FULL in kinds:
        _require_mount()
    plan = make_plan(seed, duration_s=DURATION_S, operations=1_000_000, faults=FAULTS,
                     kinds=kinds)
    summary = run(plan, tmp_path, disk_size_bytes=DISK_SIZE_BYTES)
    print(summary.text())
    assert summary.report is not None
    assert summary.ok, summary.text() + f"\nhistories in {tmp_path}"
    assert sum(summary.faults.values()) == FAULTS
    # The workload did something of every kind, and the final drain read it.
    for op in ("send", "begin", "committing", "recv", "ack"):
        assert summary.operations[op] > 0, (op, summary.operations)
    assert summary.report.counts["reads"] > 0 and summary.rss_max_bytes > 0
    # The run's tmpfs is gone with it.
    assert not os.path.ismount(tmp_path / "disk")
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
    assert fired == set(FAULT_KINDS)
