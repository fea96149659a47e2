"""The runner declares a partition of a subscription stuck as soon as it has read
nothing there for the stall time, even while another partition still moves (a
starved partition is the finding), and the ``no_progress`` record carries the
evidence fetched at that moment. Pure logic: the consumers are history files that
a thread writes, the admin API is unreachable (so the evidence records the error)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from quasar.testing.chaos import runner
from quasar.testing.chaos.recorder import Recorder
from quasar.testing.chaos.schedule import CONSUMER, WorkerSpec
from quasar.testing.chaos.workload import SENTINEL_PREFIX

P0 = "persistent://public/default/t-partition-0"
P1 = "persistent://public/default/t-partition-1"
SUB = "chaos-Shared"


@dataclass
class FakeConsumer:
    spec: WorkerSpec
    history: Path
    name: str = "c0"
    proc: None = None


def test_a_starved_partition_is_declared_while_another_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "STALL_S", 0.5)
    monkeypatch.setattr(runner, "SAMPLE_INTERVAL_S", 0.05)
    worker = FakeConsumer(WorkerSpec("c0", CONSUMER, 1, "Shared"), tmp_path / "c0.jsonl")
    history = Recorder(worker.history, "c0", 1)
    rec = Recorder(tmp_path / "runner.jsonl", "runner", 0)
    done = threading.Event()

    def partition_0_moves() -> None:
        # Partition 0 keeps reading for three stall times, then reaches its
        # sentinel; partition 1 never reads anything.
        deadline = time.monotonic() + 1.5
        n = 0
        while time.monotonic() < deadline:
            history.record("recv", value=f"v{n}", sub=SUB, partition=P0, position=[1, n, -1])
            n += 1
            done.wait(0.05)  # the pace of the simulated consumer
        history.record("recv", value=SENTINEL_PREFIX + P0, sub=SUB, partition=P0,
                       position=[1, n, -1])

    mover = threading.Thread(target=partition_0_moves)
    mover.start()
    try:
        runner._await_progress([worker], {SENTINEL_PREFIX + P0, SENTINEL_PREFIX + P1},
                               rec, "http://127.0.0.1:9", tmp_path)
    finally:
        done.set()
        mover.join()
        rec.close()
        history.close()
    lines = [json.loads(line) for line in (tmp_path / "runner.jsonl").read_text().splitlines()]
    stalls = [e for e in lines if e["op"] == "no_progress"]
    assert [(e["sub"], e["partition"]) for e in stalls] == [(SUB, P1)]
    [stall] = stalls
    assert "stalled before the sentinel of " + P1 in stall["what"]
    # Declared while partition 0 still moved: before its sentinel was read.
    sentinel_t = max(e["t"] for e in (json.loads(x) for x in
                     worker.history.read_text().splitlines()) if e["value"].startswith("S-"))
    assert stall["t"] < sentinel_t
    assert len(stall["stats"]["errors"]) == 3  # the admin API did not answer
    assert (tmp_path / "stall-t-partition-1.json").exists()
