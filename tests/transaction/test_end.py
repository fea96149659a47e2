"""Commit/abort fan-out: ordering of records, retries, failures, cancellation."""

from __future__ import annotations

import pytest

from quasar.errors import (
    InvalidTxnStatus,
    NotAllowedError,
    SubscriptionNotFound,
    TopicNotFound,
    TransactionCoordinatorNotFound,
)
from quasar.transaction import TxnAction, TxnID, TxnStatus
from quasar.transaction.buffer_client import EndFailure, classify_end_failure
from quasar.transaction.coordinator.state import Op

from .helpers import P1, P2, S1, TcEnv, end_task

COMMIT, ABORT = TxnAction.COMMIT, TxnAction.ABORT


async def open_txn(env: TcEnv) -> TxnID:
    assert env.tc is not None
    txn = await env.tc.new_txn(600_000)
    await env.tc.add_partitions(txn, [P1.topic, P2.topic])
    await env.tc.add_subscriptions(txn, [(S1.topic, "sub")])
    return txn


def statuses(records: list) -> list[tuple[int, int]]:  # type: ignore[type-arg]
    return [(r.txnid_least_bits, r.new_status) for r in records if r.metadata_op == Op.UPDATE]


@pytest.mark.parametrize("action", list(TxnAction))
async def test_end_reaches_every_participant_then_writes_terminal(
    env: TcEnv, action: TxnAction
) -> None:
    tc = await env.start()
    txn = await open_txn(env)
    await tc.end_txn(txn, action)
    for p in (P1, P2, S1):
        assert env.client.ended_txns(p) == [(txn, action)]
    ing, final = (
        (TxnStatus.COMMITTING, TxnStatus.COMMITTED)
        if action is COMMIT
        else (TxnStatus.ABORTING, TxnStatus.ABORTED)
    )
    assert statuses(await env.log_records()) == [(0, ing), (0, final)]
    assert tc.active_transactions() == 0
    # Every record of the transaction is acknowledged on the log cursor.
    assert env.live_record_count() == 0
    assert tc.stats.committed + tc.stats.aborted == 1


async def test_retryable_failures_are_retried_per_participant(env: TcEnv) -> None:
    tc = await env.start()
    txn = await open_txn(env)
    env.client.fail(P1, times=2)  # ServiceNotReady: retryable
    ending = await end_task(tc, txn, COMMIT)
    await env.settle()
    # P2 and S1 are done, P1 failed once: still COMMITTING, no terminal record.
    assert not ending.done()
    assert tc.get_txn_meta(txn).status is TxnStatus.COMMITTING
    assert statuses(await env.log_records()) == [(0, TxnStatus.COMMITTING)]
    assert env.client.ended_txns(P2) == [(txn, COMMIT)]
    await env.sched.advance(999)
    assert sum(c.participant == P1 for c in env.client.calls) == 1
    await env.sched.advance(1)  # retry 1 fails
    assert sum(c.participant == P1 for c in env.client.calls) == 2
    assert statuses(await env.log_records()) == [(0, TxnStatus.COMMITTING)]
    await env.sched.advance(1000)  # retry 2 succeeds
    assert ending.done()
    await ending
    assert statuses(await env.log_records()) == [
        (0, TxnStatus.COMMITTING),
        (0, TxnStatus.COMMITTED),
    ]
    # Only the failing participant was asked again.
    assert [c.participant for c in env.client.calls].count(P2) == 1
    assert [c.participant for c in env.client.calls].count(P1) == 3


async def test_a_vanished_participant_counts_as_done(env: TcEnv) -> None:
    tc = await env.start()
    txn = await open_txn(env)
    env.client.fail(P1, times=None, error=TopicNotFound("deleted"))
    env.client.fail(S1, times=None, error=SubscriptionNotFound("deleted"))
    await tc.end_txn(txn, ABORT)
    assert tc.active_transactions() == 0
    assert env.client.ended_txns(P2) == [(txn, ABORT)]


async def test_non_retryable_failure_fails_the_request_and_keeps_the_decision(
    env: TcEnv,
) -> None:
    tc = await env.start()
    txn = await open_txn(env)
    env.client.fail(P1, times=1, error=NotAllowedError("no"))
    with pytest.raises(NotAllowedError):
        await tc.end_txn(txn, COMMIT)
    assert tc.get_txn_meta(txn).status is TxnStatus.COMMITTING
    assert tc.ending_transactions() == []
    # The decision stands: abort is refused, a repeated commit resumes and finishes.
    with pytest.raises(InvalidTxnStatus):
        await tc.end_txn(txn, ABORT)
    await tc.end_txn(txn, COMMIT)
    assert tc.active_transactions() == 0
    assert env.client.ended_txns(P1) == [(txn, COMMIT)]
    # Receivers must be idempotent: P2 heard the commit twice.
    assert env.client.ended_txns(P2) == [(txn, COMMIT), (txn, COMMIT)]


async def test_no_participants(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(60_000)
    await tc.end_txn(txn, COMMIT)
    assert env.client.calls == []
    assert tc.active_transactions() == 0


async def test_close_while_ending_answers_coordinator_not_found(env: TcEnv) -> None:
    tc = await env.start()
    txn = await open_txn(env)
    env.client.hold(P1)
    ending = await end_task(tc, txn, COMMIT)
    await env.settle()
    await tc.close()
    with pytest.raises(TransactionCoordinatorNotFound):
        await ending
    await tc.ledger.close()
    env.tc = None
    # The decision was durable: the restarted coordinator finishes it.
    env.client.release()
    tc = await env.start()
    await env.settle()
    assert tc.active_transactions() == 0
    assert env.client.ended_txns(P1) == [(txn, COMMIT)]


async def test_client_giving_up_does_not_stop_the_end(env: TcEnv) -> None:
    tc = await env.start()
    txn = await open_txn(env)
    env.client.hold()
    ending = await end_task(tc, txn, COMMIT)
    await env.settle()
    ending.cancel()  # e.g. the client's connection closed
    await env.settle()
    env.client.release()
    await env.settle()
    assert tc.active_transactions() == 0
    assert env.client.ended_txns(P1) == [(txn, COMMIT)]


def test_classify_end_failure() -> None:
    assert classify_end_failure(TopicNotFound("x")) is EndFailure.GONE
    assert classify_end_failure(SubscriptionNotFound("x")) is EndFailure.GONE
    assert classify_end_failure(TransactionCoordinatorNotFound("x")) is EndFailure.RETRY
    assert classify_end_failure(TimeoutError()) is EndFailure.RETRY
    assert classify_end_failure(ConnectionResetError()) is EndFailure.RETRY
    assert classify_end_failure(NotAllowedError("x")) is EndFailure.FAIL
    assert classify_end_failure(RuntimeError("bug")) is EndFailure.FAIL
