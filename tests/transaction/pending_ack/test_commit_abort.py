"""Commit applies acks to the cursor durably; abort hands them back; ends are
idempotent."""

from __future__ import annotations

import asyncio

import pytest

from quasar.errors import MetadataError, ServiceNotReady
from quasar.storage.api import Position
from quasar.transaction import TxnAction, TxnID
from quasar.transaction.pending_ack import (
    AbortResult,
    CommitResult,
    PendingAckHandleState,
    PendingAckOp,
    decode_entry,
)

from ..helpers import FailingLedger
from .helpers import T1, T2, T3, PaEnv, batch_ack_set, individual


async def ops(env: PaEnv) -> list[tuple[PendingAckOp, TxnID]]:
    """Every record in the log, deleted ones too."""
    ml = env.log_ledger
    out: list[tuple[PendingAckOp, TxnID]] = []
    for e in await ml.read_entries(ml.first_position, 10_000):
        out.extend((r.op, r.txn_id) for r in decode_entry(e.data))
    return out


# ---------------------------------------------------------------------------- commit


async def test_commit_applies_individual_acks(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0, 1, 5))
    assert not pa.cursor.is_acknowledged(pa.p(0))  # pending is not acked
    result = await pa.handle.commit(T1, -1)
    assert result == CommitResult(acked=(pa.p(0), pa.p(1), pa.p(5)))
    assert pa.cursor.mark_delete_position == pa.p(1)
    assert pa.cursor.is_acknowledged(pa.p(5))
    assert pa.handle.pending_positions() == []
    assert await ops(pa) == [(PendingAckOp.ACK, T1), (PendingAckOp.COMMIT, T1)]
    stats = pa.handle.stats()
    assert stats["committedCount"] == 1 and stats["ongoingTxnSize"] == 0
    assert sum(stats["commitLatencyMs"].values()) == 1  # type: ignore[attr-defined]


async def test_commit_merges_batch_acks_with_the_cursor(pa: PaEnv) -> None:
    p, q = pa.p(2), pa.p(3)
    pa.cursor.set_batch_ack(p, batch_ack_set(8, {0}))  # a normal ack of member 0
    await pa.handle.individual_ack(T1, [(p, 8, batch_ack_set(8, {1, 2})),
                                        (q, 8, batch_ack_set(8, {7}))])
    await pa.handle.individual_ack(T2, [(p, 8, batch_ack_set(8, {3, 4, 5, 6, 7}))])
    result = await pa.handle.commit(T1, -1)
    assert result == CommitResult(batch_acked=(p, q))
    assert pa.cursor.batch_ack_set(p) == batch_ack_set(8, {0, 1, 2})
    assert pa.cursor.batch_ack_set(q) == batch_ack_set(8, {7})
    # The last members: the entry is deleted, not left with an empty ack set.
    assert await pa.handle.commit(T2, -1) == CommitResult(acked=(p,))
    assert pa.cursor.is_acknowledged(p) and pa.cursor.batch_ack_set(p) is None


async def test_commit_of_a_cumulative_ack_moves_mark_delete(pa: PaEnv) -> None:
    await pa.handle.cumulative_ack(T1, pa.p(4))
    await pa.handle.cumulative_ack(T1, pa.p(7))
    assert pa.handle.position_stats(pa.p(6)) == {"state": "PendingAck"}
    result = await pa.handle.commit(T1, -1)
    assert result == CommitResult(mark_delete=pa.p(7))
    assert pa.cursor.mark_delete_position == pa.p(7)
    assert pa.handle.stats()["cumulativeAck"] is None
    assert pa.handle.position_stats(pa.p(6)) == {"state": "MarkDelete"}


async def test_commit_flushes_the_cursor_before_answering(pa: PaEnv) -> None:
    flushed: list[Position] = []
    real_flush = pa.cursor.flush

    async def flush() -> None:
        flushed.append(pa.cursor.mark_delete_position)
        await real_flush()

    pa.cursor.flush = flush  # type: ignore[method-assign]
    await pa.handle.individual_ack(T1, individual(pa, 0))
    await pa.handle.commit(T1, -1)
    assert flushed == [pa.p(0)]  # flushed with the ack applied


async def test_a_failed_flush_is_retried_and_the_commit_repeats(pa: PaEnv) -> None:
    real_flush = pa.cursor.flush
    failures = [MetadataError("metadata store down")]

    async def flush() -> None:
        if failures:
            raise failures.pop()
        await real_flush()

    pa.cursor.flush = flush  # type: ignore[method-assign]
    await pa.handle.individual_ack(T1, individual(pa, 0))
    with pytest.raises(MetadataError):
        await pa.handle.commit(T1, -1)
    # The acks are applied in memory; the log keeps the records until durable.
    assert pa.cursor.is_acknowledged(pa.p(0))
    assert pa.handle.log.cursor.mark_delete_position < pa.log_ledger.last_confirmed_entry
    # The coordinator retries the end: it only flushes, and answers the first result.
    assert await pa.handle.commit(T1, -1) == CommitResult(acked=(pa.p(0),))
    await pa.settle()
    assert pa.handle.log.cursor.mark_delete_position == pa.log_ledger.last_confirmed_entry
    assert await ops(pa) == [(PendingAckOp.ACK, T1), (PendingAckOp.COMMIT, T1)]


async def test_a_failed_flush_is_retried_by_the_handle_too(pa: PaEnv) -> None:
    real_flush = pa.cursor.flush
    failures = [MetadataError("down")]

    async def flush() -> None:
        if failures:
            raise failures.pop()
        await real_flush()

    pa.cursor.flush = flush  # type: ignore[method-assign]
    await pa.handle.individual_ack(T1, individual(pa, 0))
    with pytest.raises(MetadataError):
        await pa.handle.commit(T1, -1)
    await pa.sched.advance(pa.config.cursor_flush_retry_interval_ms)
    assert pa.handle.log.cursor.mark_delete_position == pa.log_ledger.last_confirmed_entry


async def test_a_cursor_taken_by_another_owner_fences_the_handle(pa: PaEnv) -> None:
    from quasar.errors import BadVersion

    async def flush() -> None:
        raise BadVersion("cursor written by someone else")

    pa.cursor.flush = flush  # type: ignore[method-assign]
    await pa.handle.individual_ack(T1, individual(pa, 0))
    with pytest.raises(ServiceNotReady):
        await pa.handle.commit(T1, -1)
    assert pa.handle.state is PendingAckHandleState.ERROR
    assert pa.fenced == [pa.handle]
    with pytest.raises(ServiceNotReady, match="not replay error"):
        await pa.handle.individual_ack(T2, individual(pa, 3))


# ---------------------------------------------------------------------------- abort


async def test_abort_returns_positions_for_redelivery(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 5, 1))
    await pa.handle.individual_ack(T1, [(pa.p(3), 4, batch_ack_set(4, {1}))])
    result = await pa.handle.abort(T1, -1)
    # Entry 3 was held by batch index: only member 1 (bit 1 set) is released.
    assert result == AbortResult(
        positions=(pa.p(1), pa.p(3), pa.p(5)), batch_members=((pa.p(3), (0b10,)),)
    )
    assert pa.cursor.mark_delete_position < pa.p(0)  # nothing acked
    assert pa.handle.pending_positions() == []
    await pa.handle.individual_ack(T2, individual(pa, 5, 1))  # re-ackable
    assert pa.handle.stats()["abortedCount"] == 1


async def test_abort_of_batch_members_leaves_other_transactions_members(pa: PaEnv) -> None:
    p = pa.p(2)
    await pa.handle.individual_ack(T1, [(p, 6, batch_ack_set(6, {0, 1}))])
    await pa.handle.individual_ack(T2, [(p, 6, batch_ack_set(6, {2}))])
    # Only T2's member comes again (#14327): the result names it, and the dispatcher
    # also filters out what the cursor or T1 holds.
    assert await pa.handle.abort(T2, -1) == AbortResult(
        positions=(p,), batch_members=((p, (0b100,)),)
    )
    assert pa.handle.pending_ack_set(p) == batch_ack_set(6, {0, 1})


async def test_abort_of_a_cumulative_ack(pa: PaEnv) -> None:
    await pa.handle.cumulative_ack(T1, pa.p(6))
    assert await pa.handle.abort(T1, -1) == AbortResult(cumulative_position=pa.p(6))
    assert pa.cursor.mark_delete_position < pa.p(0)
    await pa.handle.cumulative_ack(T2, pa.p(3))


# ---------------------------------------------------------------------------- idempotence


async def test_ends_are_idempotent(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0))
    await pa.handle.individual_ack(T2, individual(pa, 1))
    await pa.handle.commit(T1, -1)
    await pa.handle.abort(T2, -1)
    records = pa.log_ledger.number_of_entries
    assert await pa.handle.commit(T1, -1) == CommitResult()
    assert await pa.handle.abort(T2, -1) == AbortResult()
    assert pa.log_ledger.number_of_entries == records  # no record for a repeat
    # A transaction that never acked here ends without a record too.
    assert await pa.handle.end_txn(T3, TxnAction.COMMIT, -1) == CommitResult()
    assert pa.log_ledger.number_of_entries == records
    assert pa.cursor.mark_delete_position == pa.p(0)


async def test_concurrent_repeats_join_one_end(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0))
    first, second = await asyncio.gather(pa.handle.commit(T1, -1), pa.handle.commit(T1, -1))
    assert first == second == CommitResult(acked=(pa.p(0),))
    assert [op for op, _ in await ops(pa)].count(PendingAckOp.COMMIT) == 1


async def test_the_opposite_end_is_answered_but_counted(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0))
    await pa.handle.commit(T1, -1)
    assert await pa.handle.abort(T1, -1) == AbortResult()
    assert pa.cursor.is_acknowledged(pa.p(0))  # a commit is never undone
    assert pa.handle.stats()["contradictingEndCount"] == 1


async def test_an_end_waits_for_acks_in_flight(pa: PaEnv) -> None:
    # The client committed without waiting for its ack's answer: the COMMIT record
    # follows the ACK record in the log, so the ack is committed, not leaked.
    ack = asyncio.ensure_future(pa.handle.individual_ack(T1, individual(pa, 4)))
    await asyncio.sleep(0)
    assert pa.handle.pending_state.get(T1) is None  # appended, not durable yet
    result = await pa.handle.commit(T1, -1)
    await ack
    assert result == CommitResult(acked=(pa.p(4),))
    assert pa.handle.pending_positions() == []


# ---------------------------------------------------------------------------- log failures


async def test_a_failed_log_append_fences_the_handle() -> None:
    env = PaEnv()
    await env.open_ledgers()
    failing = FailingLedger(env.log_ledger)
    env._log = failing  # type: ignore[assignment]
    await env.start()
    try:
        await env.handle.individual_ack(T1, individual(env, 0))
        failing.failing = True
        with pytest.raises(ServiceNotReady) as info:
            await env.handle.individual_ack(T2, individual(env, 1))
        assert info.value.retryable
        assert env.handle.state is PendingAckHandleState.ERROR
        assert env.fenced == [env.handle]
        with pytest.raises(ServiceNotReady):
            await env.handle.commit(T1, -1)
        # A fresh handle decides from the log what really happened.
        failing.failing = False
        env._log = failing._inner  # type: ignore[assignment]
        handle = await env.restart()
        assert handle.pending_positions() == [env.p(0)]
        await handle.commit(T1, -1)
        assert env.cursor.is_acknowledged(env.p(0))
    finally:
        await env.close()


async def test_close_refuses_requests_and_is_idempotent(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0))
    await pa.handle.close()
    await pa.handle.close()
    assert pa.handle.state is PendingAckHandleState.CLOSED
    with pytest.raises(ServiceNotReady, match="have been closed"):
        await pa.handle.commit(T1, -1)
