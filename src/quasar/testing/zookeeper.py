"""Run a real ZooKeeper server (Debian's ``zookeeper`` package) for tests.

``ZooKeeperProcess`` is ``quasar.local.zookeeper.ZooKeeperServer`` with what tests
want: a free loopback port unless one is given, and a short ``tickTime`` so tests may
ask for short sessions (ZooKeeper grants between 2 and 20 ticks unless the bounds are
set, as here). It is stopped politely (SIGTERM) or killed (SIGKILL), then started
again on the same port and data: what a ZooKeeper outage looks like to the brokers.
``missing_reason()`` says why no server can be started (no Java, no package), so
tests can fail under ``CI=true`` and skip elsewhere with that reason.
"""

from __future__ import annotations

from pathlib import Path

from quasar.local.zookeeper import ZOOKEEPER_JAR, ZooKeeperServer, missing_reason
from quasar.testing.process import free_port

__all__ = ["ZOOKEEPER_JAR", "ZooKeeperProcess", "missing_reason"]


class ZooKeeperProcess(ZooKeeperServer):
    """A standalone ZooKeeper server on ``127.0.0.1:<port>`` with a 100 ms tick."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        *,
        tick_time_ms: int = 100,
        max_session_timeout_ms: int = 60_000,
    ) -> None:
        super().__init__(
            data_dir, port or free_port(),
            tick_time_ms=tick_time_ms, max_session_timeout_ms=max_session_timeout_ms,
        )

    def start(self, ready_timeout_s: float = 30.0) -> ZooKeeperProcess:
        super().start(ready_timeout_s)
        return self

    def __enter__(self) -> ZooKeeperProcess:
        return self.start()
