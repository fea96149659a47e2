"""Child process for the crash-point tests: drives a buffer on file storage until
the armed crash point kills it. Usage: crash_child.py ROOT SCENARIO."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from quasar.transaction import TxnID
from quasar.transaction.buffer import TransactionBufferConfig
from quasar.transaction.buffer.snapshot_format import segment_capacity
from tests.transaction.buffer.helpers import TOPIC, DirSnapshotStore, TbEnv

SEGMENT_BYTES = 1024


async def main(root: Path, scenario: str) -> None:
    config = TransactionBufferConfig(snapshot_segment_size_bytes=SEGMENT_BYTES)
    env = TbEnv("file", root, config=config, store=DirSnapshotStore(root / "snapshots"))
    tb = await env.ready()
    if scenario == "marker":
        await env.send(b"t1", TxnID(0, 1))
        print("sent", flush=True)
        await env.commit(TxnID(0, 1))
    elif scenario == "snapshot":
        for i in range(1, segment_capacity(SEGMENT_BYTES, TOPIC) + 2):
            await env.send(b"x", TxnID(0, i))
            await env.abort(TxnID(0, i))
        print("aborted", flush=True)
        await tb.take_snapshot()
    print("survived", flush=True)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
