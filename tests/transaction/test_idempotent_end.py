"""Idempotent commit/abort (PIP-255) on a coordinator with a preserver: repeated and
crossed ends, after a restart, after trimming and expiry, with the preserver failing
or slow, a commit racing the timeout, and the order of the chain's steps. Virtual clock,
in-memory ledger and store; nothing sleeps."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from quasar.errors import (
    InvalidTxnStatus,
    NotAllowedError,
    TransactionCoordinatorNotFound,
    TransactionNotFound,
    TransactionPreserverClosed,
)
from quasar.transaction import (
    CoordinatorConfig,
    CoordinatorStatus,
    TransactionCoordinator,
    TxnAction,
    TxnID,
    TxnStatus,
)
from quasar.transaction.coordinator import MemoryPreserverStore
from quasar.transaction.coordinator.preserver_format import decode_terminated
from quasar.transaction.coordinator.state import Op
from quasar.transaction.scheduler import settle

from .helpers import P1, P2, S1, TcEnv

COMMIT, ABORT = TxnAction.COMMIT, TxnAction.ABORT
HOUR_MS = 3_600_000
NAME = "app-1"


class PreservingEnv(TcEnv):
    """``TcEnv`` whose coordinator has a preserver over an in-memory store that
    survives restarts (as the compacted topic does)."""

    def __init__(self, kind: str = "memory", root: Path | None = None, **kw: object) -> None:
        kw.setdefault("config", CoordinatorConfig(transaction_meta_persist_count=4))
        super().__init__(kind, root, **kw)  # type: ignore[arg-type]
        self.store = MemoryPreserverStore()

    async def start(self) -> TransactionCoordinator:
        ml = await self.open_ledger()
        self.tc = TransactionCoordinator(
            self.tc_id, ml, self.clock, self.config, self.client,
            scheduler=self.sched, preserver_store=self.store,
        )
        await self.tc.start()
        return self.tc

    async def close(self) -> None:
        self.store.release()
        await super().close()


@pytest.fixture
async def penv() -> PreservingEnv:  # type: ignore[misc]
    e = PreservingEnv()
    yield e  # type: ignore[misc]
    await e.close()


async def open_txn(
    tc: TransactionCoordinator, name: str | None = NAME, timeout_ms: int = 600_000
) -> TxnID:
    txn = await tc.new_txn(timeout_ms, client_name=name)
    await tc.add_partitions(txn, [P1.topic, P2.topic])
    await tc.add_subscriptions(txn, [(S1.topic, "sub")])
    return txn


def preserved(env: PreservingEnv, name: str = NAME) -> dict[int, TxnStatus]:
    return {t.txn_id.least_bits: t.status for t in decode_terminated(env.store.data[name])}


# ----------------------------------------------------------------------------- semantics


@pytest.mark.parametrize("action", list(TxnAction))
async def test_repeated_end_succeeds_and_crossed_end_names_the_outcome(
    penv: PreservingEnv, action: TxnAction
) -> None:
    tc = await penv.start()
    txn = await open_txn(tc)
    await tc.end_txn(txn, action, NAME)
    assert tc.active_transactions() == 0
    outcome = TxnStatus.COMMITTED if action is COMMIT else TxnStatus.ABORTED
    for _ in range(3):
        await tc.end_txn(txn, action, NAME)  # success, nothing sent again
    opposite = ABORT if action is COMMIT else COMMIT
    with pytest.raises(InvalidTxnStatus, match=f"but it is in {outcome.name} status"):
        await tc.end_txn(txn, opposite, NAME)
    assert sum(c.txn_id == txn for c in penv.client.calls) == 3  # one end per participant
    # Without the client name, or under another one, it is unknown, as before PIP-255.
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(txn, action)
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(txn, action, "someone-else")
    # The outcome survives a restart (the store is the compacted topic).
    tc = await penv.restart()
    await tc.end_txn(txn, action, NAME)
    with pytest.raises(InvalidTxnStatus, match=f"but it is in {outcome.name} status"):
        await tc.end_txn(txn, opposite, NAME)
    assert preserved(penv) == {txn.least_bits: outcome}


async def test_unknown_transactions_are_still_not_found(penv: PreservingEnv) -> None:
    tc = await penv.start()
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(TxnID(0, 77), COMMIT, NAME)
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(TxnID(5, 0), COMMIT, NAME)  # another coordinator's id
    with pytest.raises(NotAllowedError, match="client name"):
        await tc.new_txn(1000, client_name="x" * 1025)
    blank = await tc.new_txn(1000, client_name="  ")  # blank counts as none
    assert tc.get_txn_meta(blank).client_name is None


async def test_without_client_name_nothing_is_preserved(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txn = await open_txn(tc, name=None)
    await tc.end_txn(txn, COMMIT)
    assert penv.store.writes == [] and len(tc.preserver) == 0
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(txn, COMMIT, NAME)


async def test_a_live_ending_transaction_answers_by_its_decision(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txn = await open_txn(tc)
    penv.client.hold()
    first = asyncio.ensure_future(tc.end_txn(txn, COMMIT, NAME))
    await settle()
    assert tc.get_txn_meta(txn).status is TxnStatus.COMMITTING
    with pytest.raises(InvalidTxnStatus, match="but it is in COMMITTING status"):
        await tc.end_txn(txn, ABORT, NAME)
    again = asyncio.ensure_future(tc.end_txn(txn, COMMIT, NAME))  # joins the first
    penv.client.release()
    await asyncio.gather(first, again)
    assert tc.active_transactions() == 0


async def test_trimmed_by_count_is_not_found(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txns = [await open_txn(tc) for _ in range(6)]
    for i, txn in enumerate(txns):
        await tc.end_txn(txn, COMMIT if i % 2 else ABORT, NAME)
    # transaction_meta_persist_count=4: the two oldest are forgotten.
    for txn in txns[:2]:
        with pytest.raises(TransactionNotFound):
            await tc.end_txn(txn, COMMIT, NAME)
    for i, txn in enumerate(txns[2:], start=2):
        await tc.end_txn(txn, COMMIT if i % 2 else ABORT, NAME)
    assert sorted(preserved(penv)) == [t.least_bits for t in txns[2:]]


async def test_expired_is_not_found(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txn = await open_txn(tc)
    await tc.end_txn(txn, COMMIT, NAME)
    await penv.sched.advance(72 * HOUR_MS)
    await tc.end_txn(txn, COMMIT, NAME)  # 72 h exactly: still there
    await penv.sched.advance(300_000)  # the next expiry check
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(txn, COMMIT, NAME)
    assert NAME not in penv.store.data  # tombstoned
    assert tc.preserver.stats.expirations == 1


async def test_timeout_abort_is_preserved_under_the_client_name(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txn = await open_txn(tc, timeout_ms=1_000)
    await penv.sched.advance(1_000)
    assert tc.active_transactions() == 0 and tc.stats.timed_out == 1
    await tc.end_txn(txn, ABORT, NAME)
    with pytest.raises(InvalidTxnStatus, match="but it is in ABORTED status"):
        await tc.end_txn(txn, COMMIT, NAME)


@pytest.mark.parametrize("first", ["commit", "timeout"])
async def test_commit_racing_the_timeout_has_one_outcome(
    penv: PreservingEnv, first: str
) -> None:
    """END_TXN(commit) and the deadline in the same virtual instant, both orders: one
    outcome, and every later commit or abort, before and after a restart, reports it."""
    tc = await penv.start()
    txn = await open_txn(tc, timeout_ms=1_000)
    await penv.sched.advance(999)
    commit: asyncio.Task[None] | None = None
    if first == "commit":
        commit = asyncio.get_running_loop().create_task(tc.end_txn(txn, COMMIT, NAME))
        await asyncio.sleep(0)  # one loop step: the commit is registered
    await penv.sched.advance(1)  # the deadline
    if commit is None:
        commit = asyncio.get_running_loop().create_task(tc.end_txn(txn, COMMIT, NAME))
    results = await asyncio.gather(commit, return_exceptions=True)
    outcome = TxnStatus.COMMITTED if first == "commit" else TxnStatus.ABORTED
    if outcome is TxnStatus.COMMITTED:
        assert results == [None]
    else:
        assert isinstance(results[0], InvalidTxnStatus)
    right, wrong = (COMMIT, ABORT) if outcome is TxnStatus.COMMITTED else (ABORT, COMMIT)
    for _ in range(2):
        await tc.end_txn(txn, right, NAME)
        with pytest.raises(InvalidTxnStatus, match=f"it is in {outcome.name} status"):
            await tc.end_txn(txn, wrong, NAME)
        tc = await penv.restart()
    ends = {a for c in penv.client.calls if c.txn_id == txn for a in [c.action]}
    assert ends == {right}  # participants only ever heard the one decision


# ----------------------------------------------------------------------------- the chain


async def test_flush_precedes_the_terminal_record_and_participants_are_dropped(
    penv: PreservingEnv,
) -> None:
    tc = await penv.start()
    txn = await open_txn(tc)
    penv.store.hold()
    ending = asyncio.ensure_future(tc.end_txn(txn, COMMIT, NAME))
    await settle()
    # Every participant has its end, the preserver write is pending: no terminal
    # record yet, and the participant lists are gone from memory.
    assert penv.client.participants_for(txn) == {P1, P2, S1}
    updates = [r.new_status for r in await penv.log_records() if r.metadata_op == Op.UPDATE]
    assert updates == [TxnStatus.COMMITTING]
    meta = tc.get_txn_meta(txn)
    assert meta.produced_partitions == set() and meta.acked_subscriptions == set()
    # An outcome is in memory already (appended), and answers nothing until durable.
    assert tc.preserver.find(NAME, txn) is not None
    penv.store.release()
    await ending
    updates = [r.new_status for r in await penv.log_records() if r.metadata_op == Op.UPDATE]
    assert updates == [TxnStatus.COMMITTING, TxnStatus.COMMITTED]
    assert preserved(penv) == {txn.least_bits: TxnStatus.COMMITTED}


async def test_appends_of_concurrent_ends_share_writes(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txns = [await open_txn(tc) for _ in range(4)]
    other = await open_txn(tc, name="app-2")
    ends = [asyncio.ensure_future(tc.end_txn(t, COMMIT, NAME)) for t in txns]
    ends.append(asyncio.ensure_future(tc.end_txn(other, ABORT, "app-2")))
    await asyncio.gather(*ends)
    # Five transactions ending together: one flush round, one message per client name.
    assert sorted(penv.store.writes) == [NAME, "app-2"]
    assert tc.preserver.stats.flushes == 1 and tc.preserver.stats.appends == 5
    assert len(preserved(penv)) == 4
    assert preserved(penv, "app-2") == {other.least_bits: TxnStatus.ABORTED}


async def test_client_name_is_logged_and_recovered(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txn = await open_txn(tc)
    news = [r for r in await penv.log_records() if r.metadata_op == Op.NEW]
    assert [r.clientName for r in news] == [NAME]
    tc = await penv.restart()
    assert tc.get_txn_meta(txn).client_name == NAME
    live, terminated = tc.client_transactions(NAME)
    assert [m.txn_id for m in live] == [txn] and terminated == []
    await tc.end_txn(txn, ABORT, NAME)
    live, terminated = tc.client_transactions(NAME)
    assert live == [] and [(t.txn_id, t.status) for t in terminated] == [(txn, TxnStatus.ABORTED)]


# ----------------------------------------------------------------------------- faults


async def test_preserver_unavailable_fails_fast_then_the_end_completes(
    penv: PreservingEnv,
) -> None:
    tc = await penv.start()
    txn = await open_txn(tc)
    penv.store.fail_writes(None)
    with pytest.raises(TransactionPreserverClosed):
        await tc.end_txn(txn, COMMIT, NAME)
    # The decision stands: still COMMITTING, retries get the same retryable error
    # (never a wrong answer), the opposite action is refused.
    assert tc.get_txn_meta(txn).status is TxnStatus.COMMITTING
    with pytest.raises(TransactionPreserverClosed):
        await tc.end_txn(txn, COMMIT, NAME)
    with pytest.raises(InvalidTxnStatus, match="COMMITTING"):
        await tc.end_txn(txn, ABORT, NAME)
    penv.store.fail_writes(0)
    await penv.sched.advance(1_000)  # the background resume
    assert tc.active_transactions() == 0
    await tc.end_txn(txn, COMMIT, NAME)
    assert preserved(penv) == {txn.least_bits: TxnStatus.COMMITTED}


async def test_a_stuck_preserver_times_out_instead_of_hanging(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txn = await open_txn(tc)
    penv.store.hold()
    ending = asyncio.ensure_future(tc.end_txn(txn, COMMIT, NAME))
    await penv.sched.advance(10_000)
    with pytest.raises(TransactionPreserverClosed, match="longer than"):
        await ending
    penv.store.release()
    await penv.sched.advance(1_000)
    await tc.end_txn(txn, COMMIT, NAME)
    assert tc.active_transactions() == 0


async def test_closing_while_ending_is_preserver_closed_and_recovery_finishes(
    penv: PreservingEnv,
) -> None:
    tc = await penv.start()
    txn = await open_txn(tc)
    penv.store.hold()
    ending = asyncio.ensure_future(tc.end_txn(txn, ABORT, NAME))
    await settle()
    closing = asyncio.ensure_future(tc.close())
    await settle()
    with pytest.raises(TransactionPreserverClosed):
        await ending  # answered at once
    assert not closing.done()  # the write in flight lands before the coordinator goes
    penv.store.release()
    await closing
    await tc.ledger.close()
    penv.tc = None
    tc = await penv.start()  # re-drives ABORTING: appends and flushes again
    await settle()
    assert tc.active_transactions() == 0
    await tc.end_txn(txn, ABORT, NAME)
    with pytest.raises(InvalidTxnStatus, match="ABORTED"):
        await tc.end_txn(txn, COMMIT, NAME)


async def test_unreadable_preserver_fails_the_load(penv: PreservingEnv) -> None:
    penv.store.fail_reads()
    with pytest.raises(TransactionPreserverClosed, match="cannot read"):
        await penv.start()
    assert penv.tc is not None and penv.tc.status is CoordinatorStatus.CLOSED
    with pytest.raises(TransactionCoordinatorNotFound):
        await penv.tc.end_txn(TxnID(0, 1), COMMIT, NAME)
    await penv.tc.ledger.close()
    penv.tc = None
    tc = await penv.start()  # the next load (the next TC_CLIENT_CONNECT) succeeds
    assert tc.status is CoordinatorStatus.READY


@pytest.mark.parametrize("action", list(TxnAction))
@pytest.mark.parametrize("pause", ["before_ends", "during_flush"])
async def test_restart_in_the_middle_of_the_chain_gives_the_same_answer(
    penv: PreservingEnv, pause: str, action: TxnAction
) -> None:
    """The end is paused after the decision (before the participants, or while the
    preserver writes) and the coordinator goes away; after the reload it finishes the
    decided end, and repeated ends answer that way. (kill -9 at each crash point of a
    real broker: tests/crash/test_preserver_crash_points.py.)"""
    tc = await penv.start()
    txn = await open_txn(tc)
    if pause == "before_ends":
        penv.client.hold()
    else:
        penv.store.hold()
    ending = asyncio.ensure_future(tc.end_txn(txn, action, NAME))
    await settle()
    decided = TxnStatus.COMMITTING if action is COMMIT else TxnStatus.ABORTING
    assert tc.get_txn_meta(txn).status is decided
    stopping = asyncio.ensure_future(penv.stop())
    await settle()
    [lost] = await asyncio.gather(ending, return_exceptions=True)
    assert isinstance(lost, TransactionPreserverClosed)  # retryable, never wrong
    penv.client.release()
    penv.store.release()
    await stopping
    tc = await penv.start()
    await settle()
    assert tc.active_transactions() == 0
    outcome = TxnStatus.COMMITTED if action is COMMIT else TxnStatus.ABORTED
    opposite = ABORT if action is COMMIT else COMMIT
    for _ in range(2):
        await tc.end_txn(txn, action, NAME)
        with pytest.raises(InvalidTxnStatus, match=outcome.name):
            await tc.end_txn(txn, opposite, NAME)
        tc = await penv.restart()
    assert {c.action for c in penv.client.calls if c.txn_id == txn} == {action}
