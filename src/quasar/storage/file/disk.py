"""The file-operations seam of the file storage.

Every system call the ledger files make goes through a ``Disk``, so a test can count
fsyncs, inject ``EIO`` into one, or record the sequence of operations. ``OsDisk`` is
the real thing.
"""

from __future__ import annotations

import os


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
