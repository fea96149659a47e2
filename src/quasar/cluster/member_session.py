"""Whether a cluster member serves: its ZooKeeper session and its loop's heartbeat.

On SUSPENDED (connection lost) or LOST (session expired) the member stops serving
every bundle at once: ``serving`` turns false and the member is told to close the
topics of its bundles. A suspended session may come back within the session timeout
with its ephemeral nodes intact; after LOST ZooKeeper has deleted them. On
CONNECTED the member is asked to take up its bundles again, told whether the session
is the one it served on, and serves again once that succeeds.

The loop's heartbeat: a process stopped (SIGSTOP, a VM pause) longer than the
session timeout has lost its session, but kazoo notices only after the loop may
already have taken requests. A gap of half the session timeout is treated as
SUSPENDED, and serving resumes only once the session is seen connected.

Threading: kazoo reports session changes on its own thread; the listener only hands
them to the event loop, where all of this state lives.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from quasar.errors import QuasarError, ServiceNotReady
from quasar.storage.metadata.zk_watch import SessionState
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore

__all__ = ["MemberSession"]

log = logging.getLogger(__name__)

# Told that serving stopped (the new state, whether it served until then); returns
# the work that closes what the member served, run as a task of its own.
StopServing = Callable[[SessionState, bool], Coroutine[Any, Any, None]]
# Told the session is connected again and whether it is the session served on
# before; takes the bundles up again. Raises QuasarError when it cannot.
ResumeServing = Callable[[bool], None]


class MemberSession:
    def __init__(
        self,
        store: ZooKeeperMetadataStore,
        broker_id: str,
        session_timeout_ms: int,
        stop_serving: StopServing,
        resume_serving: ResumeServing,
    ) -> None:
        self._store = store
        self._broker_id = broker_id
        self._stop_serving = stop_serving
        self._resume_serving = resume_serving
        self.serving = False
        self._session_id: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.pause_limit_s = session_timeout_ms / 2000
        self._heartbeat_s = min(0.5, self.pause_limit_s / 4)
        self._last_beat = time.monotonic()
        self._heartbeat_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Serve on the store's current session (on the running loop)."""
        self._loop = asyncio.get_running_loop()
        self._session_id = self._store.session_id
        self.serving = True
        self._store.add_session_listener(self._on_session_change)
        self._last_beat = time.monotonic()
        self._heartbeat_task = self._loop.create_task(self._beat())

    def stop(self) -> bool:
        """Stop serving and watching; returns whether it served until now."""
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
        was_serving, self.serving = self.serving, False
        return was_serving

    def require_serving(self) -> None:
        """Raises: ServiceNotReady: the session is not connected, or the loop was
        paused (a pause is noticed here, at once)."""
        if self.serving and time.monotonic() - self._last_beat > self.pause_limit_s:
            self._paused()
        if not self.serving or self._store.session_state is not SessionState.CONNECTED:
            raise ServiceNotReady(
                f"Broker {self._broker_id} is not serving: its metadata-store session "
                "is not connected"
            )

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            if self.serving and time.monotonic() - self._last_beat > self.pause_limit_s:
                self._paused()
            self._last_beat = time.monotonic()

    def _paused(self) -> None:
        """The loop stood still long enough for the session to expire: stop serving
        as on SUSPENDED, then serve again only once the session is confirmed."""
        log.warning(
            "the event loop stood still for %.1fs: treating the metadata-store session "
            "as suspended", time.monotonic() - self._last_beat,
        )
        self._last_beat = time.monotonic()
        self._session_changed(SessionState.SUSPENDED)
        self._spawn(self._confirm_session())

    async def _confirm_session(self) -> None:
        # kazoo reports SUSPENDED / LOST / CONNECTED if the session did end; if it
        # did not, nothing is reported, so look again until it is seen connected.
        while not self.serving:
            await asyncio.sleep(self._heartbeat_s)
            if self._store.session_state is SessionState.CONNECTED:
                await self._resume()

    def _on_session_change(self, state: SessionState) -> None:
        # kazoo's connection thread: hand over to the loop, never block here.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._session_changed, state)

    def _session_changed(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED:
            self._spawn(self._resume())
            return
        was_serving, self.serving = self.serving, False
        if state is SessionState.LOST:
            self._session_id = None
        self._spawn(self._stop_serving(state, was_serving))

    async def _resume(self) -> None:
        if self._store.session_state is not SessionState.CONNECTED or self.serving:
            return
        session_id = self._store.session_id
        try:
            self._resume_serving(session_id is not None and session_id == self._session_id)
        except QuasarError as exc:
            log.warning("could not resume serving after reconnecting: %s", exc)
            return
        self._session_id = session_id
        self.serving = True
        log.info(
            "metadata-store session connected: broker %s serves again", self._broker_id
        )

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
