"""Crash test with a real process: kill -9 a writer, reopen, check every acknowledged entry.

The writer prints an entry's position only after its append future resolved, so each
printed line is an acknowledgement. After SIGKILL at a random moment, every printed
entry must be there, in order, with its bytes, and nothing may be missing before it.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quasar.storage import (
    EARLIEST,
    FileManagedLedgerFactory,
    Position,
    SqliteMetadataStore,
)

from .crash_writer import CONFIG, TOPIC, payload

HELPER = Path(__file__).with_name("crash_writer.py")

ITERATIONS = 4
READ_TIMEOUT_S = 60.0


def run_and_kill(data_dir: Path, db: Path, first: int, kill_after: int) -> list[str]:
    """Start the writer, read until ``kill_after`` lines arrived, SIGKILL it, and return
    every complete line it printed (those read before and after the kill)."""
    proc = subprocess.Popen(
        [sys.executable, str(HELPER), str(data_dir), str(db), str(first)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        while buf.count(b"\n") < kill_after:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "writer produced too little output in time"
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:  # the writer died on its own
                err = proc.stderr.read().decode(errors="replace")
                pytest.fail(f"writer exited early ({proc.wait()}):\n{err}")
            buf += chunk
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    buf += proc.stdout.read()  # lines printed between our last read and the kill
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    # A line without its newline was not completely printed: not an acknowledgement.
    return buf.decode().split("\n")[:-1]


async def check_recovered(
    data_dir: Path, db: Path, acked: dict[int, Position], acked_cursor: Position | None
) -> int:
    """Reopen and verify; returns how many entries the ledger holds."""
    meta = SqliteMetadataStore(db)
    factory = FileManagedLedgerFactory(data_dir, meta)
    try:
        ml = await factory.open(TOPIC, CONFIG)
        entries = await ml.read_entries(EARLIEST, 10**9)
        # No gaps, no reordering, no duplicates: entry k holds payload k.
        for k, entry in enumerate(entries):
            assert entry.data == payload(k), (
                f"entry {k} at {entry.position} has wrong bytes"
            )
        recovered = {k: e.position for k, e in enumerate(entries)}
        for number, position in acked.items():
            assert recovered.get(number) == position, (
                f"acknowledged entry {number} lost"
            )
        if acked_cursor is not None:
            assert ml.cursors()["sub"].mark_delete_position >= acked_cursor
        return len(entries)
    finally:
        await factory.close()
        meta.close()


@pytest.mark.crash
async def test_kill_9_loses_no_acknowledged_entry(tmp_path: Path) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    data_dir, db = tmp_path / "data", tmp_path / "metadata.db"
    acked: dict[int, Position] = {}
    acked_cursor: Position | None = None
    total = 0
    for iteration in range(ITERATIONS):
        kill_after = rng.randint(20, 600)
        for line in run_and_kill(data_dir, db, total, kill_after):
            parts = line.split()
            if parts[0] == "ack":
                acked_cursor = Position(int(parts[1]), int(parts[2]))
            else:
                acked[int(parts[0])] = Position(int(parts[1]), int(parts[2]))
        assert acked, f"seed={seed}: nothing acknowledged"
        total = await check_recovered(data_dir, db, acked, acked_cursor)
        assert total >= max(acked) + 1, f"seed={seed} iteration={iteration}"
        print(
            f"seed={seed} iteration {iteration}: kill_after={kill_after} acked={len(acked)} total={total} cursor={acked_cursor}"
        )
