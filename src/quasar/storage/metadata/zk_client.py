"""One ZooKeeper session (kazoo) with bounded waits, chroot paths and quasar's errors.

kazoo keeps a session alive on its own thread and reconnects by itself; every call
here hands a request to that thread and waits for the answer. The wait is bounded by
the operation timeout (``metadataStoreOperationTimeoutSeconds``): while ZooKeeper is
unreachable kazoo queues requests until it reconnects, so an unbounded wait would
hang the broker for as long as the outage lasts. A timed-out or lost request raises
``MetadataError`` (retryable); its outcome is unknown, as after any ZooKeeper
connection loss, which is why every write of the store is a compare-and-set: a
request that is still delivered later applies only if nothing changed meanwhile.

Paths: the store's keys are absolute paths below the URL's chroot. The chroot is
applied here (not through kazoo's own chroot support, which needs the chroot znode
to exist before the session can use it), and created at start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from quasar.errors import MetadataError, QuasarError
from quasar.storage.metadata.url import ZooKeeperUrl

__all__ = ["ZooKeeperSession"]

log = logging.getLogger(__name__)

# Outcomes the store branches on; everything else from kazoo becomes MetadataError.
_EXPECTED = (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError)


class ZooKeeperSession:
    """A started kazoo client for one ZooKeeper URL.

    Raises (constructor):
        MetadataError: the ensemble did not answer within the operation timeout.
    """

    def __init__(
        self, url: ZooKeeperUrl, *, session_timeout_ms: int, operation_timeout_s: float
    ) -> None:
        self.url = url
        self.operation_timeout_s = float(operation_timeout_s)
        self.chroot = url.chroot
        # Reconnect for ever, at most a second apart: a broker outlives a ZooKeeper
        # outage and picks its session back up (or a new one) when it ends.
        retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=1.0)
        self.client: Any = KazooClient(
            hosts=url.connect_string,
            timeout=session_timeout_ms / 1000.0,
            connection_retry=retry,
        )
        try:
            self.client.start(timeout=self.operation_timeout_s)
        except KazooTimeoutError:
            self._stop()
            raise MetadataError(
                f"ZooKeeper {url.connect_string} did not answer within "
                f"{self.operation_timeout_s:g}s"
            ) from None
        if self.chroot:
            try:
                self.wait(
                    "create chroot", self.chroot, self.deadline(),
                    partial(self.client.ensure_path_async, self.chroot),
                )
            except BaseException:
                self._stop()  # no session thread outlives a failed constructor
                raise

    def znode(self, path: str) -> str:
        """The znode path of the store key ``path``."""
        if not self.chroot:
            return path
        return self.chroot if path == "/" else self.chroot + path

    def deadline(self) -> float:
        """The monotonic time by which an operation starting now must be done."""
        return time.monotonic() + self.operation_timeout_s

    def wait(
        self, what: str, path: str, deadline: float, start: Callable[[], Any]
    ) -> Any:
        """Start one kazoo async call and wait for it until ``deadline``.

        ``BadVersionError``, ``NodeExistsError``, ``NoNodeError`` and
        ``NotEmptyError`` propagate (callers decide what they mean).

        Raises:
            MetadataError: timed out, connection or session lost, or any other
                ZooKeeper failure.
        """
        return self._await(what, path, deadline, start())

    def _await(self, what: str, path: str, deadline: float, pending: Any) -> Any:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._timed_out(what, path)
        try:
            return pending.get(timeout=remaining)
        except _EXPECTED:
            raise
        except KazooTimeoutError:
            raise self._timed_out(what, path) from None
        except KazooException as exc:
            raise MetadataError(
                f"ZooKeeper {self.url.connect_string}: {what} {path} failed: "
                f"{type(exc).__name__} {exc}".rstrip()
            ) from exc

    def wait_all(
        self, what: str, deadline: float, calls: list[tuple[str, Callable[[], Any]]]
    ) -> list[Any]:
        """Start several calls at once (kazoo pipelines them on the one connection,
        so N calls cost about one round trip) and wait for all; each result is the
        value or the expected kazoo exception (``NoNodeError`` ...).

        Raises:
            MetadataError: as ``wait``.
        """
        started = [(path, start()) for path, start in calls]
        out: list[Any] = []
        for path, pending in started:
            try:
                out.append(self._await(what, path, deadline, pending))
            except _EXPECTED as exc:
                out.append(exc)
        return out

    def close(self) -> None:
        """End the session (its ephemeral nodes go at once) and stop kazoo's thread."""
        self._stop()

    def _stop(self) -> None:
        try:
            self.client.stop()
        except KazooException as exc:  # best effort: the session ends on timeout
            log.debug("stopping the ZooKeeper client: %s", exc)
        self.client.close()

    def _timed_out(self, what: str, path: str) -> QuasarError:
        return MetadataError(
            f"ZooKeeper {self.url.connect_string}: {what} {path} timed out after "
            f"{self.operation_timeout_s:g}s (session state {self.client.state})"
        )
