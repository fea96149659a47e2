"""``quasar chaos``: the command line hands its arguments to the runner, and refuses
bad ones before starting anything."""

from __future__ import annotations

import pytest

from quasar.cli.main import main
from quasar.testing.chaos import main as chaos_main


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
