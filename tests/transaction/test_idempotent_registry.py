"""The registry with preservers: client names pass through, the outcome is answered
after the coordinator is reloaded, and a client name's transactions are listed over
every coordinator (the admin endpoint's data), with the ones that cannot load named."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest

from quasar.broker.admin_adapter import AdminAdapter
from quasar.broker.transactions import client_transactions_json
from quasar.clock import ManualClock
from quasar.errors import InvalidTxnStatus, TransactionNotFound
from quasar.storage import MemoryManagedLedgerFactory, MemoryMetadataStore
from quasar.transaction import (
    FakeTransactionBufferClient,
    TransactionCoordinatorRegistry,
    TxnAction,
    TxnID,
    TxnStatus,
    VirtualScheduler,
)
from quasar.transaction.coordinator import BROKER, Caller, MemoryPreserverStore

NAME = "etl-7"


class Env:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.sched = VirtualScheduler(self.clock)
        self.factory = MemoryManagedLedgerFactory(MemoryMetadataStore(), clock=self.clock)
        self.client = FakeTransactionBufferClient()
        self.stores = {i: MemoryPreserverStore() for i in range(3)}

    def registry(self) -> TransactionCoordinatorRegistry:
        return TransactionCoordinatorRegistry(
            self.factory, self.client, coordinator_count=3, clock=self.clock,
            scheduler=self.sched, preserver_store=self.stores.__getitem__,
        )


@pytest.fixture
async def penv() -> AsyncIterator[Env]:
    e = Env()
    yield e
    await e.factory.close()


async def test_ends_are_answered_after_a_reload(penv: Env) -> None:
    reg = penv.registry()
    await reg.start()
    committed = await reg.get(1).new_txn(60_000, client_name=NAME)
    aborted = await reg.get(2).new_txn(60_000, client_name=NAME)
    await reg.route(committed).end_txn(committed, TxnAction.COMMIT, NAME)
    await reg.route(aborted).end_txn(aborted, TxnAction.ABORT, NAME)
    await reg.unload(1)
    await reg.connect(1)
    await reg.route(committed).end_txn(committed, TxnAction.COMMIT, NAME)
    with pytest.raises(InvalidTxnStatus, match="ABORTED"):
        await reg.route(aborted).end_txn(aborted, TxnAction.COMMIT, NAME)
    with pytest.raises(TransactionNotFound):
        await reg.route(committed).end_txn(committed, TxnAction.COMMIT)
    await reg.close()


async def test_client_transactions_over_every_coordinator(penv: Env) -> None:
    reg = penv.registry()
    await reg.start()
    ended = await reg.get(0).new_txn(60_000, client_name=NAME)
    await reg.route(ended).end_txn(ended, TxnAction.COMMIT, NAME)
    live = await reg.get(1).new_txn(60_000, client_name=NAME)
    await reg.get(1).new_txn(60_000, client_name="someone-else")
    # Coordinator 2 is not loaded, and cannot load: its preserver is unreadable.
    await reg.unload(2)
    penv.stores[2].fail_reads(10)
    found = await reg.client_transactions(NAME)
    assert [m.txn_id for m in found.live] == [live]
    assert [(t.txn_id, t.status) for t in found.terminated] == [(ended, TxnStatus.COMMITTED)]
    assert found.unavailable == [2]
    body = client_transactions_json(found)
    assert body == {
        "clientName": NAME,
        "open": [{
            "txnId": "(1,0)", "mostSigBits": 1, "leastSigBits": 0, "coordinatorId": 1,
            "status": "OPEN", "owner": None, "openTimestamp": penv.clock.wall_ms(),
            "timeoutAt": penv.clock.wall_ms() + 60_000,
        }],
        "terminated": [{
            "txnId": "(0,0)", "mostSigBits": 0, "leastSigBits": 0, "coordinatorId": 0,
            "status": "COMMITTED", "owner": None, "endTime": penv.clock.wall_ms(),
        }],
        "unavailableCoordinators": [2],
    }
    assert TxnID(1, 1) not in {m.txn_id for m in found.live}
    await reg.close()


async def test_client_transactions_of_a_role_over_every_coordinator(penv: Env) -> None:
    """A role sees its own transactions (and those without owner) under a client
    name; a super-user sees every role's, each with its owner."""
    reg = penv.registry()
    await reg.start()
    alice, bob = Caller("alice"), Caller("bob")
    ended = await reg.get(0).new_txn(60_000, owner="alice", client_name=NAME)
    await reg.route(ended).end_txn(ended, TxnAction.COMMIT, NAME, alice)
    theirs = await reg.get(1).new_txn(60_000, owner="bob", client_name=NAME)
    anyones = await reg.get(2).new_txn(60_000, client_name=NAME)

    found = {c: await reg.client_transactions(NAME, c) for c in (alice, bob, BROKER)}

    def seen(caller: Caller) -> set[tuple[str, str | None]]:
        body = client_transactions_json(found[caller])
        return {(t["txnId"], t["owner"]) for t in body["open"] + body["terminated"]}

    assert seen(alice) == {(str(ended), "alice"), (str(anyones), None)}
    assert seen(bob) == {(str(theirs), "bob"), (str(anyones), None)}
    assert seen(BROKER) == seen(alice) | seen(bob)
    await reg.close()


async def test_the_admin_adapter_passes_the_role_on() -> None:
    calls: list[tuple[str, str | None, bool]] = []

    class Transactions:
        async def client_transactions(
            self, name: str, *, role: str | None, superuser: bool,
            coordinator_id: int | None = None,
        ) -> dict[str, object]:
            calls.append((name, role, superuser))
            return {}

    adapter = AdminAdapter(SimpleNamespace(transactions=Transactions()))  # type: ignore[arg-type]
    await adapter.client_transactions(NAME, role="bob", superuser=False)
    await adapter.client_transactions(NAME, role=None, superuser=True)
    assert calls == [(NAME, "bob", False), (NAME, None, True)]
