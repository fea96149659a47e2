"""A server process the benchmark starts on loopback and stops after its runs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Unavailable(Exception):
    """The system cannot be installed or started here; the report says why."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], bool], timeout_s: float, what: str, proc: subprocess.Popen[bytes] | None, log: Path) -> None:
    """Poll ``check`` until it holds; Unavailable with the log's tail when the process
    exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            raise Unavailable(f"{what} exited with {proc.returncode}: {tail(log)}")
        time.sleep(0.1)
    raise Unavailable(f"{what} not ready after {timeout_s:g} s: {tail(log)}")


def tail(log: Path, chars: int = 400) -> str:
    try:
        return log.read_text(errors="replace")[-chars:].strip()
    except OSError:
        return "(no log)"


class ServerProcess:
    """Base: ``system`` and ``settings`` for the report, ``pid`` for CPU and strace."""

    system = "?"
    settings = ""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log = work_dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.helpers: list[subprocess.Popen[bytes]] = []

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def launch(self, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with open(self.log, "ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                cwd=self.work_dir, start_new_session=True,
            )
        return proc

    def start(self) -> None:
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        raise NotImplementedError

    def version(self) -> str:
        return "?"

    def stop(self) -> None:
        # Each process was started in its own session: signal that group, which holds
        # the server's own children (RabbitMQ's beam.smp under its start script).
        for proc in [p for p in [self.proc, *self.helpers] if p is not None]:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
