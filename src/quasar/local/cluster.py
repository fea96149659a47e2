"""Supervise a cluster's processes on this machine: ZooKeeper (optional) and members.

``LocalCluster`` starts the ZooKeeper server it was given, then every member at once
(each start is a few seconds of imports and ZooKeeper round trips, so they overlap)
and waits until each serves; it reports the first process that exits while the
cluster runs, and stops the members before ZooKeeper, so each releases its bundles
and deregisters while its ZooKeeper session still works.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence

from quasar.local.broker import BrokerMember
from quasar.local.process import LoggedProcess
from quasar.local.zookeeper import ZooKeeperServer

__all__ = ["LocalCluster"]


class LocalCluster:
    """``members`` and, when this cluster runs its own, ``zookeeper``."""

    def __init__(
        self, members: Sequence[BrokerMember], zookeeper: ZooKeeperServer | None = None
    ) -> None:
        self.members = list(members)
        self.zookeeper = zookeeper

    @property
    def processes(self) -> list[LoggedProcess]:
        own: list[LoggedProcess] = [] if self.zookeeper is None else [self.zookeeper]
        return own + list(self.members)

    def start_zookeeper(self, ready_timeout_s: float) -> None:
        """Raises: RuntimeError or TimeoutError (see ``ZooKeeperServer.start``)."""
        if self.zookeeper is not None:
            self.zookeeper.start(ready_timeout_s)

    def start_members(self, ready_timeout_s: float) -> None:
        """Launch every member, then wait until each serves, ``ready_timeout_s`` in
        all.

        Raises:
            RuntimeError: a member exited; TimeoutError: one did not serve in time
                (either names the member and carries its log's tail).
        """
        for member in self.members:
            member.launch()
        deadline = time.monotonic() + ready_timeout_s
        for member in self.members:
            member.wait_ready(max(0.0, deadline - time.monotonic()))

    def exited(self) -> LoggedProcess | None:
        """A process of the cluster that is no longer running, if any."""
        for process in self.processes:
            if process.proc is not None and process.proc.poll() is not None:
                return process
        return None

    def stop(self, timeout_s: float) -> dict[str, int]:
        """SIGTERM every member, wait ``timeout_s`` in all for them (SIGKILL for one
        still running then), then stop ZooKeeper the same way; returns each
        process's exit status by name (negative: the signal that ended it)."""
        codes: dict[str, int] = {}
        for member in self.members:
            member.terminate()
        deadline = time.monotonic() + timeout_s
        for member in self.members:
            codes[member.name] = _wait(member, deadline)
        if self.zookeeper is not None:
            self.zookeeper.terminate()
            codes[self.zookeeper.name] = _wait(self.zookeeper, time.monotonic() + timeout_s)
        return codes


def _wait(process: LoggedProcess, deadline: float) -> int:
    """The exit status once ``process`` has exited, killing it at ``deadline``."""
    if process.proc is None:
        return 0
    try:
        code = process.proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.proc.wait()
    process.stop()  # closes the log; the process has exited
    return code
