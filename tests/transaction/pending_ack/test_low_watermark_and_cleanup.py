"""Low-watermark cleanup of forgotten transactions, and pending-ack log cleanup."""

from __future__ import annotations

from quasar.transaction import TxnID
from quasar.transaction.pending_ack import AbortResult

from .helpers import T1, T2, PaEnv, individual, ledger_config

# ---------------------------------------------------------------------------- low watermark


async def test_transactions_at_or_below_the_low_watermark_are_aborted(pa: PaEnv) -> None:
    old, kept, other_tc, ending = TxnID(0, 3), TxnID(0, 9), TxnID(1, 2), TxnID(0, 10)
    await pa.handle.individual_ack(old, individual(pa, 0, 1))
    await pa.handle.individual_ack(kept, individual(pa, 2))
    await pa.handle.individual_ack(other_tc, individual(pa, 3))
    await pa.handle.individual_ack(ending, individual(pa, 4))
    # Coordinator 0 ends (0,10) and says everything up to (0,8) has ended.
    await pa.handle.commit(ending, 8)
    await pa.handle.wait_for_low_watermark_check()
    assert pa.lwm_aborts == [(old, AbortResult(positions=(pa.p(0), pa.p(1))))]
    assert [t for t, _ in pa.handle.pending_state.txns()] == [kept, other_tc]
    stats = pa.handle.stats()
    assert stats["lowWaterMarks"] == {0: 8}
    assert stats["lowWaterMarkAbortedCount"] == 1


async def test_a_pending_cumulative_ack_is_cleaned_too(pa: PaEnv) -> None:
    await pa.handle.cumulative_ack(T1, pa.p(5))
    await pa.handle.abort(TxnID(0, 2), 1)
    await pa.handle.wait_for_low_watermark_check()
    assert pa.lwm_aborts == [(T1, AbortResult(cumulative_position=pa.p(5)))]
    assert pa.handle.stats()["cumulativeAck"] is None


async def test_low_watermarks_only_go_up(pa: PaEnv) -> None:
    await pa.handle.abort(TxnID(0, 20), 7)
    await pa.handle.abort(TxnID(0, 21), 3)
    await pa.handle.abort(TxnID(0, 22), -1)  # nothing ended: no information
    assert pa.handle.low_watermarks() == {0: 7}


async def test_several_triggers_run_one_cleanup_at_a_time(pa: PaEnv) -> None:
    txns = [TxnID(0, i) for i in range(1, 6)]
    for i, t in enumerate(txns):
        await pa.handle.individual_ack(t, individual(pa, i))
    await pa.handle.abort(TxnID(0, 10), 2)
    await pa.handle.abort(TxnID(0, 11), 4)
    await pa.handle.wait_for_low_watermark_check()
    await pa.handle.wait_for_low_watermark_check()
    assert [t for t, _ in pa.lwm_aborts] == txns[:4]
    assert [t for t, _ in pa.handle.pending_state.txns()] == [txns[4]]


# ---------------------------------------------------------------------------- log cleanup


async def test_ended_transactions_leave_the_log(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0))
    await pa.handle.individual_ack(T2, individual(pa, 1))
    log_cursor = pa.handle.log.cursor
    first_record = pa.log_ledger.first_position
    await pa.handle.commit(T2, -1)
    # T1's ACK (the first record) is still needed: nothing may go.
    assert log_cursor.mark_delete_position < first_record
    await pa.handle.abort(T1, -1)
    assert log_cursor.mark_delete_position == pa.log_ledger.last_confirmed_entry


async def test_a_long_transaction_pins_only_from_its_first_record(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T2, individual(pa, 9))
    await pa.handle.commit(T2, -1)
    pinned_after = pa.log_ledger.last_confirmed_entry
    await pa.handle.individual_ack(T1, individual(pa, 0))  # long-running
    for i in range(1, 5):
        t = TxnID(0, 100 + i)
        await pa.handle.individual_ack(t, individual(pa, i))
        await pa.handle.commit(t, -1)
    assert pa.handle.log.cursor.mark_delete_position == pinned_after
    await pa.handle.commit(T1, -1)
    assert pa.handle.log.cursor.mark_delete_position == pa.log_ledger.last_confirmed_entry


async def test_log_ledgers_are_trimmed() -> None:
    env = PaEnv(log_ledger_config=ledger_config(max_entries_per_ledger=4))
    await env.start()
    try:
        for i in range(10):
            t = TxnID(0, i + 1)
            await env.handle.individual_ack(t, individual(env, i))
            await env.handle.commit(t, -1)
        await env.handle.log.wait_for_trim()
        ledgers = env.log_ledger.ledgers()
        assert len(ledgers) <= 2  # everything before the current ledger is gone
        # A restart replays nothing: every record was released.
        handle = await env.restart()
        assert handle.pending_state.txn_count == 0
        assert handle.stats()["state"] == "Ready"
    finally:
        await env.close()


async def test_replay_after_cleanup_starts_at_the_first_needed_record(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 0))
    await pa.handle.commit(T1, -1)
    await pa.handle.individual_ack(T2, individual(pa, 1))
    replayed: list[object] = []
    handle = await pa.restart()
    async for _, record in handle.log.replay():
        replayed.append(record.txn_id)
    assert replayed == [T2]
