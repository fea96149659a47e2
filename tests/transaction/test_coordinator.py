"""Coordinator requests: ids, registration, errors, limits, low watermark, fencing."""

from __future__ import annotations

import asyncio

import pytest

from quasar.errors import (
    InvalidTxnStatus,
    PersistenceError,
    ServerError,
    TransactionCoordinatorNotFound,
    TransactionNotFound,
)
from quasar.transaction import (
    CoordinatorConfig,
    CoordinatorStatus,
    ReachMaxActiveTxn,
    TransactionCoordinator,
    TransactionTimeoutTooLong,
    TxnAction,
    TxnID,
    TxnStatus,
)

from .helpers import P1, P2, S1, FailingLedger, TcEnv, end_task

COMMIT, ABORT = TxnAction.COMMIT, TxnAction.ABORT


async def test_ids_start_at_zero_and_grow(env: TcEnv) -> None:
    env.tc_id = 3
    tc = await env.start()
    ids = [await tc.new_txn(60_000) for _ in range(3)]
    assert ids == [TxnID(3, 0), TxnID(3, 1), TxnID(3, 2)]
    assert tc.next_sequence() == 3


async def test_new_txn_records_the_metadata(env: TcEnv) -> None:
    tc = await env.start()
    now = env.clock.wall_ms()
    txn = await tc.new_txn(5_000, owner="alice")
    meta = tc.get_txn_meta(txn)
    assert meta.status is TxnStatus.OPEN
    assert meta.open_timestamp_ms == now
    assert meta.timeout_ms == 5_000 and meta.timeout_at_ms == now + 5_000
    assert meta.owner == "alice" and meta.client_name is None
    records = await env.log_records()
    assert len(records) == 1
    assert records[0].start_time == now and records[0].max_local_txn_id == 0
    assert records[0].owner == "alice"


async def test_registration_is_stored_sorted_and_deduplicated(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(60_000)
    await tc.add_partitions(txn, ["b", "a", "b"])
    await tc.add_partitions(txn, ["a"])  # nothing new: no record
    await tc.add_subscriptions(txn, [("t", "s2"), ("t", "s1")])
    meta = tc.get_txn_meta(txn)
    assert meta.partitions() == ["a", "b"]
    assert meta.subscriptions() == [("t", "s1"), ("t", "s2")]
    assert len(await env.log_records()) == 3  # NEW, ADD_PARTITION, ADD_SUBSCRIPTION
    # Copies: changing one does not change the coordinator.
    meta.produced_partitions.add("zzz")
    assert tc.get_txn_meta(txn).partitions() == ["a", "b"]


async def test_unknown_transactions(env: TcEnv) -> None:
    tc = await env.start()
    await tc.new_txn(60_000)
    for txn in (TxnID(0, 99), TxnID(5, 0)):  # never created; another coordinator's
        with pytest.raises(TransactionNotFound, match=rf"The transaction \({txn.most_bits},{txn.least_bits}\) is not found"):
            await tc.add_partitions(txn, ["p"])
        with pytest.raises(TransactionNotFound):
            await tc.add_subscriptions(txn, [("t", "s")])
        with pytest.raises(TransactionNotFound):
            await tc.end_txn(txn, COMMIT)
        with pytest.raises(TransactionNotFound):
            tc.get_txn_meta(txn)
    assert TransactionNotFound("x").code is ServerError.TransactionNotFound


async def test_ended_transactions_are_forgotten(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(60_000)
    await tc.add_partitions(txn, [P1.topic])
    await tc.end_txn(txn, COMMIT)
    # Pulsar: commit after commit, abort after commit and registering afterwards all
    # get TransactionNotFound, because the transaction left the coordinator.
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(txn, COMMIT)
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(txn, ABORT)
    with pytest.raises(TransactionNotFound):
        await tc.add_partitions(txn, [P2.topic])


async def test_registering_after_the_end_started(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(60_000)
    await tc.add_partitions(txn, [P1.topic])
    env.client.hold()
    ending = await end_task(tc, txn, COMMIT)
    # Decided but not yet written: refused already.
    with pytest.raises(InvalidTxnStatus, match="to be in OPEN status but it is in COMMITTING"):
        await tc.add_partitions(txn, [P2.topic])
    await env.settle()
    assert tc.get_txn_meta(txn).status is TxnStatus.COMMITTING
    with pytest.raises(InvalidTxnStatus, match="to be in OPEN status but it is in COMMITTING"):
        await tc.add_subscriptions(txn, [(S1.topic, "sub")])
    env.client.release()
    await ending
    assert env.client.participants_for(txn) == {P1}


async def test_opposite_end_is_rejected_and_same_end_joins(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(60_000)
    await tc.add_partitions(txn, [P1.topic])
    env.client.hold()
    first = await end_task(tc, txn, ABORT)
    with pytest.raises(InvalidTxnStatus, match="to be in COMMITTING status but it is in ABORTING"):
        await tc.end_txn(txn, COMMIT)
    second = await end_task(tc, txn, ABORT)
    await env.settle()
    with pytest.raises(InvalidTxnStatus, match="to be in COMMITTING status but it is in ABORTING"):
        await tc.end_txn(txn, COMMIT)
    assert not first.done() and not second.done()
    env.client.release()
    await asyncio.gather(first, second)
    assert env.client.ended_txns(P1) == [(txn, ABORT)]  # one end, both answered


async def test_not_ready_means_coordinator_not_found(env: TcEnv) -> None:
    ml = await env.open_ledger()
    tc = TransactionCoordinator(0, ml, env.clock, env.config, env.client, scheduler=env.sched)
    with pytest.raises(TransactionCoordinatorNotFound) as info:
        await tc.new_txn(1000)
    assert info.value.retryable
    await tc.start()
    txn = await tc.new_txn(1000)
    await tc.close()
    for call in (
        tc.new_txn(1000),
        tc.add_partitions(txn, ["p"]),
        tc.add_subscriptions(txn, [("t", "s")]),
        tc.end_txn(txn, COMMIT),
    ):
        with pytest.raises(TransactionCoordinatorNotFound):
            await call
    await ml.close()


async def test_max_active_transactions(env: TcEnv) -> None:
    env.config = CoordinatorConfig(max_active_transactions_per_coordinator=2)
    tc = await env.start()
    a = await tc.new_txn(60_000)
    await tc.new_txn(60_000)
    with pytest.raises(ReachMaxActiveTxn, match="New txn op reach max active txn! tcId : 0") as info:
        await tc.new_txn(60_000)
    assert info.value.code is ServerError.UnknownError  # what Pulsar clients see
    assert info.value.retryable
    await tc.end_txn(a, ABORT)
    c = await tc.new_txn(60_000)
    assert c == TxnID(0, 2)  # the refused request burned no id


async def test_max_active_counts_new_transactions_in_flight(env: TcEnv) -> None:
    env.config = CoordinatorConfig(max_active_transactions_per_coordinator=2)
    tc = await env.start()
    results = await asyncio.gather(*(tc.new_txn(60_000) for _ in range(3)), return_exceptions=True)
    assert sum(isinstance(r, ReachMaxActiveTxn) for r in results) == 1
    assert tc.active_transactions() == 2


async def test_the_active_transactions_are_bounded_by_default(env: TcEnv) -> None:
    """Pulsar's 0 (unlimited) lets one client exhaust the broker's memory."""
    assert CoordinatorConfig().max_active_transactions_per_coordinator == 10_000
    env.config = CoordinatorConfig(max_active_transactions_per_coordinator=0)
    tc = await env.start()
    await asyncio.gather(*(tc.new_txn(60_000) for _ in range(50)))
    assert tc.active_transactions() == 50  # 0 still means unlimited


async def test_a_timeout_above_the_maximum_is_refused(env: TcEnv) -> None:
    env.config = CoordinatorConfig(transaction_max_timeout_millis=10_000)
    tc = await env.start()
    with pytest.raises(TransactionTimeoutTooLong, match="10001 ms is more than") as info:
        await tc.new_txn(10_001)
    assert info.value.code is ServerError.NotAllowedError
    assert not info.value.retryable
    assert tc.active_transactions() == 0
    assert await tc.new_txn(10_000) == TxnID(0, 0)  # the refused request burned no id
    assert await tc.new_txn(0) == TxnID(0, 1)


async def test_an_unbounded_timeout_takes_any_value(env: TcEnv) -> None:
    assert CoordinatorConfig().transaction_max_timeout_millis == 86_400_000
    env.config = CoordinatorConfig(transaction_max_timeout_millis=0)
    tc = await env.start()
    assert await tc.new_txn(2**63 - 1) == TxnID(0, 0)


async def test_owner(env: TcEnv) -> None:
    tc = await env.start()
    with pytest.raises(ValueError, match="Owner can't be blank"):
        await tc.new_txn(1000, owner="  ")
    with pytest.raises(ValueError):
        await tc.new_txn(-1)
    mine = await tc.new_txn(1000, owner="alice")
    anyone = await tc.new_txn(1000)
    assert tc.verify_txn_ownership(mine, "alice")
    assert not tc.verify_txn_ownership(mine, "bob")
    assert tc.verify_txn_ownership(anyone, "bob")  # no owner recorded: auth was off


async def test_low_watermark(env: TcEnv) -> None:
    tc = await env.start()
    assert tc.low_watermark() == -1  # nothing has ended
    t0, t1, t2 = [await tc.new_txn(60_000) for _ in range(3)]
    for t in (t0, t1, t2):
        await tc.add_partitions(t, [P1.topic])
    assert tc.low_watermark() == -1  # txn 0 is live
    await tc.end_txn(t1, COMMIT)
    assert env.client.calls[-1].low_watermark == -1
    assert tc.low_watermark() == -1
    await tc.end_txn(t0, ABORT)
    assert env.client.calls[-1].low_watermark == -1  # sent while txn 0 was ending
    assert tc.low_watermark() == 1  # 0 and 1 ended, 2 is live
    await tc.end_txn(t2, COMMIT)
    assert env.client.calls[-1].low_watermark == 1
    assert tc.low_watermark() == 2  # none live: every id handed out has ended
    tc = await env.restart()
    assert tc.low_watermark() == 2
    t3 = await tc.new_txn(60_000)
    assert t3.least_bits == 3 and tc.low_watermark() == 2


async def test_failed_append_fences_the_coordinator(env: TcEnv) -> None:
    ml = await env.open_ledger()
    fenced: list[TransactionCoordinator] = []
    tc = TransactionCoordinator(
        0, FailingLedger(ml, ok=1), env.clock, env.config, env.client,  # type: ignore[arg-type]
        scheduler=env.sched, on_fenced=fenced.append,
    )
    await tc.start()
    txn = await tc.new_txn(60_000)
    with pytest.raises(TransactionCoordinatorNotFound) as info:
        await tc.add_partitions(txn, ["p"])
    assert isinstance(info.value.__cause__, PersistenceError)
    assert fenced == [tc]
    assert tc.status in (CoordinatorStatus.CLOSING, CoordinatorStatus.CLOSED)
    with pytest.raises(TransactionCoordinatorNotFound):
        await tc.new_txn(1000)
    await tc.close()
    assert tc.status is CoordinatorStatus.CLOSED
    await ml.close()
