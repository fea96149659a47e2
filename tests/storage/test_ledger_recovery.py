"""Recovery of the file implementation: torn tails are dropped, corruption is refused."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from quasar.errors import CorruptRecordError
from quasar.storage import EARLIEST, InitialPosition, ManagedLedgerImpl, Position
from quasar.storage.file import format as fmt

from .storage_env import StorageEnv


async def write_crash(
    env: StorageEnv, n: int, **overrides: object
) -> tuple[list[Position], Path]:
    """Append n entries, crash, and return their positions and the last ledger file."""
    ml = await env.open(**overrides)
    positions = list(
        await asyncio.gather(
            *(ml.add_entry(f"entry-{i:04d}".encode()) for i in range(n))
        )
    )
    last = positions[-1].ledger_id
    await env.crash()
    return positions, env.root / "data" / "ledgers" / f"{last}.log"


def record_offsets(path: Path) -> list[int]:
    data = path.read_bytes()
    return list(
        fmt.scan(lambda off, n: data[off : off + n], len(data), verify=True).offsets
    )


async def entries(ml: ManagedLedgerImpl) -> list[bytes]:
    return [e.data for e in await ml.read_entries(EARLIEST, 10_000)]


async def test_crash_recovery_keeps_everything_acknowledged(
    file_env: StorageEnv,
) -> None:
    positions, _ = await write_crash(file_env, 25, max_entries_per_ledger=10)
    ml = await file_env.open(max_entries_per_ledger=10)
    assert [e.position for e in await ml.read_entries(EARLIEST, 100)] == positions
    assert await entries(ml) == [f"entry-{i:04d}".encode() for i in range(25)]
    # Crash again right after recovery: still the same.
    await file_env.crash()
    ml = await file_env.open()
    assert len(await entries(ml)) == 25


@pytest.mark.parametrize("cut", [1, 5, 8, 12])
async def test_torn_tail_is_truncated(file_env: StorageEnv, cut: int) -> None:
    positions, path = await write_crash(file_env, 10)
    last_record = record_offsets(path)[-1]
    os.truncate(path, last_record + cut)  # the last write was partial
    ml = await file_env.open()
    assert await entries(ml) == [f"entry-{i:04d}".encode() for i in range(9)]
    assert path.stat().st_size == last_record
    p = await ml.add_entry(b"after")
    assert p.ledger_id > positions[-1].ledger_id
    assert (await entries(ml))[-1] == b"after"


@pytest.mark.parametrize(
    "tail",
    [b"\x00" * 4096, os.urandom(3000), b"\xff" * 7, b"\x00\x00\x00\x05\x00\x00"],
    ids=["zeros", "random", "ones", "partial-header"],
)
async def test_garbage_tail_is_truncated(file_env: StorageEnv, tail: bytes) -> None:
    _, path = await write_crash(file_env, 10)
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(tail)
    ml = await file_env.open()
    assert len(await entries(ml)) == 10
    assert path.stat().st_size == size


async def test_torn_header_of_the_only_record(file_env: StorageEnv) -> None:
    _, path = await write_crash(file_env, 1)
    os.truncate(path, fmt.FILE_HEADER_SIZE + 3)
    ml = await file_env.open()
    assert await entries(ml) == []
    assert [i.entries for i in ml.ledgers()] == [0]  # the empty ledger was dropped


@pytest.mark.parametrize("where", ["payload", "length", "crc"])
async def test_corrupt_middle_record_refuses_to_open(
    file_env: StorageEnv, where: str
) -> None:
    _, path = await write_crash(file_env, 10)
    offset = record_offsets(path)[4]
    flip = {"payload": offset + 8 + 3, "length": offset + 2, "crc": offset + 5}[where]
    data = bytearray(path.read_bytes())
    data[flip] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError) as info:
        await file_env.open()
    assert "valid record follows" in str(info.value)
    assert path.read_bytes() == bytes(data)  # nothing was truncated


async def test_corrupt_closed_ledger_detected_on_read(file_env: StorageEnv) -> None:
    ml = await file_env.open(max_entries_per_ledger=5)
    positions = [await ml.add_entry(f"e{i}".encode()) for i in range(8)]
    await file_env.reopen()
    first = positions[0].ledger_id
    path = file_env.root / "data" / "ledgers" / f"{first}.log"
    data = bytearray(path.read_bytes())
    data[record_offsets(path)[2] + 9] ^= 1
    path.write_bytes(bytes(data))
    ml = await file_env.open(max_entries_per_ledger=5)
    assert (await ml.read_entry(positions[1])) is not None
    with pytest.raises(CorruptRecordError):
        await ml.read_entry(positions[2])


async def test_missing_ledger_file_is_an_error(file_env: StorageEnv) -> None:
    _, path = await write_crash(file_env, 3)
    path.unlink()
    with pytest.raises(CorruptRecordError):
        await file_env.open()


async def test_cursors_recover_after_crash(file_env: StorageEnv) -> None:
    ml = await file_env.open(max_entries_per_ledger=4)
    p = [await ml.add_entry(b"x") for _ in range(10)]
    c = ml.open_cursor("sub", InitialPosition.EARLIEST)
    c.mark_delete(p[2])
    c.delete([p[5], p[6]])
    await c.flush()
    await file_env.crash()
    ml = await file_env.open(max_entries_per_ledger=4)
    c = ml.cursors()["sub"]
    assert c.mark_delete_position == p[2]
    assert c.individually_deleted_ranges() == [(p[5], p[5]), (p[6], p[6])] or (
        c.individually_deleted_ranges() == [(p[5], p[6])]
    )
    assert [e.position for e in await c.read_entries(20)] == [p[3], p[4], *p[7:]]


async def test_data_dir_is_locked(file_env: StorageEnv) -> None:
    from quasar.errors import PersistenceError
    from quasar.storage import FileManagedLedgerFactory, MemoryMetadataStore

    with pytest.raises(PersistenceError):
        FileManagedLedgerFactory(file_env.root / "data", MemoryMetadataStore())
