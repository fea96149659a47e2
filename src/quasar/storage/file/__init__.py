"""The embedded, durable storage: ledger files with group commit (the default)."""

from quasar.storage.file.disk import OsDisk
from quasar.storage.file.factory import FileManagedLedgerFactory

__all__ = ["FileManagedLedgerFactory", "OsDisk"]
