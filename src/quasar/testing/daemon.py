"""A server process a test starts, logs to a file, waits for and stops.

``BrokerProcess`` and ``ZooKeeperProcess`` share this: each knows how to launch its
server and how to tell that it serves; waiting (bounded, failing fast when the
process exits), reading the log's tail, SIGKILL and SIGTERM are the same for both.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

# How often a readiness check runs while waiting: a polling interval of a bounded
# wait on an event (the server answering), not a sleep standing in for one.
READY_POLL_S = 0.05


class LoggedProcess:
    """One child process whose output goes to ``log_path``."""

    name = "process"  # says what it is in errors
    log_tail_chars = 20_000

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def _launch(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def _await(self, ready: Callable[[], bool], timeout_s: float) -> None:
        """Wait until ``ready()``; the process exiting or the time running out is an
        error carrying the log's tail. The process is killed on failure."""
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited with {self.proc.returncode}; "
                        f"log:\n{self.read_log()}"
                    )
                if ready():
                    return
                time.sleep(READY_POLL_S)
            raise TimeoutError(
                f"{self.name} not ready after {timeout_s}s; log:\n{self.read_log()}"
            )
        except BaseException:
            self.kill()
            raise

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-self.log_tail_chars :]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self._close_log()

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait for a graceful exit (SIGKILL after ``timeout_s``);
        returns the exit code."""
        code = 0
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait(10)
        elif self.proc is not None:
            code = self.proc.returncode
        self._close_log()
        return code

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
