"""What the dispatcher, the normal-ack path and admin read from the handle."""

from __future__ import annotations

import asyncio

from quasar.storage.api import Position
from quasar.transaction.pending_ack import NormalAck

from .helpers import T1, T2, PaEnv, batch_ack_set, individual


async def test_dispatcher_checks(pa: PaEnv) -> None:
    whole, batch, free = pa.p(1), pa.p(2), pa.p(3)
    await pa.handle.individual_ack(T1, [(whole, None, None), (batch, 4, batch_ack_set(4, {0}))])
    await pa.handle.individual_ack(T2, [(batch, 4, batch_ack_set(4, {3}))])
    assert pa.handle.is_pending(whole) and not pa.handle.is_pending(batch)
    assert not pa.handle.is_pending(free)
    assert pa.handle.pending_ack_set(whole) == []
    assert pa.handle.pending_ack_set(batch) == batch_ack_set(4, {0, 3})
    assert pa.handle.pending_ack_set(free) is None
    assert pa.handle.pending_positions() == [whole, batch]
    # Every member pending, across transactions: the entry is not delivered at all.
    await pa.handle.individual_ack(T2, [(batch, 4, batch_ack_set(4, {1, 2}))])
    assert pa.handle.is_pending(batch) and pa.handle.pending_ack_set(batch) == []


async def test_normal_acks_of_pending_entries(pa: PaEnv) -> None:
    whole, batch, free = pa.p(1), pa.p(2), pa.p(3)
    await pa.handle.individual_ack(T1, [(whole, None, None), (batch, 4, batch_ack_set(4, {0}))])
    assert pa.handle.filter_normal_ack(whole, None) == NormalAck(False, None)
    assert pa.handle.filter_normal_ack(free, None) == NormalAck(True, None)
    assert pa.handle.filter_normal_ack(free, [0b10]) == NormalAck(True, [0b10])
    # A whole-entry normal ack keeps the transaction's member unacked on the cursor.
    assert pa.handle.filter_normal_ack(batch, None) == NormalAck(True, batch_ack_set(4, {1, 2, 3}))
    # A normal ack of members 2 and 3 only: 1 stays unacked too.
    assert pa.handle.filter_normal_ack(batch, batch_ack_set(4, {2, 3})) == NormalAck(
        True, batch_ack_set(4, {2, 3})
    )
    # Applying it and committing T1 acknowledges the whole entry.
    pa.cursor.set_batch_ack(batch, batch_ack_set(4, {1, 2, 3}))
    await pa.handle.commit(T1, -1)
    assert pa.cursor.is_acknowledged(batch)


async def test_position_stats(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, [(pa.p(2), 4, batch_ack_set(4, {1}))])
    pa.cursor.set_batch_ack(pa.p(2), batch_ack_set(4, {0}))
    pa.cursor.delete([pa.p(0)])

    def state(p: Position, index: int | None = None) -> object:
        return pa.handle.position_stats(p, index)["state"]

    assert state(pa.p(0)) == "MarkDelete"
    assert state(pa.p(2)) == "PendingAck"
    assert state(pa.p(2), 0) == "MarkDelete"
    assert state(pa.p(2), 1) == "PendingAck"
    assert state(pa.p(2), 2) == "NotInPendingAck"
    assert state(pa.p(3)) == "NotInPendingAck"
    assert state(Position(-1, 0)) == "InvalidPosition"


async def test_stats_shapes(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 1))
    stats = pa.handle.stats()
    assert {"state", "lowWaterMarks", "ongoingTxnSize"} <= set(stats)
    assert stats["state"] == "Ready" and stats["ongoingTxnSize"] == 1
    assert pa.handle.transaction_stats(T1) == {"cumulativeAckPosition": None}
    internal = pa.handle.internal_stats()["pendingAckLogStats"]
    assert internal["numberOfEntries"] == 1  # type: ignore[index]
    assert internal["cursor"]["name"] == "__pending_ack_state"  # type: ignore[index]
    assert repr(pa.handle).endswith("Ready)")


async def test_a_cancelled_caller_does_not_stop_an_end(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0))
    ack = asyncio.ensure_future(pa.handle.individual_ack(T2, individual(pa, 1)))
    commit = asyncio.ensure_future(pa.handle.commit(T1, -1))
    await asyncio.sleep(0)
    ack.cancel()
    commit.cancel()
    await pa.settle()
    # Both records were durable and applied; only the answers were dropped.
    assert pa.cursor.is_acknowledged(pa.p(0))
    assert pa.handle.is_pending(pa.p(1))
    assert pa.handle.log.cursor.mark_delete_position < pa.log_ledger.last_confirmed_entry
