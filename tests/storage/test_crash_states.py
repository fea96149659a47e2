"""Recovery from every crash state a file system may leave of a ledger's unsynced tail.

A ledger file is only ever appended to: the writer appends a commit group with one
positioned write, fdatasyncs it, and only then acknowledges the group's entries. A
new ledger file is created with its header, fsynced, and its directory fsynced
before any entry goes into it; nothing is renamed. So after a crash everything
acknowledged is durable, and what the file system may have done to the group in
flight is all that varies. The states it allows (ALICE's persistence model for
appends without an fsync) are materialised here one by one:

* any byte prefix of the in-flight bytes (the append persisted partly);
* the file's new size persisted but a suffix of the new bytes not (read as zeros);
* a lost block in the middle with the bytes after it persisted (a hole of zeros).

Recovery must keep every acknowledged entry, in order, and show an entry only with
all the entries before it. The first two states recover by cutting the torn tail.
The third cannot be told apart from damage to acknowledged data by looking at the
file (a valid record follows the damaged one), so recovery refuses to open the
ledger and leaves the file untouched rather than guess.

The in-flight group is modelled by the last entries of a crashed ledger: they are
on disk, but nothing about them was acknowledged as far as the states are concerned.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from quasar.errors import CorruptRecordError
from quasar.storage import EARLIEST
from quasar.storage.file import format as fmt

from .storage_env import StorageEnv

ACKED = 4  # entries acknowledged before the crash
IN_FLIGHT = 2  # entries of the group the crash caught (every byte of it is a state)
IN_FLIGHT_BLOCKS = 4  # entries of a group of block-sized entries (every block a state)


def _payload(i: int, size: int) -> bytes:
    return f"{i:02d}".encode().ljust(size, b"x")


async def _template(
    root: Path, payload_size: int, in_flight: int = IN_FLIGHT
) -> tuple[Path, list[bytes], int]:
    """A crashed data directory; returns the ledger file, the payloads and the offset
    where the in-flight group starts."""
    root.mkdir()
    env = StorageEnv("file", root)
    ml = await env.open()
    payloads = [_payload(i, payload_size) for i in range(ACKED + in_flight)]
    for p in payloads[:ACKED]:
        await ml.add_entry(p)
    positions = await asyncio.gather(*(ml.add_entry(p) for p in payloads[ACKED:]))
    ledger = positions[-1].ledger_id
    await env.crash()
    await env.close()
    path = root / "data" / "ledgers" / f"{ledger}.log"
    data = path.read_bytes()
    offsets = fmt.scan(
        lambda off, n: data[off : off + n], len(data), verify=True
    ).offsets
    assert len(offsets) == ACKED + in_flight
    return path, payloads, offsets[ACKED]


async def _recover(root: Path) -> list[bytes]:
    env = StorageEnv("file", root)
    try:
        ml = await env.open()
        return [e.data for e in await ml.read_entries(EARLIEST, 1_000)]
    finally:
        await env.close()


def _materialise(template: Path, state: Path, ledger: Path, edit: object) -> Path:
    shutil.copytree(template, state)
    path = state / ledger.relative_to(template)
    data = bytearray(path.read_bytes())
    path.write_bytes(edit(data))  # type: ignore[operator]
    return path


async def test_every_prefix_and_zeroed_suffix_of_the_group_recovers(
    tmp_path: Path,
) -> None:
    template = tmp_path / "template"
    ledger, payloads, start = await _template(template, payload_size=6)
    end = ledger.stat().st_size
    states = 0
    for cut in range(start, end + 1):
        for zeroed in (False, True):
            state = tmp_path / f"s{cut}-{int(zeroed)}"

            def edit(data: bytearray, cut: int = cut, zeroed: bool = zeroed) -> bytes:
                if zeroed:  # the size reached the disk, the bytes past ``cut`` did not
                    return bytes(data[:cut]) + bytes(len(data) - cut)
                return bytes(data[:cut])

            path = _materialise(template, state, ledger, edit)
            got = await _recover(state)
            assert got == payloads[: len(got)], f"state cut={cut} zeroed={zeroed}"
            assert len(got) >= ACKED, f"an acknowledged entry was lost at cut={cut}"
            if cut == end:
                assert len(got) == ACKED + IN_FLIGHT
            # The torn bytes are cut off, so a crash right after recovery finds the same.
            assert path.stat().st_size <= cut
            if not zeroed:
                assert await _recover(state) == got
            shutil.rmtree(state)
            states += 1
    assert states == 2 * (end - start + 1)


@pytest.mark.parametrize("block", [512, 4096])
async def test_a_hole_before_persisted_entries_is_refused_not_guessed(
    tmp_path: Path, block: int
) -> None:
    template = tmp_path / "template"
    ledger, _, start = await _template(template, block, IN_FLIGHT_BLOCKS)
    end = ledger.stat().st_size
    holes = 0
    # Every block-aligned hole inside the group that leaves a whole record after it.
    first = (start + block - 1) // block * block
    for hole in range(first, end - 2 * block, block):
        state = tmp_path / f"h{hole}"

        def edit(data: bytearray, hole: int = hole) -> bytes:
            data[hole : hole + block] = bytes(block)
            return bytes(data)

        path = _materialise(template, state, ledger, edit)
        damaged = path.read_bytes()
        with pytest.raises(CorruptRecordError, match="refusing to skip data"):
            await _recover(state)
        assert path.read_bytes() == damaged  # nothing cut, nothing rewritten
        shutil.rmtree(state)
        holes += 1
    assert holes >= 1
