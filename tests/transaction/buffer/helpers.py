"""Test helpers: a transaction buffer over in-memory or file storage, restartable."""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path
from typing import cast

from quasar.clock import ManualClock
from quasar.protocol import make_entry, parse_entry, payload_of, pb
from quasar.storage import (
    EARLIEST,
    FileManagedLedgerFactory,
    ManagedLedgerConfig,
    MemoryManagedLedgerFactory,
    MemoryMetadataStore,
    Position,
    SqliteMetadataStore,
)
from quasar.storage.api import ManagedLedger
from quasar.storage.ledger_factory import BaseManagedLedgerFactory
from quasar.transaction import TxnAction, TxnID, VirtualScheduler
from quasar.transaction.buffer import (
    MemorySnapshotStore,
    SnapshotStore,
    TopicTransactionBuffer,
    TransactionBufferConfig,
)
from quasar.transaction.scheduler import settle

TOPIC = "persistent://t/ns/topic-partition-0"
LEDGER_NAME = "t/ns/persistent/topic-partition-0"

_seq = itertools.count()


def entry(payload: bytes, txn: TxnID | None = None) -> bytes:
    """A client entry as a producer would send it."""
    md = pb.MessageMetadata(
        producer_name="producer", sequence_id=next(_seq), publish_time=1
    )
    if txn is not None:
        md.txnid_most_bits = txn.most_bits
        md.txnid_least_bits = txn.least_bits
    return make_entry(md, payload)


def ledger_config(**overrides: object) -> ManagedLedgerConfig:
    values: dict[str, object] = {"min_ledger_rollover_time_minutes": 0}
    values.update(overrides)
    return ManagedLedgerConfig(**values)  # type: ignore[arg-type]


class TbEnv:
    """A topic ledger, a snapshot store and a transaction buffer on a virtual clock.

    ``kind="memory"``: restarts keep the data in the factory (clean restarts).
    ``kind="file"``: real files under ``root``; ``crash()`` restarts as after kill -9.
    The snapshot store is in memory in both cases and survives restarts (it stands
    for the compacted system topic, which has its own durability tests).
    """

    def __init__(
        self,
        kind: str = "memory",
        root: Path | None = None,
        *,
        config: TransactionBufferConfig | None = None,
        ledger: ManagedLedgerConfig | None = None,
        store: SnapshotStore | None = None,
    ) -> None:
        self.kind = kind
        self.root = root
        self.clock = ManualClock()
        self.sched = VirtualScheduler(self.clock)
        self.store: MemorySnapshotStore = MemorySnapshotStore()
        self.snapshot_store: SnapshotStore = store if store is not None else self.store
        self.config = config or TransactionBufferConfig()
        self.ledger_config = ledger or ledger_config()
        self.memory_meta = MemoryMetadataStore()
        self.factory: BaseManagedLedgerFactory = self._make_factory()
        self._ml: ManagedLedger | None = None
        self._tb: TopicTransactionBuffer | None = None

    def _make_factory(self) -> BaseManagedLedgerFactory:
        if self.kind == "memory":
            return MemoryManagedLedgerFactory(self.memory_meta, clock=self.clock)
        assert self.root is not None
        self.sqlite = SqliteMetadataStore(self.root / "metadata.db")
        return FileManagedLedgerFactory(self.root / "data", self.sqlite, clock=self.clock)

    @property
    def tb(self) -> TopicTransactionBuffer:
        assert self._tb is not None
        return self._tb

    @property
    def ml(self) -> ManagedLedger:
        assert self._ml is not None
        return self._ml

    async def start(self, *, recover: bool = True) -> TopicTransactionBuffer:
        # cast: ManagedLedgerImpl.cursors() returns dict[str, ManagedCursorImpl], which
        # mypy does not accept for the protocol's dict[str, ManagedCursor].
        ml = cast(ManagedLedger, await self.factory.open(LEDGER_NAME, self.ledger_config))
        self._ml = ml
        self._tb = TopicTransactionBuffer(
            ml, TOPIC, self.snapshot_store, self.clock, self.sched, self.config
        )
        if recover:
            await self._tb.recover()
        return self._tb

    async def ready(self) -> TopicTransactionBuffer:
        """Start and make the buffer READY (first snapshot written)."""
        tb = await self.start()
        await tb.check_if_recovered(txn_enabled=True)
        return tb

    async def stop(self) -> None:
        if self._tb is not None:
            await self._tb.close()
            self._tb = None
        if self._ml is not None:
            await self._ml.close()
            self._ml = None

    async def restart(self) -> TopicTransactionBuffer:
        await self.stop()
        if self.kind == "file":
            await self.factory.close()
            self.sqlite.close()
            self.factory = self._make_factory()
        return await self.start()

    async def crash(self) -> TopicTransactionBuffer:
        """File storage only: drop everything unsynced, as after kill -9."""
        assert isinstance(self.factory, FileManagedLedgerFactory)
        if self._tb is not None:
            await self._tb.close()
            self._tb = None
        self.factory.abandon()
        self.sqlite.close()
        self._ml = None
        self.factory = self._make_factory()
        return await self.start()

    async def close(self) -> None:
        await self.stop()
        await self.factory.close()
        if self.kind == "file":
            self.sqlite.close()

    # ------------------------------------------------------------------ shortcuts

    async def send(self, payload: bytes, txn: TxnID | None = None) -> Position:
        if txn is None:
            return await self.tb.append_non_transactional(entry(payload))
        return await self.tb.append_transactional(txn, entry(payload, txn))

    async def commit(self, txn: TxnID, lwm: int = -1) -> None:
        await self.tb.end_txn(txn, TxnAction.COMMIT, lwm)

    async def abort(self, txn: TxnID, lwm: int = -1) -> None:
        await self.tb.end_txn(txn, TxnAction.ABORT, lwm)

    async def visible(self) -> list[bytes]:
        return await visible(self.tb, self.ml)

    async def markers(self) -> list[tuple[int, TxnID]]:
        """(marker_type, txn) of every marker in the topic, in order."""
        out = []
        for e in await self.ml.read_entries(EARLIEST, 1_000_000):
            md = parse_entry(e.data).metadata
            if md.HasField("marker_type"):
                out.append((md.marker_type, TxnID(md.txnid_most_bits, md.txnid_least_bits)))
        return out


async def visible(tb: TopicTransactionBuffer, ml: ManagedLedger) -> list[bytes]:
    """What a dispatcher would deliver: entries up to the max read position, minus
    markers and aborted data, in order."""
    limit = tb.max_read_position
    out = []
    for e in await ml.read_entries(EARLIEST, 1_000_000):
        if e.position > limit:
            break
        md = parse_entry(e.data).metadata
        if md.HasField("marker_type"):
            continue
        if md.HasField("txnid_most_bits") and md.HasField("txnid_least_bits"):
            if tb.is_aborted((md.txnid_most_bits, md.txnid_least_bits), e.position):
                continue
        out.append(payload_of(e.data))
    return out


async def drain() -> None:
    await settle()
    await asyncio.sleep(0)


class DirSnapshotStore:
    """A durable ``SnapshotStore`` in a directory (one file per key), for crash tests
    that span processes. Writes are atomic: temporary file, fsync, rename, fsync dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / key.encode().hex()

    def keys(self) -> list[str]:
        return sorted(bytes.fromhex(p.name).decode() for p in self.root.iterdir()
                      if not p.name.endswith(".tmp"))

    def _sync_dir(self) -> None:
        fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    async def write(self, key: str, value: bytes) -> None:
        tmp = self._path(key).with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(value)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path(key))
        self._sync_dir()

    async def read(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    async def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)
        self._sync_dir()
