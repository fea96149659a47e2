"""``Periodic``: a broker check that runs every so many seconds until stopped.

Message expiry and backlog-quota checks run this way. A failed run is logged and the
next one runs on time: one bad topic must not stop the check for every topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

__all__ = ["Periodic"]


class Periodic:
    """Runs ``run()`` every ``interval_s`` seconds between ``start`` and ``stop``."""

    def __init__(
        self, what: str, interval_s: float, run: Callable[[], Awaitable[object]]
    ) -> None:
        self._what = what
        self._interval_s = interval_s
        self._run = run
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start the loop (a no-op when it runs); needs a running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop the loop; a run in progress is cancelled."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self._run()
            except Exception:
                log.exception("%s failed", self._what)
