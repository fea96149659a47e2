"""Recovery: replay rebuilds the state, re-drives half-ended transactions, and the id
sequence never goes back, even when every record was deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from quasar.errors import CorruptRecordError
from quasar.transaction import CoordinatorStatus, TxnAction, TxnID, TxnStatus
from quasar.transaction.coordinator import CoordinatorState
from quasar.transaction.coordinator.state import Op

from .helpers import (
    P1,
    P2,
    S1,
    TcEnv,
    end_task,
    ledger_config,
    new_record,
    record,
    update_record,
    write_log,
)

COMMIT, ABORT = TxnAction.COMMIT, TxnAction.ABORT
ING = {COMMIT: TxnStatus.COMMITTING, ABORT: TxnStatus.ABORTING}
FINAL = {COMMIT: TxnStatus.COMMITTED, ABORT: TxnStatus.ABORTED}


async def test_recovery_redrives_committing_and_aborting(env: TcEnv) -> None:
    ml = await env.open_ledger()
    await write_log(ml, [
        new_record(0),
        record(Op.ADD_PARTITION, 0, partitions=[P1.topic, P2.topic]),
        record(Op.ADD_SUBSCRIPTION, 0, subscriptions=[(S1.topic, "sub")]),
        update_record(0, TxnStatus.OPEN, TxnStatus.COMMITTING),
        new_record(1),
        record(Op.ADD_PARTITION, 1, partitions=[P1.topic]),
        update_record(1, TxnStatus.OPEN, TxnStatus.ABORTING),
        new_record(2),  # still open
        record(Op.ADD_PARTITION, 7, max_id=2, partitions=["x"]),  # orphan
        update_record(2, TxnStatus.OPEN, TxnStatus.COMMITTED),  # illegal: dropped
    ])
    await ml.close()
    env.client.hold()
    tc = await env.start()
    # Replayed as written, before the re-drives make progress.
    assert [(m.txn_id.least_bits, m.status) for m in tc.transactions()] == [
        (0, TxnStatus.COMMITTING), (1, TxnStatus.ABORTING), (2, TxnStatus.OPEN),
    ]
    assert tc.get_txn_meta(TxnID(0, 0)).subscriptions() == [(S1.topic, "sub")]
    assert tc.next_sequence() == 3
    await env.settle()
    assert {c.txn_id.least_bits for c in env.client.calls} == {0, 1}
    env.client.release()
    await env.settle()
    # Both re-drives run at once: the order between the two on P1 is not defined.
    assert sorted(env.client.ended_txns(P1)) == [(TxnID(0, 0), COMMIT), (TxnID(0, 1), ABORT)]
    assert env.client.ended_txns(P2) == [(TxnID(0, 0), COMMIT)]
    assert env.client.ended_txns(S1) == [(TxnID(0, 0), COMMIT)]
    assert [m.txn_id.least_bits for m in tc.transactions()] == [2]
    finals = [
        (r.txnid_least_bits, r.new_status)
        for r in (await env.log_records())[10:]
        if r.metadata_op == Op.UPDATE
    ]
    assert sorted(finals) == [(0, TxnStatus.COMMITTED), (1, TxnStatus.ABORTED)]
    # Only txn 2's NEW record is left unacknowledged.
    assert env.live_record_count() == 1


@pytest.mark.parametrize("action", list(TxnAction))
async def test_restart_between_ends_resends_and_finishes(env: TcEnv, action: TxnAction) -> None:
    tc = await env.start()
    txn = await tc.new_txn(600_000)
    await tc.add_partitions(txn, [P1.topic, P2.topic])
    env.client.hold(P2)  # P1 hears the end, P2 does not (yet)
    ending = await end_task(tc, txn, action)
    await env.settle()
    assert env.client.ended_txns(P1) == [(txn, action)]
    tc = await env.restart()
    assert tc.get_txn_meta(txn).status is ING[action]
    ending.cancel()
    env.client.release()
    await env.settle()
    assert tc.active_transactions() == 0
    assert env.client.ended_txns(P1) == [(txn, action), (txn, action)]  # re-sent
    assert env.client.ended_txns(P2) == [(txn, action)]
    # The restarted coordinator wrote the terminal status (the ledger holding the
    # earlier records may already be trimmed away).
    updates = [r.new_status for r in await env.log_records() if r.metadata_op == Op.UPDATE]
    assert updates[-1] == FINAL[action]
    assert set(updates) <= {ING[action], FINAL[action]}


async def test_a_client_retry_after_restart_joins_the_redrive(env: TcEnv) -> None:
    tc = await env.start()
    txn = await tc.new_txn(600_000)
    await tc.add_partitions(txn, [P1.topic])
    env.client.hold()
    ending = await end_task(tc, txn, COMMIT)
    await env.settle()
    tc = await env.restart()
    ending.cancel()
    retry = await end_task(tc, txn, COMMIT)
    env.client.release()
    await retry
    assert tc.active_transactions() == 0


async def test_replayed_state_matches_a_fresh_apply(env: TcEnv) -> None:
    """INV-REC: the state rebuilt from the log is the state the live requests built."""
    tc = await env.start()
    txns = [await tc.new_txn(10_000 * (i + 1), owner=f"o{i}") for i in range(4)]
    await tc.add_partitions(txns[0], ["p1", "p2"])
    await tc.add_subscriptions(txns[1], [("t", "s")])
    await tc.end_txn(txns[2], ABORT)
    env.client.hold()
    await end_task(tc, txns[1], COMMIT)
    await env.settle()
    live = tc.transactions()
    # Rebuild from the log records still unacknowledged, through apply alone.
    rebuilt = CoordinatorState(0)
    async for pos, rec in tc.transaction_log.replay():
        rebuilt.apply(rec, pos)
    assert [m.snapshot() for m in rebuilt.txns()] == live
    assert rebuilt.low_watermark() == tc.low_watermark()
    tc = await env.restart()
    assert tc.transactions() == live


async def test_corrupt_log_refuses_to_start(env: TcEnv) -> None:
    ml = await env.open_ledger()
    await ml.add_entry(b"\xff\xff\xff\xff")
    await ml.close()
    with pytest.raises(CorruptRecordError):
        await env.start()
    assert env.tc is not None and env.tc.status is CoordinatorStatus.CLOSED
    await env.tc.ledger.close()
    env.tc = None


async def test_another_coordinators_log_refuses_to_start(env: TcEnv) -> None:
    ml = await env.open_ledger()
    await write_log(ml, [new_record(0, most=1)])
    await ml.close()
    with pytest.raises(CorruptRecordError, match="coordinator 0 log holds"):
        await env.start()
    assert env.tc is not None
    await env.tc.ledger.close()
    env.tc = None


async def test_trimming_keeps_the_log_small_and_the_counter(env: TcEnv) -> None:
    env.ledger_config = ledger_config(max_entries_per_ledger=4)
    tc = await env.start()
    for i in range(40):
        txn = await tc.new_txn(60_000)
        await tc.add_partitions(txn, [f"p{i}"])
        await tc.end_txn(txn, COMMIT if i % 2 else ABORT)
        await tc.transaction_log.wait_for_trim()
    assert len(tc.ledger.ledgers()) <= 3  # 160 records were written
    tc = await env.restart()
    assert tc.next_sequence() == 40


# ---------------------------------------------------------------- durable (file) storage


async def _use_and_end_all(env: TcEnv, n: int) -> list[TxnID]:
    assert env.tc is not None
    tc = env.tc
    ids = []
    for _ in range(n):
        txn = await tc.new_txn(600_000)
        await tc.add_partitions(txn, [P1.topic])
        ids.append(txn)
    for i, txn in enumerate(ids):
        await tc.end_txn(txn, COMMIT if i % 2 else ABORT)
    assert tc.active_transactions() == 0
    return ids


@pytest.mark.parametrize("restart", ["clean", "crash"])
async def test_ids_never_reused_after_every_record_was_deleted(
    tmp_path: Path, restart: str
) -> None:
    env = TcEnv("file", tmp_path)
    try:
        await env.start()
        used = await _use_and_end_all(env, 5)
        assert env.live_record_count() == 0  # every record is acknowledged
        tc = await (env.restart() if restart == "clean" else env.crash())
        assert tc.active_transactions() == 0
        fresh = await tc.new_txn(600_000)
        assert fresh.least_bits > max(t.least_bits for t in used)
        if restart == "clean":
            assert fresh.least_bits == 5
    finally:
        await env.close()


async def test_ids_never_reused_after_the_ledgers_were_trimmed(tmp_path: Path) -> None:
    env = TcEnv("file", tmp_path, ledger=ledger_config(max_entries_per_ledger=3))
    try:
        tc = await env.start()
        used: list[TxnID] = []
        for _ in range(4):
            used += await _use_and_end_all(env, 3)
            await tc.transaction_log.wait_for_trim()
        first_ledger_left = tc.ledger.ledgers()[0].ledger_id
        tc = await env.crash()
        # The records of the early transactions are physically gone.
        assert tc.ledger.ledgers()[0].ledger_id >= first_ledger_left
        assert all(r.txnid_least_bits >= 3 for r in await env.log_records())
        fresh = await tc.new_txn(600_000)
        assert fresh.least_bits > max(t.least_bits for t in used)
    finally:
        await env.close()


async def test_open_transactions_survive_a_crash(tmp_path: Path) -> None:
    env = TcEnv("file", tmp_path)
    try:
        tc = await env.start()
        txn = await tc.new_txn(30_000)
        await tc.add_partitions(txn, [P1.topic])
        await env.sched.advance(10_000)
        tc = await env.crash()
        meta = tc.get_txn_meta(txn)
        assert meta.status is TxnStatus.OPEN and meta.partitions() == [P1.topic]
        await env.sched.advance(19_999)
        assert tc.active_transactions() == 1
        await env.sched.advance(1)
        assert tc.ending_transactions() == [txn]
        # File appends complete on a writer thread: join the timeout's abort.
        await tc.end_txn(txn, ABORT)
        assert tc.active_transactions() == 0
        assert env.client.ended_txns(P1) == [(txn, ABORT)]
    finally:
        await env.close()
