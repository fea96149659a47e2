"""Timeouts on a virtual clock: abort at the deadline, re-armed from absolute
deadlines after a restart, never overriding a decision."""

from __future__ import annotations

import pytest

from quasar.clock import ManualClock
from quasar.errors import InvalidTxnStatus, TransactionNotFound
from quasar.transaction import TxnAction, TxnStatus, VirtualScheduler
from quasar.transaction.coordinator import TimeoutTracker

from .helpers import P1, TcEnv, end_task

COMMIT, ABORT = TxnAction.COMMIT, TxnAction.ABORT


async def test_open_transaction_aborts_at_its_deadline(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(5_000)
    await tc.add_partitions(txn, [P1.topic])
    await env.sched.advance(4_999)
    assert tc.get_txn_meta(txn).status is TxnStatus.OPEN
    await env.sched.advance(1)
    assert tc.active_transactions() == 0
    assert env.client.ended_txns(P1) == [(txn, ABORT)]
    assert tc.stats.timed_out == 1 and tc.stats.aborted == 1
    # The client's late commit: TransactionNotFound, as in Pulsar.
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(txn, COMMIT)


async def test_zero_timeout_aborts_at_once(env: TcEnv) -> None:
    tc = await env.start()
    await tc.new_txn(0)
    await env.sched.advance(0)
    assert tc.active_transactions() == 0


async def test_ended_transactions_do_not_time_out(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(1_000)
    await tc.add_partitions(txn, [P1.topic])
    await tc.end_txn(txn, COMMIT)
    await env.sched.advance(10_000)
    assert env.client.ended_txns(P1) == [(txn, COMMIT)]
    assert tc.stats.timed_out == 0


async def test_timeout_does_not_override_a_commit_in_progress(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(1_000)
    await tc.add_partitions(txn, [P1.topic])
    env.client.hold()
    ending = await end_task(tc, txn, COMMIT)
    await env.sched.advance(5_000)
    assert tc.get_txn_meta(txn).status is TxnStatus.COMMITTING
    env.client.release()
    await ending
    assert env.client.ended_txns(P1) == [(txn, COMMIT)]
    assert tc.stats.timed_out == 0


async def test_commit_and_timeout_in_the_same_tick_have_one_outcome(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(1_000)
    await tc.add_partitions(txn, [P1.topic])
    await env.sched.advance(999)
    ending = await end_task(tc, txn, COMMIT)  # registered before the timer fires
    await env.sched.advance(1)
    await ending
    assert env.client.ended_txns(P1) == [(txn, COMMIT)]
    assert tc.stats.timed_out == 0


async def test_commit_after_the_timeout_fired_is_rejected(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(1_000)
    await tc.add_partitions(txn, [P1.topic])
    env.client.hold()
    await env.sched.advance(1_000)  # the timeout abort starts and blocks
    assert tc.get_txn_meta(txn).status is TxnStatus.ABORTING
    with pytest.raises(InvalidTxnStatus, match="to be in COMMITTING status but it is in ABORTING"):
        await tc.end_txn(txn, COMMIT)
    env.client.release()
    await env.settle()
    assert env.client.ended_txns(P1) == [(txn, ABORT)]


async def test_restart_rearms_from_absolute_deadlines(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(10_000)
    await env.sched.advance(4_000)
    tc = await env.restart()
    await env.sched.advance(5_999)
    assert tc.get_txn_meta(txn).status is TxnStatus.OPEN
    await env.sched.advance(1)
    assert tc.active_transactions() == 0


async def test_deadline_passed_while_down_aborts_on_start(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(1_000)
    await tc.add_partitions(txn, [P1.topic])
    await env.stop()
    env.clock.advance(60_000)  # the broker was down for a minute
    tc = await env.start()
    await env.sched.advance(0)
    assert tc.active_transactions() == 0
    assert env.client.ended_txns(P1) == [(txn, ABORT)]


async def test_tracker_fires_in_deadline_order_and_forgets_removed() -> None:
    clock = ManualClock()
    sched = VirtualScheduler(clock)
    fired: list[int] = []
    tracker = TimeoutTracker(clock, sched, fired.append)
    now = clock.wall_ms()
    tracker.add(1, now + 300)
    tracker.add(2, now + 100)
    tracker.add(3, now + 200)
    tracker.start()
    tracker.add(4, now + 50)  # earlier than the armed timer: re-armed
    tracker.remove(3)
    await sched.advance(250)
    assert fired == [4, 2]
    await sched.advance(100)
    assert fired == [4, 2, 1]
    assert len(tracker) == 0 and sched.pending() == 0


async def test_tracker_heap_stays_bounded() -> None:
    clock = ManualClock()
    sched = VirtualScheduler(clock)
    tracker = TimeoutTracker(clock, sched, lambda s: None)
    tracker.start()
    for seq in range(10_000):
        tracker.add(seq, clock.wall_ms() + 60_000)
        tracker.remove(seq)
    assert len(tracker) == 0
    assert len(tracker._heap) <= 64 + 1
