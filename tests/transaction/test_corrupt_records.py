"""Unreadable coordinator-log entries: the error names the log and position, the
registry remembers why a coordinator failed, counts the record once, and an entry
set aside is skipped by every later load, with ids continuing past it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from quasar.clock import ManualClock
from quasar.errors import (
    CorruptRecordError,
    PreconditionFailedError,
    ResourceNotFoundError,
    TransactionCoordinatorNotFound,
)
from quasar.storage import MemoryManagedLedgerFactory, MemoryMetadataStore, Position
from quasar.transaction import (
    CoordinatorStatus,
    FakeTransactionBufferClient,
    TransactionCoordinatorRegistry,
    TxnAction,
    VirtualScheduler,
    transaction_log_ledger_name,
)
from quasar.transaction.batched_log.set_aside import parse_position
from quasar.transaction.coordinator.log import SET_ASIDE_ID_GAP
from quasar.transaction.corrupt_records import CorruptLog, CorruptRecords

GARBAGE = b"\x0e\x01\x00\x07garbage"


class Env:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.sched = VirtualScheduler(self.clock)
        self.factory = MemoryManagedLedgerFactory(MemoryMetadataStore(), clock=self.clock)
        self.corrupt = CorruptRecords()

    def registry(self) -> TransactionCoordinatorRegistry:
        return TransactionCoordinatorRegistry(
            self.factory, FakeTransactionBufferClient(), coordinator_count=2,
            clock=self.clock, scheduler=self.sched, corrupt_records=self.corrupt,
        )

    async def append(self, tc_id: int, data: bytes) -> Position:
        ml = await self.factory.open(transaction_log_ledger_name(tc_id))
        position = await ml.add_entry(data)
        await ml.close()
        return position


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    e = Env()
    yield e
    await e.factory.close()


async def test_unreadable_entry_fails_only_its_coordinator(env: Env) -> None:
    reg = env.registry()
    tc0 = await reg.connect(0)
    txn = await tc0.new_txn(60_000)
    await reg.close()
    bad = await env.append(0, GARBAGE)

    reg = env.registry()
    with pytest.raises(TransactionCoordinatorNotFound, match="unknown batched log entry"):
        await reg.connect(0)
    failure = reg.load_failures[0]
    assert failure.log_name == transaction_log_ledger_name(0)
    assert failure.position == str(bad)
    assert str(bad) in failure.error
    assert (await reg.connect(1)).status is CoordinatorStatus.READY
    # A second attempt fails the same way but counts the record once.
    with pytest.raises(TransactionCoordinatorNotFound):
        await reg.connect(0)
    assert env.corrupt.counts[CorruptLog.TRANSACTION_LOG] == 1

    data = await reg.set_aside(0, bad)
    assert data == GARBAGE
    tc0 = reg.get(0)
    assert 0 not in reg.load_failures
    # The transaction recorded before the entry survives; new ids skip the gap.
    assert [m.txn_id for m in tc0.transactions()] == [txn]
    assert tc0.next_sequence() >= SET_ASIDE_ID_GAP
    await tc0.end_txn(txn, TxnAction.COMMIT)
    await reg.close()

    reg = env.registry()  # set aside durably: a restart loads it
    assert (await reg.connect(0)).next_sequence() >= SET_ASIDE_ID_GAP
    await reg.close()


async def test_set_aside_takes_only_an_unreadable_entry(env: Env) -> None:
    reg = env.registry()
    tc0 = await reg.connect(0)
    await tc0.new_txn(60_000)
    with pytest.raises(PreconditionFailedError, match="serving"):
        await reg.set_aside(0, Position(0, 0))
    await reg.close()
    bad = await env.append(0, GARBAGE)
    reg = env.registry()
    with pytest.raises(TransactionCoordinatorNotFound):
        await reg.connect(0)
    ml = await env.factory.open(transaction_log_ledger_name(0))
    readable = ml.first_position  # the NEW record of the transaction
    await ml.close()
    assert readable < bad
    with pytest.raises(PreconditionFailedError, match="readable"):
        await reg.set_aside(0, readable)
    with pytest.raises(ResourceNotFoundError):
        await reg.set_aside(0, Position(bad.ledger_id, bad.entry_id + 5))
    await reg.set_aside(0, bad)
    await reg.close()


def test_parse_position() -> None:
    assert parse_position(" 12:3 ") == Position(12, 3)
    for bad in ("12", "a:b", "-1:0", "1:2:3", ""):
        with pytest.raises(ValueError):
            parse_position(bad)


def test_corrupt_records_counts_each_record_once() -> None:
    records = CorruptRecords("c")
    exc = CorruptRecordError("x", log_name="l", position="1:2")
    records.found(CorruptLog.PENDING_ACK_LOG, exc)
    records.found(CorruptLog.PENDING_ACK_LOG, exc)
    records.found(CorruptLog.PENDING_ACK_LOG, CorruptRecordError("y", log_name="l",
                                                                  position="1:3"))
    (family,) = records.collect()
    counts = {s.labels["log"]: s.value for s in family.samples if s.name.endswith("_total")}
    assert counts == {
        "transaction_log": 0, "pending_ack_log": 2, "buffer_snapshot": 0, "system_table": 0
    }


async def test_a_further_unreadable_entry_is_named_after_the_first_is_set_aside(
    env: Env,
) -> None:
    reg = env.registry()
    await reg.connect(0)
    await reg.close()
    first = await env.append(0, GARBAGE)
    second = await env.append(0, GARBAGE + b"2")
    reg = env.registry()
    with pytest.raises(TransactionCoordinatorNotFound):
        await reg.connect(0)
    # The last entry is read first (for the id high-water mark), then the replay.
    assert reg.load_failures[0].position == str(second)
    assert await reg.set_aside(0, second) == GARBAGE + b"2"
    assert reg.load_failures[0].position == str(first)
    await reg.set_aside(0, first)
    assert reg.get(0).status is CoordinatorStatus.READY
    assert env.corrupt.counts[CorruptLog.TRANSACTION_LOG] == 2
    await reg.close()
