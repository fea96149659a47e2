"""Recovery: replay rebuilds the pending state, re-applies commits, and gates requests.
Scenarios follow Pulsar's PendingAckPersistentTest."""

from __future__ import annotations

import asyncio

import pytest

from quasar.errors import (
    CorruptRecordError,
    PreconditionFailedError,
    ServiceNotReady,
    TransactionConflict,
)
from quasar.transaction import TxnID
from quasar.transaction.batched_log.set_aside import set_aside
from quasar.transaction.pending_ack import (
    AckType,
    PendingAckConfig,
    PendingAckHandleState,
    PendingAckOp,
    PendingAckRecord,
)
from quasar.transaction.pending_ack.log import CURSOR_NAME
from quasar.transaction.pending_ack.records import decode_entry, encode_record

from .helpers import T1, T2, T3, PaEnv, batch_ack_set, individual


async def test_individual_pending_ack_replay(pa: PaEnv) -> None:
    abort_txn, commit_txn = T1, T2
    await pa.handle.individual_ack(abort_txn, individual(pa, *range(0, 10, 2)))
    await pa.handle.individual_ack(
        abort_txn, [(pa.p(11), 4, batch_ack_set(4, {0, 1}))]
    )
    handle = await pa.restart()
    # The pending half conflicts after replay; the other half acks fine.
    with pytest.raises(TransactionConflict, match="in pending ack status"):
        await handle.individual_ack(commit_txn, individual(pa, 2))
    with pytest.raises(TransactionConflict, match="batchIndex:1 in pending ack status"):
        await handle.individual_ack(commit_txn, [(pa.p(11), 4, batch_ack_set(4, {1, 2}))])
    await handle.individual_ack(commit_txn, individual(pa, *range(1, 10, 2)))
    await handle.individual_ack(commit_txn, [(pa.p(11), 4, batch_ack_set(4, {2, 3}))])
    await handle.commit(commit_txn, -1)
    await handle.abort(abort_txn, -1)
    handle = await pa.restart()
    # Committed ids conflict as acked; aborted ids can be acked again.
    with pytest.raises(TransactionConflict, match="already acked before"):
        await handle.individual_ack(T3, individual(pa, 3))
    with pytest.raises(TransactionConflict, match="batchIndex:2 already acked before"):
        await handle.individual_ack(T3, [(pa.p(11), 4, batch_ack_set(4, {2}))])
    await handle.individual_ack(T3, individual(pa, *range(0, 10, 2)))
    await handle.individual_ack(T3, [(pa.p(11), 4, batch_ack_set(4, {0, 1}))])
    await handle.commit(T3, -1)
    assert pa.cursor.mark_delete_position == pa.p(9)
    assert pa.cursor.is_acknowledged(pa.p(11))
    # And the log is clean: its cursor reached the last record.
    assert handle.log.cursor.mark_delete_position == pa.log_ledger.last_confirmed_entry


async def test_cumulative_pending_ack_replay(pa: PaEnv) -> None:
    abort_txn, commit_txn = T1, T2
    for i in range(10):
        await pa.handle.cumulative_ack(abort_txn, pa.p(i))
    handle = await pa.restart()
    assert handle.transaction_stats(abort_txn) == {"cumulativeAckPosition": str(pa.p(9))}
    with pytest.raises(TransactionConflict, match="holds a pending cumulative ack"):
        await handle.cumulative_ack(commit_txn, pa.p(3))
    await handle.abort(abort_txn, -1)
    await handle.cumulative_ack(commit_txn, pa.p(12))
    await handle.commit(commit_txn, -1)
    handle = await pa.restart()
    for i in (5, 12):
        with pytest.raises(TransactionConflict, match="markDeletePosition"):
            await handle.cumulative_ack(T3, pa.p(i))
    assert handle.log.cursor.mark_delete_position == pa.log_ledger.last_confirmed_entry


async def test_commit_record_without_cursor_update_is_reapplied(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 3, 4, 8))
    await pa.handle.individual_ack(T1, [(pa.p(6), 3, batch_ack_set(3, {2}))])
    await pa.handle.cumulative_ack(T2, pa.p(2))
    await pa.handle.close()
    # As if the broker died right after the COMMIT records became durable.
    for txn, ack_type in ((T1, AckType.INDIVIDUAL), (T2, AckType.CUMULATIVE)):
        await pa.log_ledger.add_entry(
            encode_record(PendingAckRecord(PendingAckOp.COMMIT, ack_type, txn))
        )
    assert not pa.cursor.is_acknowledged(pa.p(0))
    handle = await pa.start()
    assert pa.cursor.mark_delete_position == pa.p(4)
    assert pa.cursor.is_acknowledged(pa.p(8))
    assert pa.cursor.batch_ack_set(pa.p(6)) == batch_ack_set(3, {2})
    assert handle.pending_state.txn_count == 0
    # Repeated ends from the coordinator's re-drive are no-ops now.
    await handle.commit(T1, -1)
    await handle.commit(T2, -1)
    assert handle.log.cursor.mark_delete_position == pa.log_ledger.last_confirmed_entry


async def test_replayed_acks_below_mark_delete_are_not_resurrected(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0, 1, 8))
    pa.cursor.mark_delete(pa.p(4))  # e.g. a normal cumulative ack passed them
    handle = await pa.restart()
    assert handle.pending_positions() == []  # the whole record is refused on replay
    assert await handle.commit(T1, -1) is not None
    assert not pa.cursor.is_acknowledged(pa.p(8))


async def test_recovery_is_equivalent_to_the_live_state(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 2, 3))
    await pa.handle.individual_ack(T2, [(pa.p(5), 9, batch_ack_set(9, {1, 8}))])
    await pa.handle.individual_ack(T3, [(pa.p(5), 9, batch_ack_set(9, {0}))])
    await pa.handle.cumulative_ack(TxnID(0, 4), pa.p(1))
    await pa.handle.abort(T3, -1)
    live = snapshot(pa)
    await pa.restart()
    assert snapshot(pa) == live


def snapshot(env: PaEnv) -> object:
    state = env.handle.pending_state
    return (
        [(t, dict(a.individual), a.cumulative) for t, a in state.txns()],
        {p: dict(state.position(p).owners) for p in state.positions()},  # type: ignore[union-attr]
        state.cumulative,
    )


# ---------------------------------------------------------------------------- gating


async def test_requests_wait_for_recovery() -> None:
    env = PaEnv()
    await env.open_ledgers()
    handle = env.new_handle()
    assert handle.state is PendingAckHandleState.NONE
    early = asyncio.ensure_future(handle.individual_ack(T1, individual(env, 0)))
    await asyncio.sleep(0)
    assert not early.done() and handle.waiting_requests == 1
    assert handle.position_stats(env.p(0)) == {"state": "PendingAckNotReady"}
    await handle.recover()
    await early
    assert handle.is_pending(env.p(0))
    await env.close()


async def test_waiting_requests_are_bounded() -> None:
    env = PaEnv(config=PendingAckConfig(max_waiting_requests=1))
    await env.open_ledgers()
    handle = env.new_handle()
    early = asyncio.ensure_future(handle.individual_ack(T1, individual(env, 0)))
    await asyncio.sleep(0)
    with pytest.raises(ServiceNotReady, match="1 requests wait already") as info:
        await handle.commit(T2, -1)
    assert info.value.retryable
    await handle.close()  # the waiter is refused, not left hanging
    with pytest.raises(ServiceNotReady, match="have been closed"):
        await early
    await env.close()


async def test_an_unreadable_log_fails_recovery(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0))
    await pa.handle.close()
    await pa.log_ledger.add_entry(b"\xff\xfe garbage")
    handle = pa.new_handle()
    waiting = asyncio.ensure_future(handle.individual_ack(T2, individual(pa, 1)))
    await asyncio.sleep(0)
    with pytest.raises(CorruptRecordError):
        await handle.recover()
    assert handle.state is PendingAckHandleState.ERROR
    with pytest.raises(ServiceNotReady, match="not replay error"):
        await waiting
    with pytest.raises(ServiceNotReady):
        await handle.abort(T1, -1)
    assert pa.fenced == []  # recover() raised to its caller; nothing to report twice


async def test_an_unreadable_entry_set_aside_is_skipped_by_every_later_recovery(
    pa: PaEnv,
) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0))
    await pa.handle.close()
    bad = await pa.log_ledger.add_entry(b"\x0e\x01\x00\x07garbage")
    handle = pa.new_handle()
    with pytest.raises(CorruptRecordError) as info:
        await handle.recover()
    assert info.value.position == str(bad)
    assert info.value.log_name == pa.log_ledger.name
    assert f"at {bad} cannot be read: unknown batched log entry version 7" in str(info.value)

    with pytest.raises(PreconditionFailedError, match="readable"):
        await set_aside(pa.log_ledger, CURSOR_NAME, pa.log_ledger.first_position,
                        decode_entry)
    assert await set_aside(pa.log_ledger, CURSOR_NAME, bad, decode_entry) == (
        b"\x0e\x01\x00\x07garbage"
    )
    with pytest.raises(PreconditionFailedError, match="already"):
        await set_aside(pa.log_ledger, CURSOR_NAME, bad, decode_entry)
    handle = await pa.restart()
    # The ACK before the entry is still pending: nothing else was skipped.
    assert handle.is_pending(pa.p(0))


async def test_recover_twice_is_a_bug(pa: PaEnv) -> None:
    from quasar.transaction.pending_ack import IllegalHandleTransition

    with pytest.raises(IllegalHandleTransition):
        await pa.handle.recover()
