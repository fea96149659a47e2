"""``FileLedgerStorage``: ledgers as files (see ``format.py``) behind the group-commit
writer, with an in-memory offset index per ledger and the shared entry cache.

Threads: everything here runs on the event loop thread except what the writer thread
does with a ``WriteTarget`` (its descriptor and write offset). Offsets are assigned
here, synchronously, in append order; the writer checks it receives them contiguous.

Reads use a separate read-only descriptor and ``pread``. Only durable entries are
ever asked for (the managed ledger checks the last-confirmed entry), and those are in
the page cache or on disk, so a synchronous ``pread`` is short.

Crash safety of the file lifecycle:

* create: write header, fdatasync the file, fsync the directory, and only then is
  the ledger added to the metadata, so the ledger list never names a missing or
  headerless file;
* delete: the ledger leaves the metadata first, then the file is unlinked; a crash
  in between leaves an orphan file, never a dangling reference (ids are not reused,
  so an orphan can never be mistaken for a live ledger).

Shared data directory (``shared``: cluster members). A topic's new owner opens the
previous owner's unclosed ledger with ``fence_ledger``: it first makes the file
read-only (the fence, ``OsDisk.fence``), then reads its length. The previous owner's
writer checks for the fence after each sync, before acknowledging
(``group_commit.py``), so every entry it acknowledged was durable before the fence
and is within the length read after it. The new owner never truncates a fenced
file (the previous writer may still add records it will never acknowledge); the
metadata records the length, and a closed ledger is read up to that length only.
"""

from __future__ import annotations

import logging
import os
from array import array

from quasar.errors import CorruptRecordError, PersistenceError, StorageFullError
from quasar.storage.disk_space import LEDGERS, is_disk_full
from quasar.storage.file import format as fmt
from quasar.storage.file.disk import OsDisk
from quasar.storage.file.entry_cache import EntryCache
from quasar.storage.file.group_commit import GroupCommitWriter, WriteTarget
from quasar.storage.ledger_storage import AppendDone

log = logging.getLogger(__name__)


class _Ledger:
    __slots__ = ("ledger_id", "path", "offsets", "end", "target", "read_fd", "expected")

    def __init__(self, ledger_id: int, path: str) -> None:
        self.ledger_id = ledger_id
        self.path = path
        self.offsets: array[int] | None = (
            None  # None until indexed (closed ledgers: lazily)
        )
        self.end = fmt.FILE_HEADER_SIZE  # offset past the last assigned record
        self.target: WriteTarget | None = None  # set while the ledger takes appends
        self.read_fd = -1
        self.expected = 0  # entries the metadata says a closed ledger holds


class FileLedgerStorage:
    """Implements ``LedgerStorage`` on files in ``<data_dir>/ledgers``."""

    def __init__(
        self,
        data_dir: str,
        disk: OsDisk,
        writer: GroupCommitWriter,
        cache: EntryCache,
        *,
        shared: bool = False,
    ) -> None:
        """``shared``: other brokers write ledgers in the same directory, so ledgers
        are fenced on recovery and checked for fences before acknowledging."""
        self._shared = shared
        self._dir = os.path.join(data_dir, "ledgers")
        self._disk = disk
        self._writer = writer
        self._cache = cache
        self._ledgers: dict[int, _Ledger] = {}
        disk.makedirs(self._dir)

    def path(self, ledger_id: int) -> str:
        return os.path.join(self._dir, f"{ledger_id}.log")

    # ------------------------------------------------------------------ lifecycle

    def create_ledger(self, ledger_id: int) -> None:
        """Create ``<id>.log`` with its header, durably.

        Raises:
            StorageFullError: the disk is full (retryable; nothing is left behind).
            PersistenceError: the file exists already or could not be made durable.
        """
        path = self.path(ledger_id)
        try:
            fd = self._disk.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except OSError as exc:
            raise PersistenceError(f"cannot create ledger file {path}: {exc}") from exc
        try:
            self._disk.pwrite(fd, fmt.file_header(ledger_id), 0)
            self._disk.sync(fd)
            self._disk.sync_dir(self._dir)
        except OSError as exc:
            # Nothing acknowledged depends on this file: drop it and report.
            self._disk.close(fd)
            self._unlink(path)
            if is_disk_full(exc):
                self._writer.disk_space.refused(LEDGERS, exc)
                raise StorageFullError(f"cannot create ledger file {path}: {exc}") from exc
            raise PersistenceError(f"cannot create ledger file {path}: {exc}") from exc
        ledger = _Ledger(ledger_id, path)
        ledger.offsets = array("q")
        ledger.target = WriteTarget(fd, path, fmt.FILE_HEADER_SIZE, fenceable=self._shared)
        self._ledgers[ledger_id] = ledger

    def recover_ledger(self, ledger_id: int) -> tuple[int, int]:
        """Scan a ledger that was being written; truncate a torn tail.

        Raises:
            CorruptRecordError: the file is missing, has a bad header, or has a damaged
                record followed by a valid one.
            PersistenceError: the torn tail could not be truncated durably.
        """
        return self._recover(ledger_id, fence=False)

    def fence_ledger(self, ledger_id: int) -> tuple[int, int]:
        """Fence a ledger another writer may still hold, then scan it (no truncation).

        Raises:
            CorruptRecordError: as ``recover_ledger``.
            PersistenceError: the fence could not be made durable.
        """
        return self._recover(ledger_id, fence=True)

    def is_fenced(self, ledger_id: int) -> bool:
        """True if another broker fenced the ledger (always false unless ``shared``)."""
        return self._shared and self._disk.path_fenced(self.path(ledger_id))

    def _recover(self, ledger_id: int, *, fence: bool) -> tuple[int, int]:
        path = self.path(ledger_id)
        try:
            # Fencing needs no write access: chmod takes ownership, and a fenced
            # file is never truncated (an earlier fence may have made it read-only).
            fd = self._disk.open(path, os.O_RDONLY if fence else os.O_RDWR)
        except FileNotFoundError as exc:
            raise CorruptRecordError(f"ledger file {path} is missing") from exc
        try:
            if fence:
                try:
                    self._disk.fence(fd)
                except OSError as exc:
                    raise PersistenceError(f"cannot fence {path}: {exc}") from exc
            size = self._disk.size(fd)
            fmt.check_file_header(
                self._disk.pread(fd, fmt.FILE_HEADER_SIZE, 0), ledger_id, path
            )

            def read_at(offset: int, n: int) -> bytes:
                return self._disk.pread(fd, n, offset)

            result = fmt.scan(read_at, size, verify=True)
            if result.bad_at is not None:
                follower = fmt.find_valid_record(read_at, result.bad_at + 1, size)
                if follower is not None:
                    raise CorruptRecordError(
                        f"{path}: entry {len(result.offsets)} at offset {result.bad_at} is "
                        f"damaged and a valid record follows at offset {follower}; refusing "
                        "to skip data in the middle of a ledger"
                    )
                if fence:
                    log.warning(
                        "%s: fenced with a torn tail at offset %d; %d entries count",
                        path, result.bad_at, len(result.offsets),
                    )
                    return self._recovered(ledger_id, path, result)
                log.warning(
                    "%s: truncating torn tail at offset %d (%d bytes); %d entries remain",
                    path,
                    result.bad_at,
                    size - result.bad_at,
                    len(result.offsets),
                )
                try:
                    self._disk.truncate(fd, result.bad_at)
                    self._disk.sync(fd)
                except OSError as exc:
                    raise PersistenceError(f"cannot truncate {path}: {exc}") from exc
        finally:
            self._disk.close(fd)
        return self._recovered(ledger_id, path, result)

    def _recovered(self, ledger_id: int, path: str, result: fmt.ScanResult) -> tuple[int, int]:
        ledger = _Ledger(ledger_id, path)
        ledger.offsets = result.offsets
        ledger.end = result.end
        ledger.expected = len(result.offsets)
        self._ledgers[ledger_id] = ledger
        return len(result.offsets), result.size

    def open_ledger(self, ledger_id: int, entries: int, size: int) -> None:
        """Register a closed ledger; its index is built on first read."""
        ledger = _Ledger(ledger_id, self.path(ledger_id))
        ledger.expected = entries
        self._ledgers[ledger_id] = ledger

    def seal_ledger(self, ledger_id: int) -> None:
        ledger = self._ledgers.get(ledger_id)
        if ledger is not None and ledger.target is not None:
            self._writer.close_file(ledger.target)
            ledger.target = None

    def release_ledger(self, ledger_id: int) -> None:
        ledger = self._ledgers.pop(ledger_id, None)
        if ledger is None:
            return
        if ledger.target is not None:
            self._writer.close_file(ledger.target)
            ledger.target = None
        if ledger.read_fd >= 0:
            self._disk.close(ledger.read_fd)
            ledger.read_fd = -1

    def delete_ledger(self, ledger_id: int) -> None:
        self._cache.invalidate_ledger(ledger_id)
        self.release_ledger(ledger_id)
        self._unlink(self.path(ledger_id))

    def close(self) -> None:
        """Release every descriptor (after the writer has stopped)."""
        for ledger_id in list(self._ledgers):
            self.release_ledger(ledger_id)

    def _unlink(self, path: str) -> None:
        try:
            self._disk.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot delete ledger file %s: %s", path, exc)

    # ------------------------------------------------------------------ appends

    def append(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        owner: object,
        done: AppendDone,
    ) -> None:
        """Assign the record's offset and queue it on the writer.

        Raises:
            ValueError: ``data`` exceeds ``MAX_RECORD_BYTES``.
        """
        if len(data) > fmt.MAX_RECORD_BYTES:
            raise ValueError(
                f"entry of {len(data)} bytes exceeds {fmt.MAX_RECORD_BYTES}"
            )
        ledger = self._ledgers[ledger_id]
        assert ledger.target is not None and ledger.offsets is not None, (
            "ledger is sealed"
        )
        assert entry_id == len(ledger.offsets), "entries must be appended in order"
        offset = ledger.end
        ledger.offsets.append(offset)
        ledger.end = offset + fmt.RECORD_HEADER_SIZE + len(data)
        self._cache.put_at(ledger_id, entry_id, data)
        self._writer.append(ledger.target, offset, data, owner, done)

    # ------------------------------------------------------------------ reads

    def read(self, ledger_id: int, entry_id: int) -> bytes | None:
        """The bytes of a durable entry (cache first, then ``pread``).

        Raises:
            CorruptRecordError: the record fails its checksum or the file does not match
                the length recorded in the metadata.
        """
        cached = self._cache.get_at(ledger_id, entry_id)
        if cached is not None:
            return cached
        ledger = self._ledgers.get(ledger_id)
        if ledger is None:
            return None
        offsets = ledger.offsets if ledger.offsets is not None else self._index(ledger)
        if not 0 <= entry_id < len(offsets):
            return None
        start = offsets[entry_id]
        end = offsets[entry_id + 1] if entry_id + 1 < len(offsets) else ledger.end
        record = self._disk.pread(self._read_fd(ledger), end - start, start)
        header, payload = (
            record[: fmt.RECORD_HEADER_SIZE],
            record[fmt.RECORD_HEADER_SIZE :],
        )
        if len(record) != end - start or not fmt.payload_matches(header, payload):
            raise CorruptRecordError(
                f"{ledger.path}: entry {entry_id} at offset {start} fails its checksum"
            )
        return payload

    def _read_fd(self, ledger: _Ledger) -> int:
        if ledger.read_fd < 0:
            try:
                ledger.read_fd = self._disk.open(ledger.path, os.O_RDONLY)
            except FileNotFoundError as exc:
                raise CorruptRecordError(
                    f"ledger file {ledger.path} is missing"
                ) from exc
        return ledger.read_fd

    def _index(self, ledger: _Ledger) -> array[int]:
        """Build a closed ledger's offset index by following the record lengths."""
        fd = self._read_fd(ledger)
        size = self._disk.size(fd)
        fmt.check_file_header(
            self._disk.pread(fd, fmt.FILE_HEADER_SIZE, 0), ledger.ledger_id, ledger.path
        )
        result = fmt.scan(
            lambda off, n: self._disk.pread(fd, n, off),
            size,
            verify=False,
            chunk=64 * 1024,
            # On a shared directory a fenced writer may have added records after the
            # length recorded at the fence; they are not part of the ledger.
            limit=ledger.expected if self._shared else None,
        )
        if result.bad_at is not None or len(result.offsets) != ledger.expected:
            raise CorruptRecordError(
                f"{ledger.path}: closed ledger should hold {ledger.expected} entries, "
                f"found {len(result.offsets)} (bad record at {result.bad_at})"
            )
        ledger.offsets = result.offsets
        ledger.end = result.end
        return result.offsets
