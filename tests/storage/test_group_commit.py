"""Group commit: batching, fsync failure is fatal, rollover ordering inside a group."""

from __future__ import annotations

import asyncio
import errno
import sys
import threading
import time
from pathlib import Path

import pytest

from quasar.errors import FatalStorageError, PersistenceError
from quasar.storage import (
    EARLIEST,
    FileManagedLedgerFactory,
    ManagedLedgerConfig,
    SqliteMetadataStore,
)
from quasar.storage.config import JournalConfig
from quasar.storage.file import OsDisk


class CountingDisk(OsDisk):
    """Counts syncs; can hold the first sync until released, or fail one."""

    def __init__(self) -> None:
        self.syncs = 0
        self.fail_sync_at: int | None = None  # 1-based sync number that fails with EIO
        self.gate: threading.Event | None = None
        self.events: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def sync(self, fd: int) -> None:
        with self._lock:
            self.syncs += 1
            n = self.syncs
            self.events.append(("sync", fd))
        # Only the writer thread waits at the gate: ledger creation on the loop
        # thread also syncs, and must not block the test.
        if self.gate is not None and threading.current_thread().name.startswith(
            "quasar-group"
        ):
            self.gate.wait(timeout=30)
        if self.fail_sync_at is not None and n >= self.fail_sync_at:
            raise OSError(errno.EIO, "injected fsync failure")
        super().sync(fd)

    def pwrite(
        self, fd: int, data: bytes | bytearray | memoryview, offset: int
    ) -> None:
        with self._lock:
            self.events.append(("write", fd))
        super().pwrite(fd, data, offset)


def _spin(seconds: float) -> None:
    """Hold the loop thread busy in Python (the GIL can switch meanwhile)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def make(
    tmp_path: Path, disk: OsDisk, **kw: object
) -> tuple[FileManagedLedgerFactory, SqliteMetadataStore]:
    meta = SqliteMetadataStore(tmp_path / "meta.db")
    return FileManagedLedgerFactory(tmp_path / "data", meta, disk=disk, **kw), meta  # type: ignore[arg-type]


async def test_concurrent_appends_share_fsyncs(tmp_path: Path) -> None:
    disk = CountingDisk()
    factory, meta = make(tmp_path, disk)
    ml = await factory.open("t")
    before = disk.syncs  # ledger creation syncs its header
    disk.gate = threading.Event()
    futures = [ml.add_entry(b"x" * 1024) for _ in range(500)]
    # The writer may hold at most the appends it took before the gate; the rest
    # queue up behind the blocked fsync and must share the next one.
    disk.gate.set()
    await asyncio.gather(*futures)
    appends_syncs = disk.syncs - before
    assert appends_syncs <= 3, appends_syncs
    stats = factory.writer_stats()
    assert stats.appends == 500 and stats.groups <= 3
    await factory.close()
    meta.close()


async def test_appends_of_one_loop_turn_are_one_group_even_for_an_idle_writer(
    tmp_path: Path,
) -> None:
    # Handing the first append to an idle writer at once made a group of one, and the
    # rest of the turn's appends waited a whole fsync for the next group.
    disk = CountingDisk()
    factory, meta = make(tmp_path, disk)
    ml = await factory.open("t")
    groups_before = factory.writer_stats().groups
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # let the writer thread run between the appends
    try:
        futures = []
        for _ in range(64):  # one loop turn, the writer idle at its start
            futures.append(ml.add_entry(b"z" * 100))
            _spin(0.0002)
    finally:
        sys.setswitchinterval(interval)
    await asyncio.gather(*futures)
    stats = factory.writer_stats()
    assert stats.groups - groups_before == 1
    await factory.close()
    meta.close()


async def test_sequential_appends_each_fsync(tmp_path: Path) -> None:
    disk = CountingDisk()
    factory, meta = make(tmp_path, disk)
    ml = await factory.open("t")
    before = disk.syncs
    for _ in range(10):
        await ml.add_entry(b"y")
    assert disk.syncs - before == 10  # nothing to group with: no added latency
    await factory.close()
    meta.close()


async def test_sync_data_false_never_fsyncs_appends(tmp_path: Path) -> None:
    disk = CountingDisk()
    factory, meta = make(tmp_path, disk, journal=JournalConfig(journal_sync_data=False))
    ml = await factory.open("t")
    before = disk.syncs
    await asyncio.gather(*(ml.add_entry(b"z") for _ in range(20)))
    assert disk.syncs == before
    await factory.close()
    meta.close()


async def test_fsync_failure_is_fatal(tmp_path: Path) -> None:
    disk = CountingDisk()
    fatal: list[BaseException] = []
    factory, meta = make(tmp_path, disk, on_fatal=fatal.append)
    ml = await factory.open("t")
    other = await factory.open("other")
    ok = await ml.add_entry(b"durable")
    disk.fail_sync_at = disk.syncs + 1
    first = ml.add_entry(b"lost-1")
    second = other.add_entry(b"lost-2")
    for fut in (first, second):
        with pytest.raises(FatalStorageError):
            await fut
    assert len(fatal) == 1 and isinstance(fatal[0], FatalStorageError)
    syncs = disk.syncs
    # Later appends fail too, on every managed ledger, and nothing is retried.
    for target in (ml, other):
        with pytest.raises(FatalStorageError):
            await target.add_entry(b"later")
    assert disk.syncs == syncs
    assert ml.last_confirmed_entry == ok
    assert [e.data for e in await ml.read_entries(EARLIEST, 10)] == [b"durable"]
    await factory.close()
    meta.close()
    assert len(fatal) == 1


async def test_failed_ledger_creation_is_retryable(tmp_path: Path) -> None:
    disk = CountingDisk()
    factory, meta = make(tmp_path, disk)
    ml = await factory.open(
        "t",
        ManagedLedgerConfig(
            max_entries_per_ledger=1, min_ledger_rollover_time_minutes=0
        ),
    )
    await ml.add_entry(b"a")

    def failing_sync_dir(path: str) -> None:
        raise OSError(errno.ENOSPC, "injected")

    disk.sync_dir = failing_sync_dir  # type: ignore[method-assign]
    with pytest.raises(PersistenceError):
        await ml.add_entry(b"b")  # rollover could not create the next ledger
    del disk.sync_dir
    assert (await ml.add_entry(b"c")).entry_id == 0
    await factory.close()
    meta.close()


async def test_rollover_inside_a_group_syncs_the_old_ledger_first(
    tmp_path: Path,
) -> None:
    disk = CountingDisk()
    factory, meta = make(tmp_path, disk)
    ml = await factory.open(
        "t",
        ManagedLedgerConfig(
            max_entries_per_ledger=3, min_ledger_rollover_time_minutes=0
        ),
    )
    disk.gate = threading.Event()
    futures = [ml.add_entry(b"r") for _ in range(7)]  # three ledgers in one burst
    disk.events.clear()
    disk.gate.set()
    positions = await asyncio.gather(*futures)
    assert len({p.ledger_id for p in positions}) == 3
    # Per file: every write to a later ledger comes after a sync of the earlier one.
    fds_in_order: list[int] = []
    for kind, fd in disk.events:
        if kind == "write" and (not fds_in_order or fds_in_order[-1] != fd):
            fds_in_order.append(fd)
    for earlier, later in zip(fds_in_order, fds_in_order[1:], strict=False):
        first_later_write = disk.events.index(("write", later))
        assert ("sync", earlier) in disk.events[:first_later_write]
    await factory.close()
    meta.close()


class RendezvousDisk(OsDisk):
    """Each group sync of the writer waits until ``parties`` syncs are in progress at
    once; a writer that synced its files one after another would never get there."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=20)
        self.armed = False

    def sync(self, fd: int) -> None:
        if self.armed and threading.current_thread().name.startswith("quasar-group"):
            self.barrier.wait()
        super().sync(fd)


async def test_one_group_syncs_its_files_concurrently(tmp_path: Path) -> None:
    disk = RendezvousDisk(parties=3)
    factory, meta = make(tmp_path, disk)
    ledgers = [await factory.open(f"t{i}") for i in range(3)]
    loop = asyncio.get_running_loop()
    writer_blocked = loop.create_future()
    release = threading.Event()

    def first_sync_waits(fd: int) -> None:
        loop.call_soon_threadsafe(writer_blocked.set_result, None)
        release.wait(timeout=20)
        OsDisk.sync(disk, fd)

    # Hold the writer in the sync of a first append so that one append to each of
    # the three ledgers queues behind it and they form the next group together.
    disk.sync = first_sync_waits  # type: ignore[method-assign]
    first = ledgers[0].add_entry(b"w")
    await writer_blocked
    del disk.sync  # the next group uses RendezvousDisk.sync
    disk.armed = True
    group = [ml.add_entry(b"x") for ml in ledgers]
    release.set()
    await first
    await asyncio.gather(*group)  # a serial writer would break the barrier: EIO-fatal
    assert not disk.barrier.broken
    await factory.close()
    meta.close()


async def test_a_failed_sync_in_a_concurrent_group_fails_the_whole_group(
    tmp_path: Path,
) -> None:
    """One file's fdatasync failing while the group's other files sync beside it: every
    append of the group fails (none is acknowledged) and the storage stops."""
    disk = CountingDisk()
    fatal: list[BaseException] = []
    factory, meta = make(tmp_path, disk, on_fatal=fatal.append)
    ledgers = [await factory.open(f"t{i}") for i in range(3)]
    before = disk.syncs
    disk.gate = threading.Event()  # the writer blocks in the sync of its next group
    first = asyncio.ensure_future(ledgers[0].add_entry(b"first"))
    for _ in range(2000):  # bounded: wait for the writer to reach that sync
        if disk.syncs > before:
            break
        await asyncio.sleep(0.005)
    assert disk.syncs == before + 1 and not first.done()
    group = [ml.add_entry(b"grouped") for ml in ledgers]  # queue up: one group of 3 files
    disk.fail_sync_at = disk.syncs + 2  # a later sync of that group fails
    disk.gate.set()
    await first
    for fut in group:
        with pytest.raises(FatalStorageError):
            await fut
    assert len(fatal) == 1
    await factory.close()
    meta.close()
