"""The registry: naming, lazy and eager loading, routing, unknown ids, reloads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from quasar.clock import ManualClock
from quasar.errors import PersistenceError, TransactionCoordinatorNotFound
from quasar.storage import (
    ManagedLedgerConfig,
    MemoryManagedLedgerFactory,
    MemoryMetadataStore,
)
from quasar.storage.api import ManagedLedger
from quasar.transaction import (
    CoordinatorStatus,
    FakeTransactionBufferClient,
    TransactionCoordinatorRegistry,
    TxnAction,
    TxnID,
    VirtualScheduler,
    transaction_log_ledger_name,
    transaction_log_topic,
)

from .helpers import FailingLedger


class Env:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.sched = VirtualScheduler(self.clock)
        self.factory = MemoryManagedLedgerFactory(MemoryMetadataStore(), clock=self.clock)
        self.client = FakeTransactionBufferClient()

    def registry(self, count: int = 4, **kw: Any) -> TransactionCoordinatorRegistry:
        return TransactionCoordinatorRegistry(
            kw.pop("factory", self.factory), self.client, coordinator_count=count,
            clock=self.clock, scheduler=self.sched, **kw,
        )


@pytest.fixture
async def renv() -> AsyncIterator[Env]:
    e = Env()
    yield e
    await e.factory.close()


def test_log_names() -> None:
    assert transaction_log_topic(3) == "persistent://pulsar/system/__transaction_log_3"
    assert transaction_log_ledger_name(3) == "pulsar/system/persistent/__transaction_log_3"


async def test_lazy_load_and_routing(renv: Env) -> None:
    reg = renv.registry()
    with pytest.raises(TransactionCoordinatorNotFound, match="with id 2 not found: not loaded"):
        reg.get(2)
    tc = await reg.connect(2)
    assert reg.get(2) is tc and reg.loaded() == [2]
    assert tc.ledger.name == "pulsar/system/persistent/__transaction_log_2"
    txn = await reg.get(2).new_txn(60_000)
    assert txn == TxnID(2, 0)
    assert reg.route(txn) is tc
    await reg.route(txn).add_partitions(txn, ["p"])
    await reg.route(txn).add_subscriptions(txn, [("t", "s")])
    await reg.route(txn).end_txn(txn, TxnAction.COMMIT)
    assert tc.active_transactions() == 0
    with pytest.raises(TransactionCoordinatorNotFound):
        reg.route(TxnID(1, 0))  # coordinator 1 is not loaded here
    await reg.close()


@pytest.mark.parametrize("tc_id", [-1, 4, 100])
async def test_unknown_coordinator_id(renv: Env, tc_id: int) -> None:
    reg = renv.registry(count=4)
    with pytest.raises(TransactionCoordinatorNotFound, match=f"with id {tc_id} not found"):
        await reg.connect(tc_id)
    with pytest.raises(TransactionCoordinatorNotFound):
        reg.get(tc_id)
    await reg.close()


async def test_eager_start_and_custom_naming(renv: Env) -> None:
    reg = renv.registry(count=3, log_name=lambda n: f"txnlog-{n}",
                        ledger_config=ManagedLedgerConfig(max_entries_per_ledger=10))
    await reg.start()
    assert reg.loaded() == [0, 1, 2]
    assert sorted(renv.factory.list_names()) == ["txnlog-0", "txnlog-1", "txnlog-2"]
    await reg.close()
    assert reg.loaded() == []
    with pytest.raises(TransactionCoordinatorNotFound):
        await reg.connect(0)


async def test_concurrent_connects_share_one_load(renv: Env) -> None:
    reg = renv.registry()
    first = asyncio.ensure_future(reg.connect(1))
    await asyncio.sleep(0)  # one loop step: the load has started
    with pytest.raises(TransactionCoordinatorNotFound):
        reg.get(1)  # still loading: retryable "not found"
    second = asyncio.ensure_future(reg.connect(1))
    a, b = await asyncio.gather(first, second)
    assert a is b and a.status is CoordinatorStatus.READY
    await reg.close()


async def test_reload_recovers_state(renv: Env) -> None:
    reg = renv.registry()
    tc = await reg.connect(0)
    txn = await tc.new_txn(60_000)
    await reg.unload(0)
    with pytest.raises(TransactionCoordinatorNotFound):
        reg.get(0)
    tc2 = await reg.connect(0)
    assert tc2 is not tc
    assert tc2.get_txn_meta(txn).txn_id == txn
    assert (await tc2.new_txn(60_000)).least_bits == 1
    await reg.close()


class FlakyFactory:
    """Hands out a ledger whose appends fail after one success, the first time only."""

    def __init__(self, inner: MemoryManagedLedgerFactory) -> None:
        self.inner = inner
        self.opens = 0

    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> ManagedLedger:
        ml = await self.inner.open(name, config)
        self.opens += 1
        return FailingLedger(ml, ok=1) if self.opens == 1 else ml  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_fenced_coordinator_is_dropped_and_reloaded(renv: Env) -> None:
    factory = FlakyFactory(renv.factory)
    reg = renv.registry(factory=factory)
    tc = await reg.connect(0)
    txn = await tc.new_txn(60_000)
    with pytest.raises(TransactionCoordinatorNotFound) as info:
        await tc.add_partitions(txn, ["p"])
    assert isinstance(info.value.__cause__, PersistenceError)
    with pytest.raises(TransactionCoordinatorNotFound):
        reg.get(0)
    tc2 = await reg.connect(0)  # the client reconnects: a fresh load
    assert tc2 is not tc and factory.opens == 2
    await tc2.add_partitions(txn, ["p"])
    assert tc2.get_txn_meta(txn).partitions() == ["p"]
    await reg.close()


async def test_failed_load_is_retryable(renv: Env) -> None:
    ml = await renv.factory.open(transaction_log_ledger_name(0))
    await ml.add_entry(b"\xff\xff\xff")
    await ml.close()
    reg = renv.registry()
    with pytest.raises(TransactionCoordinatorNotFound, match="recovery failed") as info:
        await reg.connect(0)
    assert info.value.retryable
    assert reg.loaded() == []
    await reg.close()
