"""What both managed-ledger factories share: the open-ledger registry, deletion,
listing, and the global ledger-id counter."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import unquote

from quasar.clock import Clock
from quasar.errors import BadVersion, ManagedLedgerClosed, MetadataError, NotFound
from quasar.storage import codec
from quasar.storage.api import ManagedLedgerConfig, MetadataStore
from quasar.storage.ledger_metadata import ROOT, ledger_path
from quasar.storage.ledger_storage import LedgerStorage
from quasar.storage.managed_ledger import ManagedLedgerImpl
from quasar.storage.metadata.background import BackgroundMetadataWriter

log = logging.getLogger(__name__)

LEDGER_ID_COUNTER_PATH = "/counters/ledger-id"
_MAX_CAS_ATTEMPTS = 100


class LedgerIdAllocator:
    """Hands out ledger ids from a counter in the metadata store.

    Each id is committed (compare-and-set on the counter) before it is used, so ids
    are never reused, not after a crash and not across managed ledgers: a ledger id
    alone names a ledger file.
    """

    def __init__(
        self, metadata: MetadataStore, path: str = LEDGER_ID_COUNTER_PATH
    ) -> None:
        self._metadata = metadata
        self._path = path

    def __call__(self) -> int:
        """Allocate the next id.

        Raises:
            MetadataError: the counter could not be updated.
        """
        for _ in range(_MAX_CAS_ATTEMPTS):
            found = self._metadata.get(self._path)
            next_id = 1 if found is None else int(found.value)
            expected = -1 if found is None else found.version
            try:
                self._metadata.put(self._path, str(next_id + 1).encode(), expected)
            except BadVersion:
                continue  # another allocator won the race; read again
            return next_id
        raise MetadataError(f"could not allocate a ledger id from {self._path}")


class BaseManagedLedgerFactory:
    """Opens managed ledgers over a ``LedgerStorage`` and a ``MetadataStore``."""

    def __init__(
        self,
        storage: LedgerStorage,
        metadata_store: MetadataStore,
        *,
        clock: Clock,
        loop: asyncio.AbstractEventLoop | None,
        metadata_writer: BackgroundMetadataWriter | None = None,
        fence_on_open: bool = False,
    ) -> None:
        """``fence_on_open``: other brokers share the storage and the metadata; a
        managed ledger is opened by fencing its previous writer (``managed_ledger``)."""
        self._fence_on_open = fence_on_open
        self._storage = storage
        self._metadata = metadata_store
        # Cursor flushes go through it (None: written inline, on the caller's thread).
        self._metadata_writer = metadata_writer
        self._clock = clock
        self._loop = loop
        self._allocate = LedgerIdAllocator(metadata_store)
        self._open_ledgers: dict[str, ManagedLedgerImpl] = {}
        self._closed = False

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        """The loop completions are delivered on (the running one unless given)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    async def open(
        self, name: str, config: ManagedLedgerConfig | None = None
    ) -> ManagedLedgerImpl:
        """Open (recovering if needed) or return the already-open managed ledger.

        Raises:
            ManagedLedgerClosed: the factory is closed.
            CorruptRecordError: stored data is damaged in the middle of a ledger.
            MetadataError: the metadata store failed.
        """
        if self._closed:
            raise ManagedLedgerClosed("managed ledger factory is closed")
        if not name:
            raise ValueError("managed ledger name must not be empty")
        loop = self._bind_loop()
        existing = self._open_ledgers.get(name)
        if existing is not None:
            if config is not None:
                existing.config = config
            return existing
        ml = ManagedLedgerImpl(
            name,
            config or ManagedLedgerConfig(),
            storage=self._storage,
            metadata=self._metadata,
            clock=self._clock,
            loop=loop,
            allocate_ledger_id=self._allocate,
            on_closed=self._forget,
            metadata_writer=self._metadata_writer,
            fence_on_open=self._fence_on_open,
        )
        # Opening is synchronous (metadata and recovery reads), so two concurrent
        # open() calls for one name cannot both get here: no await in between.
        ml.initialize()
        self._open_ledgers[name] = ml
        return ml

    def _forget(self, ml: ManagedLedgerImpl) -> None:
        if self._open_ledgers.get(ml.name) is ml:
            del self._open_ledgers[ml.name]

    async def delete(self, name: str) -> None:
        """Delete a managed ledger with all its ledgers and cursors.

        Raises:
            NotFound: no managed ledger has that name.
            MetadataError: the metadata store failed.
        """
        ml = self._open_ledgers.get(name)
        if ml is not None:
            await ml.delete()
            return
        path = ledger_path(name)
        found = self._metadata.get(path)
        if found is None:
            raise NotFound(f"managed ledger {name} does not exist")
        records = codec.decode_ledgers(found.value, path)
        # Metadata first: a crash in between leaves orphan data, never a ledger list
        # that names deleted data.
        self._metadata.delete_recursive(path)
        for rec in records:
            self._storage.delete_ledger(rec.ledger_id)

    def exists(self, name: str) -> bool:
        return self._metadata.get(ledger_path(name)) is not None

    def list_names(self) -> list[str]:
        return sorted(unquote(child) for child in self._metadata.children(ROOT))

    def open_ledgers(self) -> dict[str, ManagedLedgerImpl]:
        """The managed ledgers currently open in this factory."""
        return dict(self._open_ledgers)

    async def close(self) -> None:
        """Close every open managed ledger (waiting for their pending appends)."""
        if self._closed:
            return
        self._closed = True
        for ml in list(self._open_ledgers.values()):
            try:
                await ml.close()
            except Exception:
                log.exception("failed to close managed ledger %s", ml.name)
