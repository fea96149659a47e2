"""Metadata-store implementations: SQLite (embedded, durable) and in-memory."""

from quasar.storage.metadata.memory import MemoryMetadataStore
from quasar.storage.metadata.sqlite import SqliteMetadataStore

__all__ = ["MemoryMetadataStore", "SqliteMetadataStore"]
