"""The lifecycle half of a pending-ack handle: its state, the requests waiting for
recovery, and fencing. The rules are the tables in ``handle_state``; this class only
applies them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from quasar.errors import BrokerError, ServiceNotReady

from .handle_state import (
    ADMISSION,
    Admission,
    HandleEvent,
    PendingAckHandleState,
    next_state,
)

log = logging.getLogger(__name__)


class HandleLifecycle:
    """State, admission and fencing of one handle.

    ``on_fenced`` runs once, when the handle first moves to Error because of a
    failure (not when recovery fails: ``recover`` raises to its caller then).
    """

    def __init__(
        self, describe: str, max_waiting_requests: int, on_fenced: Callable[[], None]
    ) -> None:
        self._describe = describe
        self._max_waiting = max_waiting_requests
        self._on_fenced = on_fenced
        self.status = PendingAckHandleState.NONE
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def serving(self) -> bool:
        return ADMISSION[self.status] is Admission.SERVE

    @property
    def stopped(self) -> bool:
        """Error or Closed: nothing may change the state any more."""
        return self.status in (PendingAckHandleState.ERROR, PendingAckHandleState.CLOSED)

    def transition(self, event: HandleEvent) -> None:
        """Move by the table; wake waiters once requests no longer wait.

        Raises:
            IllegalHandleTransition: the table does not allow it (a bug).
        """
        self.status = next_state(self.status, event)
        if ADMISSION[self.status] is not Admission.WAIT:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def fence(self, exc: BaseException) -> None:
        """A write failed or the cursor was taken: state unknown, stop serving."""
        if self.stopped:
            return
        log.error("%s: pending ack failed, state unknown until reloaded: %r",
                  self._describe, exc)
        self.transition(HandleEvent.FENCED)
        self._on_fenced()

    async def admit(self, what: str) -> None:
        """Return when a request may run: at once if Ready, after recovery if it is
        still coming.

        Raises:
            ServiceNotReady: Error or Closed (also if it becomes so while waiting), or
                ``max_waiting_requests`` already wait.
        """
        while True:
            admission = ADMISSION[self.status]
            if admission is Admission.SERVE:
                return
            if admission is Admission.REJECT:
                raise self.not_ready(what)
            if len(self._waiters) >= self._max_waiting:
                raise ServiceNotReady(
                    f"{self._describe} cannot {what}: pending ack is recovering and "
                    f"{len(self._waiters)} requests wait already"
                )
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def not_ready(self, what: str) -> BrokerError:
        """The error for a request the current state refuses (Pulsar's wording)."""
        if self.status is PendingAckHandleState.ERROR:
            why = "PendingAckHandle not replay error!"
        elif self.status is PendingAckHandleState.CLOSED:
            why = "PendingAckHandle have been closed"
        else:
            why = f"PendingAckHandle is {self.status.value}"
        return ServiceNotReady(f"{self._describe} cannot {what}: {why}")
