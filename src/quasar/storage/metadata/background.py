"""Metadata writes off the event loop: one thread, writes in submission order.

A durable metadata write (SQLite, ``synchronous=FULL``) waits for an fsync of the
WAL: a few hundred microseconds to milliseconds in which a synchronous caller holds
the event loop and every connection on it. Cursor flushes are the frequent case (a
transaction commit on a subscription may not answer before its cursor is durable), so
they go through this writer: the loop hands over the bytes and awaits a future, and
the thread releases the GIL while SQLite syncs.

One thread keeps writes in the order they were submitted, so two writes of one key
(version ``v`` then ``v+1``) can never swap. ``inline`` runs each write at once on the
caller's thread (the in-memory store, where a write costs nothing); the futures are
the same either way.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from quasar.storage.api import MetadataStore

log = logging.getLogger(__name__)


class BackgroundMetadataWriter:
    """Runs ``MetadataStore.put`` calls on a single writer thread."""

    def __init__(self, store: MetadataStore, *, inline: bool = False) -> None:
        self._store = store
        self._pool = None if inline else ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="quasar-metadata-writer"
        )

    def put(self, path: str, value: bytes, expected_version: int | None) -> Future[int]:
        """Schedule ``store.put``; the future holds the new version or the failure
        (``BadVersion``, ``MetadataError``)."""
        if self._pool is None:
            done: Future[int] = Future()
            try:
                done.set_result(self._store.put(path, value, expected_version))
            except Exception as exc:  # noqa: BLE001 - handed to the caller
                done.set_exception(exc)
            return done
        return self._pool.submit(self._store.put, path, value, expected_version)

    def close(self) -> None:
        """Finish the writes already submitted, then stop the thread."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
