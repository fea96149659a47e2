"""Crash points kill the process with SIGKILL only when armed by name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from quasar.transaction.crash_points import KNOWN_POINTS, crash_point

SCRIPT = (
    "from quasar.transaction.crash_points import crash_point\n"
    "crash_point('tc.after_some_ends')\n"
    "print('alive')\n"
)


def run(point: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("QUASAR_CRASH_POINT", None)
    if point is not None:
        env["QUASAR_CRASH_POINT"] = point
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )


def test_armed_point_kills_with_sigkill() -> None:
    result = run("tc.after_some_ends")
    assert result.returncode == -signal.SIGKILL
    assert "alive" not in result.stdout


def test_other_or_no_point_is_harmless() -> None:
    assert run("tc.after_ending_written").stdout.strip() == "alive"
    assert run(None).stdout.strip() == "alive"


def test_unarmed_in_this_process() -> None:
    assert "QUASAR_CRASH_POINT" not in os.environ
    for point in KNOWN_POINTS:
        crash_point(point)  # returns
