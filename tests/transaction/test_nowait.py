"""The coordinator's requests for callers that wait by callback (the broker's
connections): the same checks and records as the awaiting methods, with the
durability future handed back instead of awaited."""

from __future__ import annotations

import pytest

from quasar.errors import (
    InvalidTxnStatus,
    TransactionCoordinatorNotFound,
    TransactionNotFound,
)
from quasar.transaction import TransactionCoordinator, TxnID
from quasar.transaction.coordinator.state import ApplyResult
from quasar.transaction.txn_status import TxnAction, TxnStatus

from .helpers import P1, TcEnv

COMMIT, ABORT = TxnAction.COMMIT, TxnAction.ABORT


async def test_new_txn_nowait_gives_the_id_at_once_and_applies_once_durable(
    env: TcEnv,
) -> None:
    tc = await env.start()
    txn, durable = tc.new_txn_nowait(60_000)
    assert txn == TxnID(0, 0)
    assert tc.next_sequence() == 1  # the id is taken now, not when the record lands
    with pytest.raises(TransactionNotFound):
        tc.get_txn_meta(txn)  # not live before its record is durable
    result = await durable
    assert isinstance(result, ApplyResult) and result.created
    assert tc.get_txn_meta(txn).status is TxnStatus.OPEN


async def test_new_txn_nowait_refuses_before_writing(env: TcEnv) -> None:
    tc = await env.start()
    with pytest.raises(ValueError, match=">= 0 ms"):
        tc.new_txn_nowait(-1)
    assert tc.next_sequence() == 0
    assert await env.log_records() == []


async def test_add_partitions_nowait_writes_only_what_is_new(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(60_000)
    durable = tc.add_partitions_nowait(txn, [P1.topic, P1.topic])
    assert durable is not None
    await durable
    assert tc.add_partitions_nowait(txn, [P1.topic]) is None  # registered already
    subscribed = tc.add_subscriptions_nowait(txn, [("persistent://t/ns/b", "sub")])
    assert subscribed is not None
    await subscribed
    assert list(tc.get_txn_meta(txn).produced_partitions) == [P1.topic]
    with pytest.raises(TransactionNotFound):
        tc.add_partitions_nowait(TxnID(0, 99), [P1.topic])


async def _held_txn(env: TcEnv) -> tuple[TransactionCoordinator, TxnID]:
    """A started coordinator and an open transaction on P1, whose end calls wait."""
    tc = await env.start()
    txn = await tc.new_txn(60_000)
    await tc.add_partitions(txn, [P1.topic])
    env.client.hold(P1)
    return tc, txn


async def test_end_txn_nowait_shares_one_end_and_says_what_to_answer(env: TcEnv) -> None:
    tc, txn = await _held_txn(env)
    driver = tc.end_txn_nowait(txn, COMMIT)
    assert driver is not None
    assert tc.end_txn_nowait(txn, COMMIT) is driver  # a repeat joins the same end
    with pytest.raises(InvalidTxnStatus):
        tc.end_txn_nowait(txn, ABORT)
    env.client.release(P1)
    await driver
    assert tc.end_failure(txn, driver) is None
    assert tc.active_transactions() == 0
    with pytest.raises(TransactionNotFound):
        tc.end_txn_nowait(txn, COMMIT)  # ended, and no client name to look it up by


async def test_an_end_cut_short_by_close_is_answered_retryable(env: TcEnv) -> None:
    tc, txn = await _held_txn(env)
    driver = tc.end_txn_nowait(txn, COMMIT)
    assert driver is not None
    await env.settle()
    await tc.close()
    assert driver.cancelled()
    failure = tc.end_failure(txn, driver)
    assert isinstance(failure, TransactionCoordinatorNotFound)
    assert failure.retryable
    await tc.ledger.close()
    env.tc = None


async def test_counts_holds_a_transaction_from_its_new_txn_to_its_end(env: TcEnv) -> None:
    """What ``maxActiveTransactionsPerConnection`` asks: a transaction counts while its
    NEW_TXN record is written, while it is live, and no longer once it ended."""
    tc = await env.start()
    txn, durable = tc.new_txn_nowait(60_000)
    assert tc.counts(txn)  # being written
    await durable
    assert tc.counts(txn)
    assert not tc.counts(TxnID(0, 99))  # never opened
    assert not tc.counts(TxnID(1, txn.least_bits))  # another coordinator's
    await tc.end_txn(txn, ABORT)
    assert not tc.counts(txn)
