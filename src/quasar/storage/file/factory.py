"""``FileManagedLedgerFactory``: the embedded, durable managed-ledger factory.

One factory owns one data directory: its ledger files, ONE group-commit writer
thread shared by all its managed ledgers, and one entry cache. An exclusive
``flock`` on ``<data_dir>/LOCK`` keeps a second process (or factory) out, since two
writers appending to the same files would corrupt them.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from collections.abc import Callable

from prometheus_client import Histogram

from quasar.clock import Clock, SystemClock
from quasar.errors import FatalStorageError, PersistenceError
from quasar.storage.api import MetadataStore
from quasar.storage.config import JournalConfig, ManagedLedgerSettings
from quasar.storage.disk_space import DiskSpace
from quasar.storage.file.disk import OsDisk
from quasar.storage.file.entry_cache import EntryCache, EntryCacheStats
from quasar.storage.file.group_commit import GroupCommitStats, GroupCommitWriter
from quasar.storage.file.ledger_files import FileLedgerStorage
from quasar.storage.ledger_factory import BaseManagedLedgerFactory
from quasar.storage.metadata.background import BackgroundMetadataWriter

log = logging.getLogger(__name__)


class FileManagedLedgerFactory(BaseManagedLedgerFactory):
    """Implements ``ManagedLedgerFactory`` on local files with group commit."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        metadata_store: MetadataStore,
        *,
        journal: JournalConfig | None = None,
        cache_size_bytes_max: int | None = None,
        clock: Clock | None = None,
        on_fatal: Callable[[FatalStorageError], None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        disk: OsDisk | None = None,
        disk_space: DiskSpace | None = None,
        lock_file: str = "LOCK",
        shared: bool = False,
    ) -> None:
        """Open ``data_dir`` (created if missing) and lock it.

        ``lock_file``: the lock's name in ``data_dir``. A cluster member
        (``quasar broker``) locks ``LOCK-<broker id>``, so several brokers share one
        data directory while one broker id still runs only once; bundle ownership
        keeps them from opening the same topic.

        ``journal`` configures group commit (default: the configuration's defaults);
        ``cache_size_bytes_max`` bounds the entry cache (default:
        ``managedLedgerCacheSizeMB``'s default).
        ``on_fatal`` is called once, on the loop, when a write or fsync fails; every
        append fails from then on and the process is expected to stop. ``disk`` is
        the file-operations seam (tests inject faults through it). ``disk_space``
        counts writes refused for a full disk (default: one of its own).
        ``shared``: other brokers write ledgers in ``data_dir`` too (cluster
        members); a managed ledger is opened by fencing its previous writer's
        ledgers, and appends are checked for a fence before they are acknowledged
        (see ``file/ledger_files.py``). Off, nothing of that runs.

        Raises:
            PersistenceError: the directory is locked by another factory or process,
                or cannot be created.
        """
        self._data_dir = os.fspath(data_dir)
        self._disk = disk if disk is not None else OsDisk()
        self._user_on_fatal = on_fatal
        try:
            self._disk.makedirs(self._data_dir)
            self._lock_fd = os.open(
                os.path.join(self._data_dir, lock_file), os.O_RDWR | os.O_CREAT
            )
        except OSError as exc:
            raise PersistenceError(
                f"cannot open data directory {self._data_dir}: {exc}"
            ) from exc
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._lock_fd)
            raise PersistenceError(
                f"data directory {self._data_dir} is in use"
            ) from exc
        if journal is None:
            journal = JournalConfig()
        if cache_size_bytes_max is None:
            cache_size_bytes_max = ManagedLedgerSettings().managed_ledger_cache_size_bytes
        self._writer = GroupCommitWriter(
            self._disk,
            sync_data=journal.journal_sync_data,
            max_group_wait_ms=journal.journal_max_group_wait_msec,
            buffered_writes_threshold_bytes=journal.journal_buffered_writes_threshold,
            on_fatal=self._on_fatal,
            disk_space=disk_space,
            check_fences=shared,
        )
        self._cache = EntryCache(cache_size_bytes_max)
        self._files = FileLedgerStorage(
            self._data_dir, self._disk, self._writer, self._cache, shared=shared
        )
        super().__init__(
            self._files,
            metadata_store,
            clock=clock if clock is not None else SystemClock(),
            loop=loop,
            # Stopped in _release (close and abandon), after the ledgers are closed.
            metadata_writer=BackgroundMetadataWriter(metadata_store),
            fence_on_open=shared,
        )
        self._writer_started = False

    @property
    def data_dir(self) -> str:
        return self._data_dir

    def writer_stats(self) -> GroupCommitStats:
        """Appends, groups, fsyncs and bytes written by the group-commit writer."""
        return self._writer.stats

    def fsync_latency(self) -> Histogram:
        """``quasar_storage_fsync_latency_seconds`` of the group-commit writer (not
        registered anywhere: the broker adds it to its registry)."""
        return self._writer.fsync_latency

    def disk_space(self) -> DiskSpace:
        """The full-disk episodes of the ledger files (a collector, not registered)."""
        return self._writer.disk_space

    def cache_stats(self) -> EntryCacheStats:
        return self._cache.stats()

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        loop = super()._bind_loop()
        if not self._writer_started:
            self._writer.start(loop)
            self._writer_started = True
        return loop

    def _on_fatal(self, exc: FatalStorageError) -> None:
        if self._user_on_fatal is not None:
            self._user_on_fatal(exc)
        else:
            log.critical("storage failed and no on_fatal handler is set: %s", exc)

    async def close(self) -> None:
        """Close every managed ledger, stop the writer, release files and the lock."""
        if self._closed:
            return
        await super().close()
        self._release()

    def abandon(self) -> None:
        """Stop the way a crash would, for recovery tests.

        Writes already queued still reach the files, then the writer stops and every
        descriptor and the directory lock are released; but no ledger is sealed and no
        cursor state is persisted, so the next open runs recovery exactly as after
        ``kill -9``.
        """
        self._closed = True
        self._release()

    def _release(self) -> None:
        if self._metadata_writer is not None:
            self._metadata_writer.close()  # writes already submitted still land
        if self._writer_started:
            self._writer.stop()
        self._files.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = -1
