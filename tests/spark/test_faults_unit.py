"""The connector's fault points (``pyspark_quasar.faults``): which items match, and
the hold that lets a test catch a task mid-batch."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pyspark_quasar import faults
from pyspark_quasar.faults import InjectedFault, fail_point


def test_a_fail_point_raises_only_where_its_item_matches() -> None:
    spec = "task.write@b1p0a0,sink.commit@b2"
    fail_point(spec, "task.write", 1, partition=0, attempt=1)  # another attempt
    fail_point(spec, "task.write", 1, partition=1, attempt=0)  # another partition
    fail_point(spec, "task.write", 2, partition=0, attempt=0)  # another batch
    fail_point(None, "task.write", 1, partition=0, attempt=0)
    with pytest.raises(InjectedFault, match="task.write@b1p0a0"):
        fail_point(spec, "task.write", 1, partition=0, attempt=0)
    with pytest.raises(InjectedFault, match="sink.commit@b2"):
        fail_point(spec, "sink.commit", 2)


def test_a_hold_announces_the_task_and_waits_for_the_release(tmp_path: Path) -> None:
    spec = f"task.write@b1p0a0=hold:{tmp_path}"
    errors: list[BaseException] = []

    def task() -> None:
        try:
            fail_point(spec, "task.write", 1, partition=0, attempt=0)
        except BaseException as exc:  # reported to the test thread
            errors.append(exc)

    t = threading.Thread(target=task)
    t.start()
    try:
        for _ in range(200):
            if list(tmp_path.glob("*.held")):
                break
            t.join(0.05)  # bounded wait for the marker
        held = list(tmp_path.glob("*.held"))
        assert [p.name for p in held] == [f"{os.getpid()}.held"]
        assert held[0].read_text().strip() == f"task.write@b1p0a0=hold:{tmp_path}"
        assert t.is_alive()  # held until released
    finally:
        (tmp_path / "release").write_text("")
        t.join(10)
    assert not t.is_alive() and errors == []
    # Another attempt passes straight through.
    fail_point(spec, "task.write", 1, partition=0, attempt=1)


def test_a_hold_nobody_releases_fails_the_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(faults, "HOLD_MAX_S", 0.2)
    with pytest.raises(InjectedFault, match="not released"):
        fail_point(f"sink.decided@b0=hold:{tmp_path}", "sink.decided", 0)
    assert len(list(tmp_path.glob("*.held"))) == 1
