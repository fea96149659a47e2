"""The file-operations seam of the file storage.

Every system call the ledger files make goes through a ``Disk``, so a test can count
fsyncs, inject ``EIO`` into one, or record the sequence of operations. ``OsDisk`` is
the real thing.

A group commit writes and syncs many files at once. ``pwrite_all`` and ``sync_all`` do
that with the GIL released once per call through the optional C extension
``_syncio`` (see its source for the measurements behind it); ``native_group_io`` says
whether they may be used. A subclass or a monkeypatch that replaces ``pwrite`` or
``sync`` (fault injection, counting) turns them off, so every call stays visible.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

# The extension is optional (setup.py builds it when a C compiler is there). Without
# it every file gets its own os.pwrite/os.fdatasync call; the reason is kept so that
# quasar.native can report which path runs.
SYNCIO_IMPORT_ERROR: ImportError | None = None
try:
    import quasar.storage.file._syncio as _syncio
except ImportError as exc:
    _syncio = None  # type: ignore[assignment]
    SYNCIO_IMPORT_ERROR = exc


class OsDisk:
    """Positional file I/O on the local file system."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def pwrite(
        self, fd: int, data: bytes | bytearray | memoryview, offset: int
    ) -> None:
        """Write all of ``data`` at ``offset``.

        Raises:
            OSError: the write failed (possibly after writing part of the data).
        """
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, offset)
            if written <= 0:
                raise OSError(f"pwrite wrote {written} bytes")
            view = view[written:]
            offset += written

    @property
    def native_group_io(self) -> bool:
        """True if ``pwrite_all``/``sync_all`` may bypass ``pwrite``/``sync``."""
        cls = type(self)
        own = vars(self)
        return (
            _syncio is not None
            and cls.pwrite is _PWRITE
            and cls.sync is _SYNC
            and "pwrite" not in own
            and "sync" not in own
        )

    def pwrite_all(self, writes: Sequence[tuple[int, bytes, int]]) -> None:
        """Write every ``(fd, data, offset)`` completely, in order.

        Raises:
            OSError: at the first failed write; the earlier ones stay written.
        """
        if self.native_group_io:
            _syncio.pwrite_all(writes)
            return
        for fd, data, offset in writes:
            self.pwrite(fd, data, offset)

    def sync_all(self, fds: Sequence[int]) -> None:
        """``sync`` every file, concurrently (native only; see ``native_group_io``).

        Raises:
            OSError: the first failure, after every file was synced or failed.
        """
        assert _syncio is not None
        _syncio.fdatasync_all(fds)

    def write_and_sync(
        self, writes: Sequence[tuple[int, bytes, int]], fds: Sequence[int]
    ) -> None:
        """``pwrite_all(writes)`` then ``sync_all(fds)`` in one native call (native
        only; see ``native_group_io``).

        Raises:
            OSError: a write failed (nothing was synced) or a sync failed.
        """
        assert _syncio is not None
        _syncio.write_and_sync(writes, fds)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    def sync(self, fd: int) -> None:
        """Make the file's data (and the metadata needed to read it) durable."""
        # fdatasync covers a grown file size; it skips only mtime-style metadata.
        fdatasync = getattr(os, "fdatasync", os.fsync)
        fdatasync(fd)

    def sync_dir(self, path: str) -> None:
        """Make the directory's entries (created or removed files) durable."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def fence(self, fd: int) -> None:
        """Fence the open ledger file: make it read-only, durably.

        The mode bits are the fence marker a previous writer on the same data
        directory sees with one ``fstat`` (``fenced``); being part of the inode they
        cost no path lookup and no file of their own, and an unlinked file counts as
        fenced too. ``fsync`` (not ``fdatasync``): the mode is inode metadata.
        """
        os.fchmod(fd, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        os.fsync(fd)

    def fenced(self, fd: int) -> bool:
        """True if another writer fenced this open file (or deleted it)."""
        st = os.fstat(fd)
        return st.st_nlink == 0 or not st.st_mode & stat.S_IWUSR

    def path_fenced(self, path: str) -> bool:
        """``fenced`` by path; a missing file counts as fenced."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return True
        return not st.st_mode & stat.S_IWUSR

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)


# The originals, to recognise a replaced pwrite/sync (see native_group_io).
_PWRITE = OsDisk.pwrite
_SYNC = OsDisk.sync
