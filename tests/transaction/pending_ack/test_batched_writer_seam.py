"""The PIP-160 seam: a writer that puts several records in one entry works with
everything above it (apply order, replay, log release), and both layouts replay."""

from __future__ import annotations

import asyncio

from quasar.storage.api import ManagedLedger, Position
from quasar.transaction.pending_ack import (
    CommitResult,
    PendingAckHandle,
    PendingAckRecord,
)
from quasar.transaction.pending_ack.records import encode_batch

from .helpers import SUB, T1, T2, TOPIC, PaEnv, individual


class BatchingWriter:
    """Buffers records until ``flush()``, then appends them as one batched entry."""

    def __init__(self, ledger: ManagedLedger) -> None:
        self._ledger = ledger
        self._buffer: list[tuple[PendingAckRecord, asyncio.Future[Position]]] = []

    def append(self, record: PendingAckRecord) -> asyncio.Future[Position]:
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self._buffer.append((record, future))
        return future

    async def flush(self, records: int) -> None:
        """Wait until ``records`` records are buffered, then write them as one entry."""
        while len(self._buffer) < records:
            await asyncio.sleep(0)
        batch, self._buffer = self._buffer, []
        position = await self._ledger.add_entry(encode_batch([r for r, _ in batch]))
        for _, future in batch:  # in write order, as the seam requires
            future.set_result(position)


async def test_batched_entries_through_the_seam(pa: PaEnv) -> None:
    await pa.handle.close()
    writer = BatchingWriter(pa.log_ledger)
    handle = PendingAckHandle(
        pa.cursor, pa.log_ledger, TOPIC, SUB, pa.clock, pa.sched, writer=writer
    )
    await handle.recover()
    first = asyncio.ensure_future(handle.individual_ack(T1, individual(pa, 0)))
    second = asyncio.ensure_future(handle.individual_ack(T2, individual(pa, 1)))
    await writer.flush(2)
    await asyncio.gather(first, second)
    assert pa.log_ledger.number_of_entries == 1
    commit = asyncio.ensure_future(handle.commit(T1, -1))
    await writer.flush(1)
    assert await commit == CommitResult(acked=(pa.p(0),))
    # T2's record shares the first entry: the log keeps it.
    assert handle.log.cursor.mark_delete_position < pa.log_ledger.first_position
    await handle.close()
    # A plain handle replays the batched entries.
    restarted = await pa.start()
    assert restarted.pending_positions() == [pa.p(1)]
    assert pa.cursor.is_acknowledged(pa.p(0))
    await restarted.abort(T2, -1)
    assert restarted.log.cursor.mark_delete_position == pa.log_ledger.last_confirmed_entry
