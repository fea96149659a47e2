"""Every conflict rule, and the checks that come before them."""

from __future__ import annotations

import asyncio

import pytest

from quasar.errors import NotAllowedError, TooManyRequests, TransactionConflict
from quasar.storage.api import Position
from quasar.transaction import TxnID
from quasar.transaction.pending_ack import PendingAckConfig

from .helpers import SUB, T1, T2, T3, TOPIC, PaEnv, batch_ack_set, individual

PREFIX = f"[{TOPIC}][{SUB}]"

# ---------------------------------------------------------------------------- individual


async def test_already_acked_at_or_below_mark_delete(pa: PaEnv) -> None:
    pa.cursor.mark_delete(pa.p(3))
    with pytest.raises(TransactionConflict) as info:
        await pa.handle.individual_ack(T1, individual(pa, 2))
    assert str(info.value) == (
        f"{PREFIX} Transaction:(0,1) try to ack message:{pa.p(2)} already acked before."
    )
    assert info.value.code == 23 and not info.value.retryable
    assert pa.handle.pending_positions() == []


async def test_already_individually_deleted(pa: PaEnv) -> None:
    pa.cursor.delete([pa.p(7)])
    with pytest.raises(TransactionConflict, match="already acked before"):
        await pa.handle.individual_ack(T1, individual(pa, 6, 7))
    # All or nothing: entry 6 did not become pending either.
    assert not pa.handle.is_pending(pa.p(6))


async def test_pending_in_another_transaction(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 4))
    with pytest.raises(TransactionConflict) as info:
        await pa.handle.individual_ack(T2, individual(pa, 4))
    assert str(info.value) == (
        f"{PREFIX} Transaction:(0,2) try to ack message:{pa.p(4)} in pending ack status."
    )
    assert pa.handle.stats()["conflictCount"] == 1


async def test_same_transaction_again_is_merged(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 4))
    entries = pa.log_ledger.number_of_entries
    await pa.handle.individual_ack(T1, individual(pa, 4))  # a client retry
    assert pa.log_ledger.number_of_entries == entries  # answered without a write
    await pa.handle.individual_ack(T1, individual(pa, 4, 5))
    assert pa.handle.pending_positions() == [pa.p(4), pa.p(5)]


async def test_batch_indexes_of_one_entry_in_two_transactions(pa: PaEnv) -> None:
    p = pa.p(2)
    await pa.handle.individual_ack(T1, [(p, 10, batch_ack_set(10, {0, 1}))])
    await pa.handle.individual_ack(T2, [(p, 10, batch_ack_set(10, {2, 3}))])
    assert not pa.handle.is_pending(p)
    assert pa.handle.pending_ack_set(p) == batch_ack_set(10, {0, 1, 2, 3})


async def test_batch_index_overlap_with_another_transaction(pa: PaEnv) -> None:
    p = pa.p(2)
    await pa.handle.individual_ack(T1, [(p, 10, batch_ack_set(10, {0, 5}))])
    with pytest.raises(TransactionConflict) as info:
        await pa.handle.individual_ack(T2, [(p, 10, batch_ack_set(10, {4, 5}))])
    assert str(info.value) == (
        f"{PREFIX} Transaction:(0,2) try to ack message:{p} batchIndex:5 in pending ack status."
    )


async def test_batch_index_overlap_across_words(pa: PaEnv) -> None:
    p = pa.p(2)
    await pa.handle.individual_ack(T1, [(p, 130, batch_ack_set(130, {129}))])
    await pa.handle.individual_ack(T2, [(p, 130, batch_ack_set(130, {64, 128}))])
    with pytest.raises(TransactionConflict, match="batchIndex:129"):
        await pa.handle.individual_ack(T3, [(p, 130, batch_ack_set(130, {1, 129}))])


async def test_whole_entry_overlaps_any_batch_index(pa: PaEnv) -> None:
    p = pa.p(2)
    await pa.handle.individual_ack(T1, [(p, 10, batch_ack_set(10, {9}))])
    with pytest.raises(TransactionConflict, match="batchIndex:9 in pending ack status"):
        await pa.handle.individual_ack(T2, [(p, 10, None)])
    await pa.handle.individual_ack(T3, [(pa.p(3), 10, None)])
    with pytest.raises(TransactionConflict, match="in pending ack status"):
        await pa.handle.individual_ack(T2, [(pa.p(3), 10, batch_ack_set(10, {0}))])


async def test_batch_index_already_acked_on_the_cursor(pa: PaEnv) -> None:
    p = pa.p(2)
    pa.cursor.set_batch_ack(p, batch_ack_set(10, {3}))  # a normal batch-index ack
    with pytest.raises(TransactionConflict) as info:
        await pa.handle.individual_ack(T1, [(p, 10, batch_ack_set(10, {2, 3}))])
    assert str(info.value).endswith(f"message:{p} batchIndex:3 already acked before.")
    # Other members are fine, and a whole-entry ack takes the members left.
    await pa.handle.individual_ack(T1, [(p, 10, batch_ack_set(10, {2}))])
    await pa.handle.individual_ack(T2, [(pa.p(5), 10, None)])


async def test_bits_past_the_batch_size_are_not_members(pa: PaEnv) -> None:
    p = pa.p(2)
    # Clients leave bits >= batch_size clear; they must not read as overlapping acks.
    await pa.handle.individual_ack(T1, [(p, 3, [0b110])])
    await pa.handle.individual_ack(T2, [(p, 3, [0b101])])
    assert pa.handle.pending_ack_set(p) == [0b100]


async def test_individual_inside_another_transactions_cumulative(pa: PaEnv) -> None:
    await pa.handle.cumulative_ack(T1, pa.p(5))
    with pytest.raises(TransactionConflict, match="in pending ack status"):
        await pa.handle.individual_ack(T2, individual(pa, 5))
    await pa.handle.individual_ack(T2, individual(pa, 6))
    await pa.handle.individual_ack(T1, individual(pa, 3))  # its own: fine


async def test_ack_set_that_takes_nothing_is_a_no_op(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, [(pa.p(2), 4, batch_ack_set(4, set()))])
    await pa.handle.individual_ack(T1, [])
    assert pa.handle.pending_positions() == []
    assert pa.log_ledger.number_of_entries == 0


# ---------------------------------------------------------------------------- cumulative


async def test_cumulative_at_or_below_mark_delete(pa: PaEnv) -> None:
    pa.cursor.mark_delete(pa.p(4))
    for i in (3, 4):
        with pytest.raises(TransactionConflict) as info:
            await pa.handle.cumulative_ack(T1, pa.p(i))
        assert str(info.value) == (
            f"{PREFIX} Transaction:(0,1) try to cumulative ack message:{pa.p(i)} within "
            f"range of cursor's markDeletePosition:{pa.p(4)}."
        )
    await pa.handle.cumulative_ack(T1, pa.p(5))


async def test_one_cumulative_owner_at_a_time(pa: PaEnv) -> None:
    await pa.handle.cumulative_ack(T1, pa.p(5))
    for i in (3, 5, 9):
        with pytest.raises(TransactionConflict, match=r"while Transaction:\(0,1\) holds"):
            await pa.handle.cumulative_ack(T2, pa.p(i))
    await pa.handle.abort(T1, -1)
    await pa.handle.cumulative_ack(T2, pa.p(3))


async def test_cumulative_lower_than_own_previous(pa: PaEnv) -> None:
    await pa.handle.cumulative_ack(T1, pa.p(5))
    with pytest.raises(TransactionConflict, match="lower than its pending cumulative ack"):
        await pa.handle.cumulative_ack(T1, pa.p(4))
    entries = pa.log_ledger.number_of_entries
    await pa.handle.cumulative_ack(T1, pa.p(5))  # a retry
    assert pa.log_ledger.number_of_entries == entries
    await pa.handle.cumulative_ack(T1, pa.p(8))
    assert pa.handle.transaction_stats(T1) == {"cumulativeAckPosition": str(pa.p(8))}


async def test_cumulative_covering_another_transactions_individual(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 6))
    with pytest.raises(TransactionConflict, match=f"covering message:{pa.p(6)}"):
        await pa.handle.cumulative_ack(T2, pa.p(6))
    await pa.handle.cumulative_ack(T2, pa.p(5))
    await pa.handle.abort(T2, -1)
    await pa.handle.cumulative_ack(T1, pa.p(9))  # covers T1's own individual ack: fine
    assert pa.handle.stats()["cumulativeAck"] == {"txnId": "(0,1)", "position": str(pa.p(9))}


# ---------------------------------------------------------------------------- races


async def test_a_race_is_decided_at_apply_and_replay_agrees(pa: PaEnv) -> None:
    # Both pass the check before either is durable; the log decides, in its order.
    first = asyncio.ensure_future(pa.handle.individual_ack(T1, individual(pa, 4)))
    second = asyncio.ensure_future(pa.handle.individual_ack(T2, individual(pa, 4, 5)))
    await first
    with pytest.raises(TransactionConflict):
        await second
    assert pa.log_ledger.number_of_entries == 2  # the loser's record stays
    assert pa.handle.pending_state.get(T2) is None
    handle = await pa.restart()
    assert handle.pending_state.get(T2) is None
    assert list(handle.pending_state.get(T1).individual) == [pa.p(4)]  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- ended / bounds


async def test_acks_of_an_ended_transaction_are_refused(pa: PaEnv) -> None:
    await pa.handle.individual_ack(T1, individual(pa, 1))
    await pa.handle.commit(T1, -1)
    with pytest.raises(NotAllowedError, match=r"Transaction \(0,1\) has been ended"):
        await pa.handle.individual_ack(T1, individual(pa, 2))
    with pytest.raises(NotAllowedError):
        await pa.handle.cumulative_ack(T1, pa.p(9))


async def test_acks_at_or_below_the_low_watermark_are_refused(pa: PaEnv) -> None:
    await pa.handle.abort(TxnID(0, 7), 5)  # coordinator 0: everything <= 5 ended
    with pytest.raises(NotAllowedError):
        await pa.handle.individual_ack(TxnID(0, 5), individual(pa, 1))
    await pa.handle.individual_ack(TxnID(0, 6), individual(pa, 1))
    await pa.handle.individual_ack(TxnID(1, 5), individual(pa, 2))  # other coordinator


async def test_negative_positions_are_refused(pa: PaEnv) -> None:
    with pytest.raises(NotAllowedError):
        await pa.handle.individual_ack(T1, [(Position(-1, 0), None, None)])


async def test_bounds() -> None:
    env = PaEnv(config=PendingAckConfig(max_ongoing_transactions=2, max_pending_positions=3))
    await env.start()
    try:
        await env.handle.individual_ack(T1, individual(env, 0))
        await env.handle.individual_ack(T2, individual(env, 1))
        with pytest.raises(TooManyRequests) as info:
            await env.handle.individual_ack(T3, individual(env, 2))
        assert info.value.retryable
        with pytest.raises(TooManyRequests):
            await env.handle.cumulative_ack(T3, env.p(9))
        await env.handle.individual_ack(T1, individual(env, 2))
        with pytest.raises(TooManyRequests, match=r"\(max_pending_positions\)"):
            await env.handle.individual_ack(T1, individual(env, 3))
        await env.handle.commit(T1, -1)
        await env.handle.individual_ack(T3, individual(env, 3, 4))
    finally:
        await env.close()


def test_config_validation() -> None:
    unlimited = PendingAckConfig(max_ongoing_transactions=0, max_pending_positions=0)
    assert unlimited.max_ongoing_transactions == 0
    for bad in (
        {"max_ongoing_transactions": -1},
        {"max_waiting_requests": 0},
        {"max_ended_transactions": 0},
        {"replay_read_entries": 0},
        {"cursor_flush_retry_interval_ms": 0},
    ):
        with pytest.raises(ValueError):
            PendingAckConfig(**bad)


async def test_zero_means_no_limit() -> None:
    env = PaEnv(config=PendingAckConfig(max_ongoing_transactions=0, max_pending_positions=0))
    await env.start()
    try:
        for i in range(10):
            await env.handle.individual_ack(TxnID(0, i + 1), individual(env, i))
        assert env.handle.stats()["ongoingTxnSize"] == 10
    finally:
        await env.close()
