"""A server process started as a child, logging to a file, waited for and stopped.

``LoggedProcess`` is what a ZooKeeper server and a broker have in common: each knows
how to launch its server and how to tell that it serves; waiting (bounded, failing
fast when the process exits), reading the log's tail, SIGKILL and SIGTERM are the
same for both.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from quasar.local.parent_death import die_with_parent_preexec

__all__ = ["READY_POLL_S", "LoggedProcess"]

# How often a readiness check runs while waiting: a polling interval of a bounded
# wait on an event (the server answering), not a sleep standing in for one.
READY_POLL_S = 0.05


class LoggedProcess:
    """One child process whose output goes to ``log_path``.

    ``new_session``: start the child in a session (and process group) of its own, so
    a Ctrl-C typed in the terminal reaches only the supervisor, which then stops its
    children in order instead of all of them at once.

    ``die_with_parent``: on Linux the child gets SIGTERM when this process dies, even
    by SIGKILL, so a killed supervisor leaves no orphans (``parent_death``); launch
    it from the main thread. A no-op on other platforms.
    """

    name = "process"  # says what it is in errors
    log_tail_chars = 20_000

    def __init__(
        self, log_path: Path, *, new_session: bool = False, die_with_parent: bool = False
    ) -> None:
        self.log_path = log_path
        self.new_session = new_session
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def _launch(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        preexec = die_with_parent_preexec() if self.die_with_parent else None
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=self.new_session,
            preexec_fn=preexec,
        )

    def _await(self, ready: Callable[[], bool], timeout_s: float) -> None:
        """Wait until ``ready()``; the process exiting or the time running out is an
        error carrying the log's tail. The process is killed on failure.

        Raises:
            RuntimeError: the process exited; TimeoutError: it was not ready in time.
        """
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

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-self.log_tail_chars :]
        except OSError:
            return ""

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the log."""
        return "\n".join(self.read_log().splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self._close_log()

    def terminate(self) -> None:
        """SIGTERM without waiting: ``stop`` waits, so several stop side by side."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

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
