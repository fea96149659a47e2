"""A full disk: a refused write fails its appends retryably, leaves no torn tail, and
appends resume in a new ledger once space is back; a refused sync stays fatal."""

from __future__ import annotations

import asyncio
import errno
import os
import sqlite3
from pathlib import Path

import pytest

from quasar.errors import FatalStorageError, MetadataError, StorageFullError
from quasar.storage import (
    FileManagedLedgerFactory,
    InitialPosition,
    ManagedLedgerConfig,
    SqliteMetadataStore,
)
from quasar.storage.disk_space import LEDGERS, METADATA, DiskSpace
from quasar.storage.file import OsDisk


class FillingDisk(OsDisk):
    """A disk that, while ``full`` is set, writes half of a write and then refuses
    the rest with ENOSPC (what a file system does when the last blocks run out)."""

    def __init__(self) -> None:
        self.full = False
        self.sync_full = False

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
        if self.full:
            half = memoryview(data)[: len(data) // 2]
            if half:
                super().pwrite(fd, half, offset)
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        super().pwrite(fd, data, offset)

    def sync(self, fd: int) -> None:
        if self.sync_full:
            raise OSError(errno.ENOSPC, "No space left on device (injected, fsync)")
        super().sync(fd)


def _open(tmp_path: Path, disk: OsDisk) -> tuple[FileManagedLedgerFactory, SqliteMetadataStore]:
    meta = SqliteMetadataStore(tmp_path / "meta.db")
    return FileManagedLedgerFactory(tmp_path / "data", meta, disk=disk), meta


def _ledger_files(tmp_path: Path) -> dict[str, int]:
    d = tmp_path / "data" / "ledgers"
    return {p.name: p.stat().st_size for p in d.glob("*.log")}


async def test_a_refused_write_is_cut_off_and_appends_resume(tmp_path: Path) -> None:
    disk = FillingDisk()
    fatal: list[FatalStorageError] = []
    meta = SqliteMetadataStore(tmp_path / "meta.db")
    factory = FileManagedLedgerFactory(
        tmp_path / "data", meta, disk=disk, on_fatal=fatal.append
    )
    ml = await factory.open("t", ManagedLedgerConfig())
    stored = [await ml.add_entry(b"kept-%d" % i) for i in range(3)]
    first_ledger = stored[0].ledger_id
    size_before = _ledger_files(tmp_path)[f"{first_ledger}.log"]

    disk.full = True
    # Several appends in flight: the refused group and the records queued behind it.
    refused = [ml.add_entry(b"refused-%d" % i * 50) for i in range(5)]
    for fut in refused:
        with pytest.raises(StorageFullError) as info:
            await fut
        assert info.value.retryable
    assert _ledger_files(tmp_path)[f"{first_ledger}.log"] == size_before  # no torn tail
    assert not factory.disk_space().writable(LEDGERS)
    # Still full: opening a new ledger is refused too, with the same retryable error.
    with pytest.raises(StorageFullError):
        await ml.add_entry(b"still full")

    disk.full = False
    resumed = await ml.add_entry(b"after")
    assert resumed.ledger_id > first_ledger and resumed.entry_id == 0
    assert factory.disk_space().writable(LEDGERS)
    assert factory.disk_space().refusals(LEDGERS) >= 2
    assert not fatal

    cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
    entries = await cursor.read_entries(10)
    assert [e.data for e in entries] == [b"kept-0", b"kept-1", b"kept-2", b"after"]

    # Recovery as after kill -9 sees exactly the same entries.
    factory.abandon()
    meta.close()
    factory2, meta2 = _open(tmp_path, OsDisk())
    ml2 = await factory2.open("t")
    cursor2 = ml2.open_cursor("d", InitialPosition.EARLIEST)
    assert [e.data for e in await cursor2.read_entries(10)] == [
        b"kept-0", b"kept-1", b"kept-2", b"after",
    ]
    await factory2.close()
    meta2.close()


async def test_a_refused_write_in_a_busy_group_leaves_the_other_ledgers_usable(
    tmp_path: Path,
) -> None:
    disk = FillingDisk()
    factory, meta = _open(tmp_path, disk)
    a = await factory.open("a")
    b = await factory.open("b")
    await a.add_entry(b"a0")
    await b.add_entry(b"b0")
    disk.full = True
    results = await asyncio.gather(
        *[m.add_entry(b"x" * 100) for m in (a, b, a, b)], return_exceptions=True
    )
    assert all(isinstance(r, StorageFullError) for r in results)
    disk.full = False
    assert (await a.add_entry(b"a1")).entry_id == 0
    assert (await b.add_entry(b"b1")).entry_id == 0
    for ml, want in ((a, [b"a0", b"a1"]), (b, [b"b0", b"b1"])):
        cursor = ml.open_cursor("c", InitialPosition.EARLIEST)
        assert [e.data for e in await cursor.read_entries(10)] == want
    await factory.close()
    meta.close()


async def test_a_full_disk_on_fsync_stays_fatal(tmp_path: Path) -> None:
    disk = FillingDisk()
    fatal: list[FatalStorageError] = []
    meta = SqliteMetadataStore(tmp_path / "meta.db")
    factory = FileManagedLedgerFactory(
        tmp_path / "data", meta, disk=disk, on_fatal=fatal.append
    )
    ml = await factory.open("t")
    await ml.add_entry(b"ok")
    disk.sync_full = True
    with pytest.raises(FatalStorageError):
        await ml.add_entry(b"x")
    assert len(fatal) == 1 and isinstance(fatal[0].__cause__, OSError)
    with pytest.raises(FatalStorageError):
        await ml.add_entry(b"never")  # the storage never writes again
    factory.abandon()
    meta.close()


def test_a_full_metadata_disk_fails_writes_retryably(tmp_path: Path) -> None:
    space = DiskSpace()
    store = SqliteMetadataStore(tmp_path / "meta.db", disk_space=space)
    store.put("/a", b"1")
    # SQLite's own limit stands in for the disk: the same SQLITE_FULL error.
    page_size = store._conn.execute("PRAGMA page_size").fetchone()[0]
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count={pages}")
    with pytest.raises(MetadataError) as info:
        store.put("/b", os.urandom(page_size * 4))
    assert info.value.retryable and "full" in str(info.value)
    assert isinstance(info.value.__cause__, sqlite3.Error)
    assert not space.writable(METADATA) and space.refusals(METADATA) == 1
    assert store.get("/b") is None and store.get("/a") is not None  # rolled back
    store._conn.execute(f"PRAGMA max_page_count={pages + 1000}")
    store.put("/b", b"2")
    assert space.writable(METADATA)
    store.close()


def test_disk_space_metrics_and_one_log_line_per_episode(
    caplog: pytest.LogCaptureFixture,
) -> None:
    space = DiskSpace()
    with caplog.at_level("WARNING", logger="quasar.storage.disk_space"):
        for _ in range(3):
            space.refused(LEDGERS, "ENOSPC")
        space.written(LEDGERS)
        space.written(LEDGERS)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [LEDGERS, LEDGERS]
    samples = {
        (s.name, s.labels["store"]): s.value for m in space.collect() for s in m.samples
    }
    assert samples[("quasar_storage_disk_full_total", LEDGERS)] == 3
    assert samples[("quasar_storage_disk_full_total", METADATA)] == 0
    assert samples[("quasar_storage_writable", LEDGERS)] == 1


async def test_a_crash_while_the_disk_is_full_recovers_what_was_stored(
    tmp_path: Path,
) -> None:
    disk = FillingDisk()
    factory, meta = _open(tmp_path, disk)
    ml = await factory.open("t")
    for i in range(3):
        await ml.add_entry(b"kept-%d" % i)
    disk.full = True
    for fut in [ml.add_entry(b"x" * 300) for _ in range(3)]:
        with pytest.raises(StorageFullError):
            await fut
    with pytest.raises(StorageFullError):
        await ml.add_entry(b"new ledger refused")
    factory.abandon()  # as kill -9: nothing sealed or flushed on the way out
    meta.close()

    factory2, meta2 = _open(tmp_path, OsDisk())
    ml2 = await factory2.open("t")
    cursor = ml2.open_cursor("c", InitialPosition.EARLIEST)
    assert [e.data for e in await cursor.read_entries(10)] == [b"kept-0", b"kept-1", b"kept-2"]
    assert (await ml2.add_entry(b"after")).entry_id == 0
    await factory2.close()
    meta2.close()
