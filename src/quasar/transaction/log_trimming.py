"""Trimming a transaction log (coordinator or pending-ack) behind its cursor.

Both logs delete records by acknowledging them on the log's own durable cursor; the
ledgers the cursor has left behind can then be deleted. Trimming pays off only once the
cursor has moved past the first ledger, runs as one background task at a time, and
persists the cursor first, so replay never starts inside a deleted ledger.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from quasar.storage.api import ManagedCursor, ManagedLedger

log = logging.getLogger(__name__)


class LogTrimmer:
    def __init__(
        self, ledger: ManagedLedger, cursor: Callable[[], ManagedCursor], what: str
    ) -> None:
        self._ledger = ledger
        self._cursor = cursor
        self._what = what
        self._task: asyncio.Task[None] | None = None

    def maybe_trim(self) -> None:
        ledgers = self._ledger.ledgers()
        if not ledgers or self._task is not None:
            return
        next_unacked = self._ledger.next_position(self._cursor().mark_delete_position)
        if next_unacked.ledger_id <= ledgers[0].ledger_id:
            return
        self._task = asyncio.get_running_loop().create_task(self._trim())

    async def _trim(self) -> None:
        try:
            await self._cursor().flush()
            await self._ledger.trim_consumed_ledgers()
        except Exception:
            log.warning(
                "%s: trimming the %s failed", self._ledger.name, self._what, exc_info=True
            )
        finally:
            self._task = None

    async def wait(self) -> None:
        """Wait for a trim in progress, if any (tests, shutdown)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
