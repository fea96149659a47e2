"""Watches and session states of the ZooKeeper metadata store, for the cluster layer.

A ZooKeeper watch fires once; these re-arm themselves after every event, so a
listener sees every *state* it must react to (not necessarily every intermediate
write: two quick writes may be reported as one, with the latest value, as with any
ZooKeeper watch). After a new session (the old one expired) ZooKeeper has forgotten
the watches: on every ``CONNECTED`` they read again and re-arm. A listener is called
once at the start and then only when what it watches differs from what it was last
told (an event that changed nothing it can see, such as the creation of an implicit
parent, is not passed on).

Threading: kazoo delivers watch events on its event thread and session changes on
its connection thread, which must never block. Listeners therefore run on kazoo's
event thread and must return quickly; broker code hands the work to its event loop
with ``loop.call_soon_threadsafe``. A failed re-read (ZooKeeper unreachable) is
logged and retried on the next ``CONNECTED``.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.protocol.states import KazooState

from quasar.errors import MetadataError
from quasar.storage.api import Versioned
from quasar.storage.metadata.zk_client import ZooKeeperSession

__all__ = [
    "ChildrenWatch",
    "SessionListener",
    "SessionState",
    "ValueWatch",
    "session_state_of",
]

log = logging.getLogger(__name__)


class SessionState(enum.Enum):
    """The ZooKeeper session as the cluster layer needs to see it."""

    CONNECTED = "connected"  # connected; ephemeral keys and watches are in place
    SUSPENDED = "suspended"  # connection lost; the session may still be alive
    LOST = "lost"  # the session expired: its ephemeral keys are gone


SessionListener = Callable[[SessionState], None]

_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}


def session_state_of(state: Any) -> SessionState:
    """quasar's name for a kazoo ``KazooState``."""
    return _STATES[state]


# read(path, deadline, watch) -> the key (or None) with a watch left on the znode.
ValueReader = Callable[[str, float, Any], Versioned | None]
# list(path, deadline, watch) -> sorted children with a watch left on the znode.
ChildrenLister = Callable[[str, float, Any], list[str]]


class _Watch:
    """What both watches share: re-arming, re-reading on reconnection, cancelling."""

    def __init__(self, zk: ZooKeeperSession, path: str) -> None:
        self._zk = zk
        self.path = path
        self._cancelled = False
        # One re-read at a time, so a listener never sees an older state after a
        # newer one. Re-entrant: a listener may cancel its own watch.
        self._lock = threading.RLock()
        zk.client.add_listener(self._on_session)

    def cancel(self) -> None:
        """Stop calling the listener (idempotent). A pending ZooKeeper watch may
        still fire once; it is ignored. Returns after a listener call in progress
        on another thread has finished."""
        self._cancelled = True
        self._zk.client.remove_listener(self._on_session)
        with self._lock:
            pass

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def _on_event(self, _event: Any) -> None:
        self._refresh()

    def _on_session(self, state: Any) -> None:
        # The connection thread must not block: re-read on a handler thread.
        if state == KazooState.CONNECTED and not self._cancelled:
            self._zk.client.handler.spawn(self._refresh)

    def _refresh(self) -> None:
        if self._cancelled:
            return
        with self._lock:
            try:
                self._read_and_notify()
            except MetadataError as exc:
                log.warning("watch on %s: re-read failed, retried on reconnection: %s",
                            self.path, exc)

    def _read_and_notify(self) -> None:
        raise NotImplementedError


class ValueWatch(_Watch):
    """Calls ``listener`` with the key at ``path`` (``None`` when absent) now and
    after each change. Build it with ``ZooKeeperMetadataStore.watch_value``.

    Raises (constructor):
        MetadataError: the first read failed.
    """

    def __init__(
        self,
        zk: ZooKeeperSession,
        path: str,
        read: ValueReader,
        listener: Callable[[Versioned | None], None],
    ) -> None:
        self._read = read
        self._listener = listener
        self._told = False
        self._last: Versioned | None = None
        super().__init__(zk, path)
        with self._lock:
            self._read_and_notify()

    def _read_and_notify(self) -> None:
        value = self._read(self.path, self._zk.deadline(), self._on_event)
        if not self._cancelled and (not self._told or value != self._last):
            self._told, self._last = True, value
            self._listener(value)


class ChildrenWatch(_Watch):
    """Calls ``listener`` with the sorted children of ``path`` now and after each
    change of the set. Build it with ``ZooKeeperMetadataStore.watch_children``.

    Raises (constructor):
        MetadataError: the first listing failed.
    """

    def __init__(
        self,
        zk: ZooKeeperSession,
        path: str,
        list_children: ChildrenLister,
        listener: Callable[[list[str]], None],
    ) -> None:
        self._list = list_children
        self._listener = listener
        self._told = False
        self._last: list[str] = []
        super().__init__(zk, path)
        with self._lock:
            self._read_and_notify()

    def _read_and_notify(self) -> None:
        names = self._list(self.path, self._zk.deadline(), self._on_event)
        if not self._cancelled and (not self._told or names != self._last):
            self._told, self._last = True, names
            self._listener(names)
