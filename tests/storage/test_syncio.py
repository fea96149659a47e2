"""The native group-commit I/O (``_syncio``) and when the writer may use it."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from quasar.errors import FatalStorageError
from quasar.storage import FileManagedLedgerFactory, SqliteMetadataStore
from quasar.storage.file import OsDisk, _syncio, disk


def open_files(tmp_path: Path, count: int) -> list[int]:
    return [os.open(tmp_path / f"f{i}", os.O_CREAT | os.O_RDWR, 0o644) for i in range(count)]


def closed_fd(tmp_path: Path) -> int:
    fd = os.open(tmp_path / "closed", os.O_CREAT | os.O_RDWR, 0o644)
    os.close(fd)
    return fd


def test_the_extension_is_built_and_used_for_a_plain_disk() -> None:
    # `make test` installs with a C compiler: a missing build would silently cost the
    # broker its group-commit latency under load, so it is a failure here.
    assert OsDisk().native_group_io


def test_pwrite_all_writes_every_buffer_at_its_offset(tmp_path: Path) -> None:
    fds = open_files(tmp_path, 3)
    try:
        _syncio.pwrite_all([
            (fds[0], b"hello", 0),
            (fds[1], bytearray(b"world"), 4),
            (fds[2], memoryview(b"xxabcxx")[2:5], 1),
            (fds[0], b" again", 5),
        ])
        assert os.pread(fds[0], 100, 0) == b"hello again"
        assert os.pread(fds[1], 100, 0) == b"\0\0\0\0world"
        assert os.pread(fds[2], 100, 0) == b"\0abc"
    finally:
        for fd in fds:
            os.close(fd)


def test_pwrite_all_writes_large_buffers_completely(tmp_path: Path) -> None:
    (fd,) = open_files(tmp_path, 1)
    data = os.urandom(8 * 1024 * 1024 + 17)
    try:
        _syncio.pwrite_all([(fd, data, 3)])
        assert os.pread(fd, len(data) + 10, 3) == data
    finally:
        os.close(fd)


def test_pwrite_all_stops_at_the_first_failure_and_keeps_what_it_wrote(
    tmp_path: Path,
) -> None:
    (fd,) = open_files(tmp_path, 1)
    bad = closed_fd(tmp_path)
    try:
        with pytest.raises(OSError) as info:
            _syncio.pwrite_all([(fd, b"first", 0), (bad, b"x", 0), (fd, b"never", 5)])
        assert info.value.errno == errno.EBADF
        assert os.pread(fd, 100, 0) == b"first"
    finally:
        os.close(fd)


def test_fdatasync_all_syncs_many_files_and_reports_the_first_failure(
    tmp_path: Path,
) -> None:
    fds = open_files(tmp_path, 20)  # more than the helper threads: some sync twice
    bad = closed_fd(tmp_path)
    try:
        _syncio.fdatasync_all(fds)
        _syncio.fdatasync_all([])
        with pytest.raises(OSError) as info:
            _syncio.fdatasync_all([*fds[:5], bad, *fds[5:]])
        assert info.value.errno == errno.EBADF
    finally:
        for fd in fds:
            os.close(fd)


def test_write_and_sync_does_not_sync_after_a_failed_write(tmp_path: Path) -> None:
    (fd,) = open_files(tmp_path, 1)
    bad = closed_fd(tmp_path)
    try:
        _syncio.write_and_sync([(fd, b"abc", 0)], [fd])
        assert os.pread(fd, 10, 0) == b"abc"
        with pytest.raises(OSError) as info:
            _syncio.write_and_sync([(bad, b"x", 0)], [fd])
        assert info.value.errno == errno.EBADF
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "call",
    [
        lambda: _syncio.pwrite_all([(1, "text", 0)]),
        lambda: _syncio.pwrite_all([(1, b"x")]),
        lambda: _syncio.pwrite_all(5),
        lambda: _syncio.fdatasync_all(["1"]),
        lambda: _syncio.write_and_sync([]),
    ],
)
def test_bad_arguments_raise_type_errors(call: object) -> None:
    with pytest.raises(TypeError):
        call()  # type: ignore[operator]


def test_negative_descriptor_is_refused() -> None:
    with pytest.raises(ValueError):
        _syncio.fdatasync_all([-1])


def test_a_replaced_pwrite_or_sync_turns_the_native_path_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Counting(OsDisk):
        def sync(self, fd: int) -> None:
            super().sync(fd)

    assert not Counting().native_group_io  # a subclass that observes syncs
    instance = OsDisk()
    instance.pwrite = lambda fd, data, offset: None  # type: ignore[method-assign]
    assert not instance.native_group_io  # an instance-level replacement
    monkeypatch.setattr(disk.OsDisk, "sync", lambda self, fd: None)
    assert not OsDisk().native_group_io  # a monkeypatched class (fault injection)


def test_the_python_fallback_calls_pwrite_for_each_buffer(tmp_path: Path) -> None:
    calls: list[tuple[int, bytes, int]] = []

    class Recording(OsDisk):
        def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
            calls.append((fd, bytes(data), offset))
            super().pwrite(fd, data, offset)

    (fd,) = open_files(tmp_path, 1)
    try:
        Recording().pwrite_all([(fd, b"ab", 0), (fd, b"cd", 2)])
        assert calls == [(fd, b"ab", 0), (fd, b"cd", 2)]
        assert os.pread(fd, 10, 0) == b"abcd"
    finally:
        os.close(fd)


async def test_a_failed_native_write_fails_the_group_and_stops_the_storage(
    tmp_path: Path,
) -> None:
    """The native path's failure takes the same road as the os calls': every append of
    the group fails (none is acknowledged) and the storage reports itself unusable."""
    meta = SqliteMetadataStore(tmp_path / "meta.db")
    fatal: list[BaseException] = []
    factory = FileManagedLedgerFactory(tmp_path / "data", meta, on_fatal=fatal.append)
    try:
        ledgers = [await factory.open(f"t{i}") for i in range(2)]
        await asyncio.gather(*(ml.add_entry(b"durable") for ml in ledgers))
        # Swap one ledger file's descriptor for a read-only one behind the writer's
        # back: its next pwrite fails with EBADF inside the native call.
        victim = next(
            fd for fd in map(int, os.listdir("/proc/self/fd"))
            if _points_into(fd, tmp_path / "data") and _is_ledger_file(fd)
        )
        readonly = os.open(os.devnull, os.O_RDONLY)
        os.dup2(readonly, victim)
        os.close(readonly)
        group = [ml.add_entry(b"lost") for ml in ledgers]
        for fut in group:
            with pytest.raises(FatalStorageError):
                await fut
        assert len(fatal) == 1 and isinstance(fatal[0].__cause__, OSError)
        assert fatal[0].__cause__.errno == errno.EBADF
    finally:
        await factory.close()
        meta.close()


def _points_into(fd: int, directory: Path) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith(str(directory))
    except OSError:
        return False


def _is_ledger_file(fd: int) -> bool:
    return os.readlink(f"/proc/self/fd/{fd}").endswith(".log")
