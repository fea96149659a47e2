"""In-memory managed ledgers for tests and simulation.

The same ``ManagedLedgerImpl`` and cursors as the file implementation (so rollover,
trimming, retention and cursor semantics are identical) over a ``LedgerStorage``
that keeps entries in lists and confirms each append on the next loop iteration, in
append order. Nothing survives the factory object; reopening a managed ledger within
one factory works (its data and metadata are still there).
"""

from __future__ import annotations

import asyncio

from quasar.clock import Clock, SystemClock
from quasar.errors import CorruptRecordError, LedgerFencedError
from quasar.storage.api import MetadataStore
from quasar.storage.ledger_factory import BaseManagedLedgerFactory
from quasar.storage.ledger_storage import AppendDone
from quasar.storage.metadata.memory import MemoryMetadataStore


class MemoryLedgerStorage:
    """Implements ``LedgerStorage`` with one list of entries per ledger."""

    def __init__(self) -> None:
        self._ledgers: dict[int, list[bytes]] = {}
        self._fenced: set[int] = set()
        self.loop: asyncio.AbstractEventLoop | None = None

    def create_ledger(self, ledger_id: int) -> None:
        assert ledger_id not in self._ledgers, f"ledger {ledger_id} already exists"
        self._ledgers[ledger_id] = []

    def recover_ledger(self, ledger_id: int) -> tuple[int, int]:
        entries = self._existing(ledger_id)
        return len(entries), sum(len(e) for e in entries)

    def fence_ledger(self, ledger_id: int) -> tuple[int, int]:
        length = self.recover_ledger(ledger_id)
        self._fenced.add(ledger_id)
        return length

    def is_fenced(self, ledger_id: int) -> bool:
        return ledger_id in self._fenced

    def open_ledger(self, ledger_id: int, entries: int, size: int) -> None:
        stored = self._existing(ledger_id)
        if len(stored) != entries:
            raise CorruptRecordError(
                f"ledger {ledger_id} holds {len(stored)} entries, metadata says {entries}"
            )

    def append(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        owner: object,
        done: AppendDone,
    ) -> None:
        entries = self._ledgers[ledger_id]
        assert self.loop is not None, "factory binds the loop before any append"
        if ledger_id in self._fenced:
            self.loop.call_soon(done, LedgerFencedError(f"ledger {ledger_id} is fenced"))
            return
        assert entry_id == len(entries), "entries must be appended in order"
        entries.append(data)
        # call_soon is FIFO, so completions keep append order.
        self.loop.call_soon(done, None)

    def seal_ledger(self, ledger_id: int) -> None:
        pass

    def read(self, ledger_id: int, entry_id: int) -> bytes | None:
        entries = self._ledgers.get(ledger_id)
        if entries is None or not 0 <= entry_id < len(entries):
            return None
        return entries[entry_id]

    def release_ledger(self, ledger_id: int) -> None:
        pass

    def delete_ledger(self, ledger_id: int) -> None:
        self._ledgers.pop(ledger_id, None)
        self._fenced.discard(ledger_id)

    def _existing(self, ledger_id: int) -> list[bytes]:
        entries = self._ledgers.get(ledger_id)
        if entries is None:
            raise CorruptRecordError(f"ledger {ledger_id} is missing")
        return entries


class MemoryManagedLedgerFactory(BaseManagedLedgerFactory):
    """Implements ``ManagedLedgerFactory`` in memory."""

    def __init__(
        self,
        metadata_store: MetadataStore | None = None,
        *,
        clock: Clock | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._memory = MemoryLedgerStorage()
        super().__init__(
            self._memory,
            metadata_store if metadata_store is not None else MemoryMetadataStore(),
            clock=clock if clock is not None else SystemClock(),
            loop=loop,
        )

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        loop = super()._bind_loop()
        self._memory.loop = loop
        return loop
