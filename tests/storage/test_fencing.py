"""Fencing a previous writer on a shared data directory: two factories stand for two
brokers (one data directory, one metadata store, a lock file each). The new owner's
open fences the previous owner's open ledger and recovers it; an append the
previous owner had in flight is refused, never acknowledged, when the fence came
before its check; everything it acknowledged is in the recovered ledger."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from pathlib import Path

import pytest

from quasar.errors import LedgerFencedError
from quasar.storage import (
    FileManagedLedgerFactory,
    InitialPosition,
    ManagedLedgerConfig,
    SqliteMetadataStore,
)
from quasar.storage.api import EARLIEST
from quasar.storage.file import OsDisk
from quasar.storage.file import format as fmt
from quasar.storage.memory import MemoryLedgerStorage

WAIT_S = 10.0


class HeldCheckDisk(OsDisk):
    """Holds the writer thread at its fence check (after the group's sync) until
    ``release`` is set, so a fence can land between the sync and the check."""

    def __init__(self) -> None:
        self.hold = False
        self.at_check = threading.Event()
        self.release = threading.Event()

    def fenced(self, fd: int) -> bool:
        if self.hold:
            self.at_check.set()
            self.release.wait(WAIT_S)
        return super().fenced(fd)


def _broker(
    tmp_path: Path, meta: SqliteMetadataStore, name: str, disk: OsDisk | None = None,
    *, shared: bool = True,
) -> FileManagedLedgerFactory:
    return FileManagedLedgerFactory(
        tmp_path / "data", meta, lock_file=f"LOCK-{name}", shared=shared, disk=disk
    )


def _mode(tmp_path: Path, ledger_id: int) -> int:
    return (tmp_path / "data" / "ledgers" / f"{ledger_id}.log").stat().st_mode


async def _read_all(factory: FileManagedLedgerFactory) -> list[bytes]:
    ml = await factory.open("t", ManagedLedgerConfig())
    return [e.data for e in await ml.read_entries(EARLIEST, 100)]


async def test_an_append_in_flight_at_the_fence_is_refused_and_the_acked_ones_recovered(
    tmp_path: Path,
) -> None:
    meta = SqliteMetadataStore(tmp_path / "meta.db")
    disk = HeldCheckDisk()
    old = _broker(tmp_path, meta, "old", disk)
    old_ml = await old.open("t", ManagedLedgerConfig())
    cursor = old_ml.open_cursor("sub", InitialPosition.EARLIEST)
    acked = [await old_ml.add_entry(b"acked-%d" % i) for i in range(3)]
    first_ledger = acked[0].ledger_id

    disk.hold = True
    in_flight = old_ml.add_entry(b"in-flight")
    assert await asyncio.to_thread(disk.at_check.wait, WAIT_S)
    # The new owner opens the topic while the old writer stands between its sync and
    # its check: it fences the ledger and finds the synced entry in it.
    new = _broker(tmp_path, meta, "new")
    new_ml = await new.open("t", ManagedLedgerConfig())
    assert not _mode(tmp_path, first_ledger) & stat.S_IWUSR
    assert [(i.ledger_id, i.entries) for i in new_ml.ledgers()][0] == (first_ledger, 4)
    disk.release.set()

    with pytest.raises(LedgerFencedError) as info:
        await in_flight
    assert info.value.retryable
    assert old_ml.fenced
    with pytest.raises(LedgerFencedError):  # and nothing more is taken
        await old_ml.add_entry(b"after the fence")
    # The old owner's close leaves the metadata to the new owner: no cursor state,
    # no ledger list (the new owner's compare-and-set writes still succeed).
    cursor.delete([acked[0]])
    await old.close()
    after = await new_ml.add_entry(b"new owner")
    assert after.ledger_id > first_ledger
    new_cursor = new_ml.open_cursor("sub")
    new_cursor.delete([acked[1]])
    await new_cursor.flush()
    await new.close()

    reopened = _broker(tmp_path, meta, "third")
    assert await _read_all(reopened) == [
        b"acked-0", b"acked-1", b"acked-2", b"in-flight", b"new owner"
    ]
    await reopened.close()


async def test_a_fenced_ledger_is_read_up_to_its_recorded_length(tmp_path: Path) -> None:
    meta = SqliteMetadataStore(tmp_path / "meta.db")
    old = _broker(tmp_path, meta, "old")
    old_ml = await old.open("t", ManagedLedgerConfig())
    ledger_id = (await old_ml.add_entry(b"acked")).ledger_id
    old.abandon()  # killed: the ledger stays open in the metadata

    new = _broker(tmp_path, meta, "new")
    await new.open("t", ManagedLedgerConfig())
    await new.close()
    # A record a fenced writer wrote after the fence, never acknowledged: it is past
    # the length recorded when the ledger was closed, so it is not part of it.
    path = tmp_path / "data" / "ledgers" / f"{ledger_id}.log"
    os.chmod(path, 0o644)
    with open(path, "ab") as f:
        f.write(fmt.record_header(b"late") + b"late")

    third = _broker(tmp_path, meta, "third")
    assert await _read_all(third) == [b"acked"]
    await third.close()


async def test_a_standalone_recovery_does_not_fence(tmp_path: Path) -> None:
    meta = SqliteMetadataStore(tmp_path / "meta.db")
    first = _broker(tmp_path, meta, "a", shared=False)
    ml = await first.open("t", ManagedLedgerConfig())
    ledger_id = (await ml.add_entry(b"x")).ledger_id
    first.abandon()
    second = _broker(tmp_path, meta, "a", shared=False)
    assert await _read_all(second) == [b"x"]
    assert _mode(tmp_path, ledger_id) & stat.S_IWUSR
    await second.close()


async def test_the_memory_storage_refuses_appends_to_a_fenced_ledger() -> None:
    storage = MemoryLedgerStorage()
    storage.loop = asyncio.get_running_loop()
    storage.create_ledger(1)
    outcomes: list[BaseException | None] = []
    storage.append(1, 0, b"a", None, outcomes.append)
    assert storage.fence_ledger(1) == (1, 1)
    assert storage.is_fenced(1)
    storage.append(1, 1, b"b", None, outcomes.append)
    ran = asyncio.get_running_loop().create_future()
    storage.loop.call_soon(ran.set_result, None)  # after the completions (FIFO)
    await ran
    assert outcomes[0] is None and isinstance(outcomes[1], LedgerFencedError)
    assert storage.read(1, 1) is None
