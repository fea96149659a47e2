"""Low watermarks: what each coordinator says has certainly ended, and the cleanup of
pending acks it has forgotten.

Every end call carries its coordinator's low watermark: every transaction of that
coordinator whose least bits are ``<=`` it has ended (``-1``: none has). A pending-ack
handle keeps the highest value seen per coordinator (it only goes up) and uses it
twice:

* an ack of a transaction at or below it is refused (a zombie: Pulsar issues #9722 and #15530);
* after each end, transactions at or below it still pending here are aborted
  locally. Their coordinator finished them without this subscription (the end was
  lost with an unloaded topic, or the ack arrived after the end), so no end will ever
  come. Pulsar aborts only the oldest such transaction per trigger; quasar aborts all
  of them, one at a time, in one background task (a trigger while it runs makes it go
  round once more).

The watermarks are not persisted: after a restart they come back with the next ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from quasar.protocol.txn_id import TxnID

from .results import AbortResult

log = logging.getLogger(__name__)


class LowWatermarks:
    """Per-coordinator low watermarks and the cleanup task that acts on them."""

    def __init__(
        self,
        describe: str,
        *,
        candidates: Callable[[], Iterable[TxnID]],
        abort: Callable[[TxnID], Awaitable[AbortResult]],
        serving: Callable[[], bool],
        on_abort: Callable[[TxnID, AbortResult], None],
    ) -> None:
        self._describe = describe
        self._marks: dict[int, int] = {}
        self._candidates = candidates
        self._abort = abort
        self._serving = serving
        self._on_abort = on_abort
        self._task: asyncio.Task[None] | None = None
        self._again = False

    def merge(self, tc_id: int, low_watermark: int) -> None:
        """Take a coordinator's low watermark; lower or negative values change nothing."""
        if low_watermark > self._marks.get(tc_id, -1):
            self._marks[tc_id] = low_watermark

    def covers(self, txn_id: TxnID) -> bool:
        """True if the transaction's coordinator says it has ended."""
        return txn_id.least_bits <= self._marks.get(txn_id.most_bits, -1)

    def view(self) -> dict[int, int]:
        return dict(self._marks)

    def schedule(self) -> None:
        """Run the cleanup (soon), or once more if it is running."""
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait(self) -> None:
        """Wait for a cleanup in progress (tests, shutdown)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            self._again = False
            for txn_id in [t for t in self._candidates() if self.covers(t)]:
                if not self._serving():
                    return
                try:
                    result = await self._abort(txn_id)
                except Exception:
                    log.warning("%s: low-watermark abort of %s failed",
                                self._describe, txn_id, exc_info=True)
                    continue
                log.info("%s: aborted %s: its coordinator's low watermark is %d",
                         self._describe, txn_id, self._marks.get(txn_id.most_bits, -1))
                self._on_abort(txn_id, result)
            if not self._again:
                return
