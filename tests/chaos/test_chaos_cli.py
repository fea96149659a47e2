"""``quasar chaos``: the command line hands its arguments to the runner, and refuses
bad ones before starting anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quasar.cli.main import main
from quasar.testing.chaos import main as chaos_main
from quasar.testing.chaos.schedule import FAULT_KINDS


def test_chaos_passes_its_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(chaos_main, "main", lambda argv: seen.append(argv) or 1)
    assert main(["chaos", "--seed", "3", "--faults", "2"]) == 1
    assert main(["--log-level", "ERROR", "chaos", "-h"]) == 1
    assert seen == [["--seed", "3", "--faults", "2"], ["-h"]]


def test_chaos_help_names_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert chaos_main.main(["-h"]) == 0
    out = capsys.readouterr().out
    for option in ("--seed", "--duration-s", "--operations", "--faults"):
        assert option in out


@pytest.mark.parametrize("argv", [
    ["--fault-kinds", "broker-kill,cosmic-ray"],
    ["--duration-s", "0"],
    ["--operations", "x"],
])
def test_chaos_usage_errors_exit_2(argv: list[str]) -> None:
    assert chaos_main.main(argv) == 2


def test_disk_full_asked_for_where_it_cannot_mount_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(chaos_main, "unavailable_kinds",
                        lambda: {"disk-full": "it mounts a tmpfs: not running as root"})
    monkeypatch.setattr(chaos_main, "run", _no_run)
    assert chaos_main.main(["--fault-kinds", "broker-kill,disk-full"]) == 2
    assert "disk-full cannot run here: it mounts a tmpfs: not running as root" in (
        capsys.readouterr().err
    )


def test_the_default_kinds_are_every_kind_this_machine_can_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(chaos_main, "unavailable_kinds",
                        lambda: {"disk-full": "it mounts a tmpfs: not running as root"})
    planned: list[set[str]] = []

    def record(plan: Any, workdir: Path, **options: Any) -> Any:
        planned.append({e.kind for e in plan.faults})
        raise KeyboardInterrupt  # stands for the run: nothing is started

    monkeypatch.setattr(chaos_main, "run", record)
    argv = ["--seed", "1", "--faults", "200", "--duration-s", "1000", "--workdir",
            str(tmp_path)]
    assert chaos_main.main(argv) == 1
    assert "note: fault kind disk-full left out: it mounts a tmpfs" in capsys.readouterr().out
    assert planned == [set(FAULT_KINDS) - {"disk-full"}]


def _no_run(plan: Any, workdir: Path, **options: Any) -> Any:
    raise AssertionError("a refused run must not start")
def test_send_rate_reaches_the_runner(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    seen: list[float | None] = []

    def fake_run(plan, workdir, *, send_rate=None):
        seen.append(send_rate)
        raise KeyboardInterrupt  # no run: only the hand-over is under test

    monkeypatch.setattr(chaos_main, "run", fake_run)
    monkeypatch.setattr(chaos_main.signal, "signal", lambda *a: None)
    args = ["--seed", "1", "--workdir", str(tmp_path)]
    assert chaos_main.main([*args, "--send-rate", "0"]) == 1
    assert chaos_main.main(args) == 1
    assert seen == [0.0, None]
