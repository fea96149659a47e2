"""Storage: managed ledgers (ordered logs of entries over ledgers), cursors, metadata.

``api`` holds the protocols; ``file`` (durable, the default) and ``memory`` implement
them with the same ``ManagedLedgerImpl``/``ManagedCursorImpl`` over different
``LedgerStorage`` backends; ``metadata`` holds the SQLite and in-memory stores.
"""

from quasar.storage.api import (
    EARLIEST,
    LATEST,
    Entry,
    InitialPosition,
    LedgerInfo,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MetadataStore,
    Position,
    RetentionPolicy,
    Versioned,
)
from quasar.storage.cursor import ManagedCursorImpl
from quasar.storage.file import FileManagedLedgerFactory, OsDisk
from quasar.storage.managed_ledger import ManagedLedgerImpl
from quasar.storage.memory import MemoryManagedLedgerFactory
from quasar.storage.metadata import MemoryMetadataStore, SqliteMetadataStore

__all__ = [
    "EARLIEST",
    "LATEST",
    "Entry",
    "FileManagedLedgerFactory",
    "InitialPosition",
    "LedgerInfo",
    "ManagedCursor",
    "ManagedCursorImpl",
    "ManagedLedger",
    "ManagedLedgerConfig",
    "ManagedLedgerFactory",
    "ManagedLedgerImpl",
    "MemoryManagedLedgerFactory",
    "MemoryMetadataStore",
    "MetadataStore",
    "OsDisk",
    "Position",
    "RetentionPolicy",
    "SqliteMetadataStore",
    "Versioned",
]
