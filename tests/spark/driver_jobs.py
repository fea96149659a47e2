"""Spark drivers as child processes (``jobs.py``), so that tests can kill a whole driver.

A job starts in its own session, so ``kill_group`` takes the driver's Python process,
its JVM and its local-mode workers at once. Every wait is for an event (a file, a
process exit), bounded by ``JOB_TIMEOUT_S``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark_quasar.faults import CRASH_ENV

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("jobs.py")
JOB_TIMEOUT_S = 240


def job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop(CRASH_ENV, None)
    env.update(extra or {})
    return env


def start_job(
    args: dict[str, Any],
    log: Path,
    children: list[subprocess.Popen[bytes]],
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Run ``jobs.py`` with ``args``; the process goes to ``children`` (the fixture
    that kills what is left when the test ends)."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, str(JOB), json.dumps(args)],
            env=job_env(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
        )
    children.append(proc)
    return proc


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the job's whole session: its Python, JVM and Spark workers."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(60)


def wait_for(
    what: str, check: Callable[[], bool], proc: subprocess.Popen[bytes] | None, log: Path
) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not check():
        if proc is not None and proc.poll() is not None and not check():
            raise AssertionError(
                f"job exited ({proc.returncode}) before {what}:\n{log.read_text()[-4000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(0.1)  # polling interval of a bounded wait for a file or an exit


def run_to_end(proc: subprocess.Popen[bytes], log: Path) -> int:
    try:
        return proc.wait(JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise AssertionError(f"job did not finish:\n{log.read_text()[-4000:]}") from None
