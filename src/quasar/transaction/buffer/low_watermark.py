"""Aborting orphans: ongoing transactions that their coordinator says have ended.

A coordinator's low watermark (sent with every end) says every one of its
transactions at or below it has ended. An ongoing transaction here that it covers
never got its end on this partition (the coordinator did not know the partition took
part, or the end was lost while the topic moved); left alone it would hold the max
read position forever. The buffer aborts it locally by writing an abort marker.

Pulsar looks only at the oldest ongoing transaction per trigger; this cleaner aborts
every covered one, so a partition is never held by an orphan behind another
coordinator's live transaction. One cleanup runs at a time (Pulsar's semaphore);
triggers that arrive meanwhile make it look again. A failure is logged and the next
trigger retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from quasar.protocol.txn_id import TxnID

log = logging.getLogger(__name__)


class LowWatermarkCleaner:
    def __init__(
        self,
        topic: str,
        orphans: Callable[[], list[TxnID]],
        abort: Callable[[TxnID], Awaitable[None]],
        active: Callable[[], bool],
    ) -> None:
        self._topic = topic
        self._orphans = orphans
        self._abort = abort
        self._active = active
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self.aborted_count = 0

    def trigger(self) -> None:
        """Look for orphans (after a low watermark moved or an entry was applied)."""
        if not self._active():
            return
        if self._task is not None and not self._task.done():
            self._again = True
            return
        if self._orphans():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._active():
            self._again = False
            orphans = self._orphans()
            if not orphans:
                if self._again:
                    continue
                return
            results = await asyncio.gather(
                *(self._abort(t) for t in orphans), return_exceptions=True
            )
            failed = [r for r in results if isinstance(r, BaseException)]
            self.aborted_count += len(orphans) - len(failed)
            log.info(
                "%s: aborted %d transactions below their low watermark",
                self._topic, len(orphans) - len(failed),
            )
            if failed:
                log.warning("%s: low-watermark abort failed: %r", self._topic, failed[0])
                return

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
