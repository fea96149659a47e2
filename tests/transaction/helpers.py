"""Test helpers: a restartable coordinator over in-memory or file storage."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quasar.clock import ManualClock
from quasar.errors import ManagedLedgerClosed, PersistenceError
from quasar.protocol import pb
from quasar.storage import (
    FileManagedLedgerFactory,
    ManagedLedgerConfig,
    MemoryManagedLedgerFactory,
    MemoryMetadataStore,
    SqliteMetadataStore,
)
from quasar.storage.api import ManagedLedger, Position
from quasar.storage.ledger_factory import BaseManagedLedgerFactory
from quasar.transaction import (
    CoordinatorConfig,
    FakeTransactionBufferClient,
    Participant,
    TransactionCoordinator,
    TxnID,
    VirtualScheduler,
)
from quasar.transaction.batched_log import BatchedLogControl
from quasar.transaction.coordinator import Record, TransactionLog, decode_entry
from quasar.transaction.coordinator.state import Op
from quasar.transaction.scheduler import settle
from quasar.transaction.txn_status import TxnStatus

LOG_NAME = "pulsar/system/persistent/__transaction_log_0"
P1 = Participant("persistent://t/ns/a-partition-0")
P2 = Participant("persistent://t/ns/a-partition-1")
S1 = Participant("persistent://t/ns/b", "sub")


def ledger_config(**overrides: object) -> ManagedLedgerConfig:
    values: dict[str, object] = {"min_ledger_rollover_time_minutes": 0}
    values.update(overrides)
    return ManagedLedgerConfig(**values)  # type: ignore[arg-type]


class TcEnv:
    """One coordinator (id ``tc_id``) that a test can restart, on a virtual clock.

    ``kind="memory"``: data lives in the factory across restarts (clean restarts only).
    ``kind="file"``: real files under ``root``; ``crash()`` restarts as after kill -9.
    """

    def __init__(
        self,
        kind: str = "memory",
        root: Path | None = None,
        *,
        tc_id: int = 0,
        config: CoordinatorConfig | None = None,
        batched_log: BatchedLogControl | None = None,
        ledger: ManagedLedgerConfig | None = None,
        wrap: Callable[[ManagedLedger], ManagedLedger] | None = None,
    ) -> None:
        self.kind = kind
        self.root = root
        self.tc_id = tc_id
        self.clock = ManualClock()
        self.sched = VirtualScheduler(self.clock)
        self.client = FakeTransactionBufferClient()
        self.config = config or CoordinatorConfig()
        self.batched_log = batched_log
        self.ledger_config = ledger or ledger_config()
        self.wrap = wrap
        self.memory_meta = MemoryMetadataStore()
        self.factory: BaseManagedLedgerFactory = self._make_factory()
        self.tc: TransactionCoordinator | None = None

    def _make_factory(self) -> BaseManagedLedgerFactory:
        if self.kind == "memory":
            return MemoryManagedLedgerFactory(self.memory_meta, clock=self.clock)
        assert self.root is not None
        self.sqlite = SqliteMetadataStore(self.root / "metadata.db")
        return FileManagedLedgerFactory(self.root / "data", self.sqlite, clock=self.clock)

    async def open_ledger(self) -> ManagedLedger:
        return await self.factory.open(LOG_NAME, self.ledger_config)

    async def start(self) -> TransactionCoordinator:
        ml = await self.open_ledger()
        if self.wrap is not None:
            ml = self.wrap(ml)
        self.tc = TransactionCoordinator(
            self.tc_id, ml, self.clock, self.config, self.client, scheduler=self.sched,
            batched_log=self.batched_log,
        )
        await self.tc.start()
        return self.tc

    async def stop(self) -> None:
        """Clean shutdown of the coordinator and its ledger."""
        if self.tc is not None:
            await self.tc.close()
            await self.tc.ledger.close()
            self.tc = None

    async def restart(self) -> TransactionCoordinator:
        await self.stop()
        if self.kind == "file":
            await self.factory.close()
            self.sqlite.close()
            self.factory = self._make_factory()
        return await self.start()

    async def crash(self) -> TransactionCoordinator:
        """File storage only: drop everything unsynced, as after kill -9."""
        assert isinstance(self.factory, FileManagedLedgerFactory)
        if self.tc is not None:
            await self.tc.close()  # stops its tasks; the abandon below loses state
        self.factory.abandon()
        self.sqlite.close()
        self.tc = None
        self.factory = self._make_factory()
        return await self.start()

    async def close(self) -> None:
        self.client.release()
        await self.stop()
        await self.factory.close()
        if self.kind == "file":
            self.sqlite.close()

    async def settle(self) -> None:
        await settle()

    async def log_records(self) -> list[Record]:
        """Every record physically in the log (deleted ones too), in order."""
        assert self.tc is not None
        ml = self.tc.ledger
        out: list[Record] = []
        for entry in await ml.read_entries(ml.first_position, 1_000_000):
            out.extend(decode_entry(entry.data))
        return out

    def live_record_count(self) -> int:
        """Entries the log cursor has not acknowledged."""
        assert self.tc is not None
        return self.tc.transaction_log.cursor.backlog()


def record(
    op: int,
    least: int,
    *,
    most: int = 0,
    max_id: int | None = None,
    **fields: object,
) -> Record:
    """Build a log record for hand-written logs."""
    r = Record(metadata_op=op, txnid_most_bits=most, txnid_least_bits=least)  # type: ignore[arg-type]
    r.max_local_txn_id = least if max_id is None else max_id
    for name, value in fields.items():
        if name == "partitions":
            r.partitions.extend(value)  # type: ignore[arg-type]
        elif name == "subscriptions":
            r.subscriptions.extend(
                pb.Subscription(topic=t, subscription=s)
                for t, s in value  # type: ignore[attr-defined]
            )
        else:
            setattr(r, name, value)
    return r


def new_record(least: int, timeout_ms: int = 60_000, start: int = 1_700_000_000_000, **kw: object) -> Record:
    return record(Op.NEW, least, start_time=start, timeout_ms=timeout_ms, **kw)


def update_record(least: int, expected: TxnStatus, new: TxnStatus, **kw: object) -> Record:
    return record(Op.UPDATE, least, expected_status=int(expected), new_status=int(new), **kw)


async def write_log(ml: ManagedLedger, records: list[Record]) -> None:
    log = TransactionLog(ml)
    for r in records:
        await log.append(r)


async def end_task(
    tc: TransactionCoordinator, txn: TxnID, action: object
) -> asyncio.Task[None]:
    """Start ``end_txn`` in a task and let it run up to its first suspension, so the
    end is registered with the coordinator when this returns."""
    task = asyncio.get_running_loop().create_task(tc.end_txn(txn, action))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # one step of the event loop, not a wait for time
    return task


class FailingLedger:
    """A managed ledger whose appends fail on demand (an I/O error from storage).

    Appends fail while ``failing`` is set, or once ``ok`` appends have succeeded;
    with ``raise_now`` they raise ``ManagedLedgerClosed`` at the call. Both append
    forms fail the same way, on the next loop turn as a real I/O error would.
    Everything else is the wrapped ledger's.
    """

    def __init__(self, inner: ManagedLedger, ok: int | None = None) -> None:
        self._inner = inner
        self._ok = ok
        self.failing = False
        self.raise_now = False

    def _fails(self) -> bool:
        if self.raise_now:
            raise ManagedLedgerClosed("closed")
        if self.failing:
            return True
        if self._ok is None:
            return False
        if self._ok > 0:
            self._ok -= 1
            return False
        return True

    def add_entry(self, data: bytes) -> asyncio.Future[Position]:
        if not self._fails():
            return self._inner.add_entry(data)
        fut: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(fut.set_exception, PersistenceError("disk"))
        return fut

    def append_entry(
        self, data: bytes, callback: Callable[[Position | None, BaseException | None], None]
    ) -> None:
        if not self._fails():
            self._inner.append_entry(data, callback)
            return
        asyncio.get_running_loop().call_soon(callback, None, PersistenceError("disk"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
