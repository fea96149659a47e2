"""When snapshots are taken, and one at a time.

Triggers (Pulsar's, ``transactionBufferSnapshot*`` keys):

* count: the buffer reports every *change* (the max read position moved, the
  aborted set changed); after an end, once ``snapshot_max_transaction_count``
  changes accumulated, a snapshot is taken;
* time: every ``snapshot_min_time_in_millis`` while the buffer is READY, a snapshot is
  taken if anything changed since the last one;
* on demand: the first snapshot of a topic, admin, tests.

Writes are serialized: a request that arrives while a write runs is served by the
next write, which captures the state as it is when that write starts. A snapshot
therefore never overwrites a newer one, and every waiter gets a snapshot at least as
new as the state at its request. Failures are logged (and given to waiters); the next
trigger writes again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import NamedTuple

from quasar.clock import Clock
from quasar.errors import BrokerError, ServiceNotReady
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import Position

from ..scheduler import Scheduler, TimerHandle
from .snapshotter import SnapshotWriter
from .txn_state import AbortedTxn

log = logging.getLogger(__name__)


class SnapshotState(NamedTuple):
    """What a snapshot captures, read at the instant its write starts."""

    aborted: Mapping[TxnID, AbortedTxn]
    max_read_position: Position
    low_watermarks: Mapping[int, int]


class SnapshotScheduler:
    """Counts changes, runs the timer, and serializes writes through ``writer``."""

    def __init__(
        self,
        topic: str,
        writer: SnapshotWriter,
        capture: Callable[[], SnapshotState],
        clock: Clock,
        scheduler: Scheduler,
        *,
        max_changes: int,
        interval_ms: int,
        timer_enabled: Callable[[], bool],
    ) -> None:
        self._topic = topic
        self._writer = writer
        self._capture = capture
        self._clock = clock
        self._scheduler = scheduler
        self._max_changes = max_changes
        self._interval_ms = interval_ms
        self._timer_enabled = timer_enabled
        self.changes = 0  # Pulsar's changeMaxReadPositionCount
        self.last_snapshot_ms = 0
        self._timer: TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending = False
        self._waiters: list[asyncio.Future[None]] = []
        self._closed = False

    def changed(self, count: int = 1) -> None:
        self.changes += count

    def after_end(self) -> None:
        """Count trigger, checked after every end (Pulsar's takeSnapshotByChangeTimes)."""
        if self.changes >= self._max_changes:
            self.changes = 0
            self.request()

    def request(self, wait: bool = False) -> asyncio.Future[None] | None:
        """Ask for a snapshot; with ``wait``, a future for the write that serves it."""
        waiter: asyncio.Future[None] | None = None
        loop = asyncio.get_running_loop()
        if wait:
            waiter = loop.create_future()
            if self._closed:
                waiter.set_exception(self._closed_error())
                return waiter
            self._waiters.append(waiter)
        self._pending = True
        if not self._closed and (self._task is None or self._task.done()):
            self._task = loop.create_task(self._run())
        return waiter

    async def take(self) -> None:
        """Write a snapshot now and wait for it.

        Raises:
            ServiceNotReady: closed.
            Exception: from the store.
        """
        self.changes = 0
        waiter = self.request(wait=True)
        assert waiter is not None
        await waiter

    def start_timer(self) -> None:
        if self._timer is None and not self._closed:
            self._timer = self._scheduler.call_later(self._interval_ms, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed or not self._timer_enabled():
            return
        if self.changes > 0:
            self.changes = 0
            self.request()
        self.start_timer()

    async def _run(self) -> None:
        while self._pending and not self._closed:
            self._pending = False
            waiters, self._waiters = self._waiters, []
            state = self._capture()
            plan = self._writer.prepare(
                state.aborted, state.max_read_position, state.low_watermarks,
                self._clock.wall_ms(),
            )
            try:
                await self._writer.write(plan)
            except asyncio.CancelledError:
                self._fail(waiters, self._closed_error())
                raise
            except Exception as exc:
                log.warning("%s: transaction buffer snapshot failed: %s", self._topic, exc)
                self._fail(waiters, exc)
                continue
            self.last_snapshot_ms = plan.index.taken_at_ms
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    def _closed_error(self) -> BrokerError:
        return ServiceNotReady(f"transaction buffer of {self._topic} is closed")

    @staticmethod
    def _fail(waiters: list[asyncio.Future[None]], exc: BaseException) -> None:
        for w in waiters:
            if not w.done():
                w.set_exception(exc)

    async def close(self) -> None:
        """Stop the timer and any write in progress; waiters get ``ServiceNotReady``."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._fail(self._waiters, self._closed_error())
        self._waiters = []
