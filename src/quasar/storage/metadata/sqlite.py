"""``MetadataStore`` on SQLite: the embedded, durable metadata store.

One table of ``(path, value, version)`` rows keyed by path. The database runs in WAL
mode with ``synchronous=FULL``, so every committed write has been fsynced to the WAL
before ``put``/``delete`` return (the store's "durable when it returns" promise).

Compare-and-set writes run inside ``BEGIN IMMEDIATE`` so the version check and the
write are one atomic step even if another process opens the same file.

A full disk ("database or disk is full") fails the write with ``MetadataError``
(retryable): SQLite rolled the transaction back, so the store holds what it held
before, and the next write after space is freed succeeds. Each one is counted in
``DiskSpace`` (``quasar_storage_disk_full_total{store="metadata"}``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any

from quasar.errors import MetadataError, NotFound, QuasarError
from quasar.storage.api import Versioned
from quasar.storage.disk_space import METADATA, DiskSpace
from quasar.storage.metadata import paths
from quasar.storage.metadata.memory import check_version

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    path    TEXT PRIMARY KEY,
    value   BLOB NOT NULL,
    version INTEGER NOT NULL
) WITHOUT ROWID
"""


class SqliteMetadataStore:
    """Versioned key/value store in one SQLite file.

    Safe to call from several threads: one connection guarded by a lock (SQLite
    writes are serialised anyway, and the calls are short).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        disk_space: DiskSpace | None = None,
    ) -> None:
        """Open (creating if needed) the database at ``path``. ``disk_space`` counts
        writes refused for a full disk (default: one of its own).

        Raises:
            MetadataError: the file cannot be opened or is not a usable database.
        """
        self._path = os.fspath(path)
        self._lock = threading.Lock()
        self.disk_space = disk_space if disk_space is not None else DiskSpace()
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a write is
            # committed (and fsynced) exactly where the code says.
            self._conn = sqlite3.connect(
                self._path, isolation_level=None, check_same_thread=False
            )
            self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise MetadataError(f"cannot enable WAL on {self._path}: {mode}")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise MetadataError(
                f"cannot open metadata store {self._path}: {exc}"
            ) from exc
        self._closed = False

    def get(self, path: str) -> Versioned | None:
        """Return the value and version at ``path``, or ``None``.

        Raises:
            ValueError: malformed path.
            MetadataError: SQLite failed.
        """
        paths.validate(path)
        with self._lock:
            return self._read(path)

    def put(self, path: str, value: bytes, expected_version: int | None = None) -> int:
        """Write ``value`` durably; returns the new version (0 for a new key).

        Raises:
            BadVersion: ``expected_version`` does not match (``-1``: must not exist).
            ValueError: malformed path.
            MetadataError: SQLite failed.
        """
        paths.validate(path)
        with self._lock:
            with self._transaction():
                current = self._read(path)
                check_version(path, current, expected_version)
                version = 0 if current is None else current.version + 1
                self._conn.execute(
                    "INSERT OR REPLACE INTO kv (path, value, version) VALUES (?, ?, ?)",
                    (path, bytes(value), version),
                )
        return version

    def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete the key at ``path`` durably (its children are untouched).

        Raises:
            NotFound: the key does not exist.
            BadVersion: ``expected_version`` does not match.
            MetadataError: SQLite failed.
        """
        paths.validate(path)
        with self._lock:
            with self._transaction():
                current = self._read(path)
                if current is None:
                    raise NotFound(path)
                check_version(path, current, expected_version)
                self._conn.execute("DELETE FROM kv WHERE path = ?", (path,))

    def delete_recursive(self, path: str) -> None:
        """Delete ``path`` and everything below it in one transaction.

        Raises:
            MetadataError: SQLite failed.
        """
        paths.validate(path)
        lo, hi = paths.subtree_bounds(path)
        with self._lock:
            with self._transaction():
                self._conn.execute(
                    "DELETE FROM kv WHERE path = ? OR (path >= ? AND path < ?)",
                    (path, lo, hi),
                )

    def children(self, path: str) -> list[str]:
        """Sorted names of the direct children of ``path``.

        Skip-scans the primary key: after a child's first key, jump past that child's
        whole subtree, so listing ``/managed-ledgers`` does not read every cursor.

        Raises:
            MetadataError: SQLite failed.
        """
        paths.validate(path)
        prefix, hi = paths.subtree_bounds(path)
        names: set[str] = set()
        lo = prefix
        with self._lock:
            while True:
                row = self._query_one(
                    "SELECT path FROM kv WHERE path >= ? AND path < ? ORDER BY path LIMIT 1",
                    (lo, hi),
                )
                if row is None:
                    break
                key = str(row[0])
                name, deeper = paths.child_name(prefix, key)
                names.add(name)
                # Siblings such as "name-x" sort between "name" and "name/...", so
                # only a key that is already inside the subtree lets us jump over it.
                lo = prefix + name + "0" if deeper else key + "\x00"
        return sorted(names)

    def close(self) -> None:
        """Close the database (idempotent)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def _read(self, path: str) -> Versioned | None:
        row = self._query_one("SELECT value, version FROM kv WHERE path = ?", (path,))
        return None if row is None else Versioned(bytes(row[0]), int(row[1]))

    def _query_one(self, sql: str, args: tuple[object, ...]) -> tuple[Any, ...] | None:
        assert not self._closed, "metadata store used after close"
        try:
            row: tuple[Any, ...] | None = self._conn.execute(sql, args).fetchone()
        except sqlite3.Error as exc:
            raise MetadataError(f"metadata read failed: {exc}") from exc
        return row

    def _transaction(self) -> _Transaction:
        assert not self._closed, "metadata store used after close"
        return _Transaction(self._conn, self.disk_space)


# SQLITE_FULL: "database or disk is full".
_SQLITE_FULL = 13


def _is_full(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return (code is not None and code & 0xFF == _SQLITE_FULL) or "is full" in str(exc)


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; rolls back if the body raises."""

    def __init__(self, conn: sqlite3.Connection, disk_space: DiskSpace) -> None:
        self._conn = conn
        self._disk_space = disk_space

    def _failed(self, what: str, exc: sqlite3.Error) -> QuasarError:
        if _is_full(exc):
            self._disk_space.refused(METADATA, exc)
        return MetadataError(f"{what}: {exc}")

    def __enter__(self) -> None:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._failed("metadata write failed", exc) from exc

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            # SQLite rolls back by itself on some errors (I/O, disk full, out of
            # memory); a second ROLLBACK would then raise and hide the real error.
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise self._failed("metadata write failed", exc) from exc
            return
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as err:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise self._failed("metadata commit failed", err) from err
        self._disk_space.written(METADATA)
