"""Transaction ownership on the coordinator and the preserver: only the owner role or
a super-user may add to, end, or read the preserved outcome of a transaction; a
transaction opened without authentication is anyone's. Virtual clock, in-memory
ledger and store."""

from __future__ import annotations

import pytest

from quasar.errors import InvalidTxnStatus, ServerError, TransactionNotFound
from quasar.transaction import TransactionNotOwned, TxnAction, TxnStatus
from quasar.transaction.coordinator import ANONYMOUS, BROKER, Caller

from .helpers import P1, S1
from .test_idempotent_end import PreservingEnv

COMMIT, ABORT = TxnAction.COMMIT, TxnAction.ABORT
NAME = "etl-7"
ALICE = Caller("alice")
BOB = Caller("bob")
ROOT = Caller("root", superuser=True)


@pytest.fixture
async def penv() -> PreservingEnv:  # type: ignore[misc]
    e = PreservingEnv()
    yield e  # type: ignore[misc]
    await e.close()


@pytest.mark.parametrize(
    ("caller", "owner", "allowed"),
    [
        (ALICE, "alice", True),
        (BOB, "alice", False),
        (ROOT, "alice", True),
        (ANONYMOUS, "alice", False),  # no role: not the owner, never a super-user
        (BROKER, "alice", True),
        (BOB, None, True),  # opened without authentication: anyone's
        (ANONYMOUS, None, True),
    ],
)
def test_who_may_act_on_a_transaction(caller: Caller, owner: str | None, allowed: bool) -> None:
    assert caller.may_act_on(owner) is allowed


async def test_another_role_can_neither_add_to_nor_end_a_transaction(
    penv: PreservingEnv,
) -> None:
    tc = await penv.start()
    txn = await tc.new_txn(60_000, owner="alice", client_name=NAME)
    records = len(await penv.log_records())
    for refused in (
        lambda: tc.add_partitions(txn, [P1.topic], BOB),
        lambda: tc.add_subscriptions(txn, [(S1.topic, "sub")], BOB),
        lambda: tc.end_txn(txn, COMMIT, NAME, BOB),
        lambda: tc.end_txn(txn, ABORT, None, ANONYMOUS),
    ):
        with pytest.raises(TransactionNotOwned, match="neither the owner") as info:
            await refused()
        # On the wire it is Pulsar's TransactionNotFound.
        assert isinstance(info.value, TransactionNotFound)
        assert info.value.code is ServerError.TransactionNotFound
    assert len(await penv.log_records()) == records  # nothing was written
    meta = tc.get_txn_meta(txn)
    assert meta.status is TxnStatus.OPEN and not meta.produced_partitions
    assert tc.refuses(txn, BOB) and not tc.refuses(txn, ALICE) and not tc.refuses(txn, ROOT)
    # The owner's transaction is unaffected.
    await tc.add_partitions(txn, [P1.topic], ALICE)
    await tc.add_subscriptions(txn, [(S1.topic, "sub")], ALICE)
    await tc.end_txn(txn, COMMIT, NAME, ALICE)
    assert penv.client.participants_for(txn) == {P1, S1}


async def test_a_superuser_may_end_another_roles_transaction(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txn = await tc.new_txn(60_000, owner="alice", client_name=NAME)
    await tc.add_partitions(txn, [P1.topic], ROOT)
    await tc.end_txn(txn, ABORT, None, ROOT)
    with pytest.raises(TransactionNotFound):
        tc.get_txn_meta(txn)


async def test_a_transaction_without_owner_is_anyones(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txn = await tc.new_txn(60_000, client_name=NAME)
    await tc.add_partitions(txn, [P1.topic], BOB)
    await tc.end_txn(txn, COMMIT, NAME, ANONYMOUS)
    await tc.end_txn(txn, COMMIT, NAME, BOB)  # the preserved outcome, too


async def test_a_transaction_unknown_here_is_not_refused(penv: PreservingEnv) -> None:
    tc = await penv.start()
    txn = await tc.new_txn(60_000, owner="alice")
    await tc.end_txn(txn, COMMIT, caller=ALICE)
    assert not tc.refuses(txn, BOB)  # ended: the participants answer for it


async def test_a_preserved_outcome_is_answered_only_to_its_role(penv: PreservingEnv) -> None:
    tc = await penv.start()
    committed = await tc.new_txn(60_000, owner="alice", client_name=NAME)
    await tc.end_txn(committed, COMMIT, NAME, ALICE)
    # The same client name under another role: not found, neither read nor reused.
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(committed, COMMIT, NAME, BOB)
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(committed, ABORT, NAME, BOB)  # not even the outcome leaks
    await tc.end_txn(committed, COMMIT, NAME, ALICE)
    with pytest.raises(InvalidTxnStatus, match="COMMITTED"):
        await tc.end_txn(committed, ABORT, NAME, ALICE)
    await tc.end_txn(committed, COMMIT, NAME, ROOT)  # a super-user may read any
    # Still so after a restart (the keys are durable).
    tc = await penv.restart()
    with pytest.raises(TransactionNotFound):
        await tc.end_txn(committed, COMMIT, NAME, BOB)
    await tc.end_txn(committed, COMMIT, NAME, ALICE)


async def test_outcomes_are_kept_apart_per_role(penv: PreservingEnv) -> None:
    """Role B ending many transactions under A's client name does not push A's
    outcomes out of the bounded list (persist_count is per role and name)."""
    tc = await penv.start()
    mine = await tc.new_txn(60_000, owner="alice", client_name=NAME)
    await tc.end_txn(mine, COMMIT, NAME, ALICE)
    for _ in range(tc.preserver.persist_count + 2):
        theirs = await tc.new_txn(60_000, owner="bob", client_name=NAME)
        await tc.end_txn(theirs, ABORT, NAME, BOB)
    await tc.end_txn(mine, COMMIT, NAME, ALICE)
    assert tc.preserver.stats.client_names == 2
    assert {t.owner for t in tc.preserver.terminated(NAME, ROOT)} == {"alice", "bob"}
    assert [t.txn_id for t in tc.preserver.terminated(NAME, ALICE)] == [mine]


async def test_client_transactions_show_the_callers_own(penv: PreservingEnv) -> None:
    tc = await penv.start()
    ended = await tc.new_txn(60_000, owner="alice", client_name=NAME)
    await tc.end_txn(ended, COMMIT, NAME, ALICE)
    live_a = await tc.new_txn(60_000, owner="alice", client_name=NAME)
    live_b = await tc.new_txn(60_000, owner="bob", client_name=NAME)
    anyones = await tc.new_txn(60_000, client_name=NAME)

    def seen(caller: Caller) -> tuple[list[object], list[object]]:
        live, terminated = tc.client_transactions(NAME, caller)
        return [m.txn_id for m in live], [t.txn_id for t in terminated]

    assert seen(ALICE) == ([live_a, anyones], [ended])
    assert seen(BOB) == ([live_b, anyones], [])
    assert seen(ROOT) == ([live_a, live_b, anyones], [ended])
    assert seen(BROKER) == seen(ROOT)
    live, terminated = tc.client_transactions(NAME, ROOT)
    assert [m.owner for m in live] == ["alice", "bob", None]
    assert [t.owner for t in terminated] == ["alice"]
