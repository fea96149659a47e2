"""The first snapshot of a topic, and the transactional appends that wait for it.

Recovery skips the replay when a topic has no snapshot, which is only safe if no
transactional entry can exist without one. So the first snapshot is written before
the first transactional entry: normally when a transactional producer connects
(``check_if_recovered``), otherwise by the first transactional append itself, which
then waits here. Appends that arrive while the snapshot is written queue up and are
admitted synchronously, in arrival order, once it is durable, so they keep their
order and nothing slips in between them. (A plain append made meanwhile by the same
producer is not held and may land first; brokers avoid this by calling
``check_if_recovered`` when a transactional producer connects.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from quasar.protocol.txn_id import TxnID
from quasar.storage.api import Position


def chain(inner: asyncio.Future[Position], outer: asyncio.Future[Position]) -> None:
    """Complete ``outer`` the way ``inner`` completes."""

    def done(f: asyncio.Future[Position]) -> None:
        if outer.done():
            return
        if f.cancelled():
            outer.cancel()
        elif (exc := f.exception()) is not None:
            outer.set_exception(exc)
        else:
            outer.set_result(f.result())

    inner.add_done_callback(done)


class FirstSnapshotGate:
    """Writes the first snapshot once; queued appends go through when it is durable.

    * ``write``: writes the snapshot (raises on failure);
    * ``finish(error)``: called once the write ended, before the queue drains; the
      buffer leaves NO_SNAPSHOT there and returns the error to fail the queue with
      (the write's, or its own if it closed meanwhile), or ``None``;
    * ``admit(txn, data)``: appends one queued entry now (checks it again first).
    """

    def __init__(
        self,
        write: Callable[[], Awaitable[None]],
        finish: Callable[[BaseException | None], BaseException | None],
        admit: Callable[[TxnID, bytes], asyncio.Future[Position]],
    ) -> None:
        loop = asyncio.get_running_loop()
        self._queued: list[tuple[TxnID, bytes, asyncio.Future[Position]]] = []
        self._write = write
        self._finish = finish
        self._admit = admit
        self.done: asyncio.Future[None] = loop.create_future()
        # The error also reaches whoever awaits ``done``; nobody may be.
        self.done.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._task = loop.create_task(self._run())

    def enqueue(self, txn: TxnID, data: bytes) -> asyncio.Future[Position]:
        outer: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self._queued.append((txn, data, outer))
        return outer

    async def _run(self) -> None:
        error: BaseException | None = None
        try:
            await self._write()
        except Exception as exc:
            error = exc
        error = self._finish(error)
        for txn, data, outer in self._queued:
            if outer.done():
                continue
            if error is not None:
                outer.set_exception(error)
            else:
                chain(self._admit(txn, data), outer)
        self._queued.clear()
        if error is None:
            self.done.set_result(None)
        else:
            self.done.set_exception(error)
