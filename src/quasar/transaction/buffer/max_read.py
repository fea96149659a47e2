"""Telling dispatchers that the max read position moved (no polling, no spinning).

A dispatcher whose read position has caught up with the max read position parks:
either it registers a listener once (the broker's topic wakes its subscriptions from
it) or it awaits ``wait_beyond``. Both fire when the position moves forward,
including the jump from ``EARLIEST`` when recovery finishes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from quasar.errors import BrokerError
from quasar.storage.api import Position

log = logging.getLogger(__name__)


class MaxReadWatch:
    """Listeners and waiters of one buffer's max read position."""

    def __init__(self, topic: str) -> None:
        self._topic = topic
        self._listeners: list[Callable[[Position], None]] = []
        self._waiters: list[tuple[Position, asyncio.Future[Position]]] = []

    def add_listener(self, listener: Callable[[Position], None]) -> Callable[[], None]:
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    async def wait_beyond(self, beyond: Position) -> Position:
        """Wait for a ``notify`` with a position after ``beyond`` (caller checked the
        current one). Raises what ``close`` is given."""
        fut: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self._waiters.append((beyond, fut))
        try:
            return await fut
        finally:
            self._waiters = [(b, f) for b, f in self._waiters if f is not fut]

    def notify(self, position: Position) -> None:
        for listener in list(self._listeners):
            try:
                listener(position)
            except Exception:
                log.exception("%s: max read position listener failed", self._topic)
        for beyond, fut in self._waiters:
            if position > beyond and not fut.done():
                fut.set_result(position)

    def close(self, error: BrokerError) -> None:
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(error)
