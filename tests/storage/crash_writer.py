"""Crash-test helper process: appends numbered entries until it is killed.

    python crash_writer.py DATA_DIR METADATA_DB FIRST_NUMBER

Keeps a window of appends in flight and prints ``<number> <ledger_id> <entry_id>``
for each entry only after its future resolved (it is durable). Every 64 entries it
cumulatively acknowledges an earlier entry on cursor ``sub``, flushes the cursor, and
prints ``ack <ledger_id> <entry_id>`` once the flush returned. The test kills it with
SIGKILL at a random moment and checks that every printed line still holds.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque

from quasar.storage import (
    FileManagedLedgerFactory,
    InitialPosition,
    ManagedLedgerConfig,
    Position,
    SqliteMetadataStore,
)

TOPIC = "crash/persistent/topic"
CONFIG = ManagedLedgerConfig(
    max_entries_per_ledger=97, min_ledger_rollover_time_minutes=0
)
WINDOW = 16


def payload(number: int) -> bytes:
    """The bytes of entry ``number`` (the test recomputes them to compare)."""
    return f"entry-{number:08d}-".encode() + bytes([number % 251]) * (number % 300)


async def main(data_dir: str, metadata_db: str, first: int) -> None:
    meta = SqliteMetadataStore(metadata_db)
    factory = FileManagedLedgerFactory(data_dir, meta)
    ml = await factory.open(TOPIC, CONFIG)
    cursor = ml.open_cursor("sub", InitialPosition.EARLIEST)
    pending: deque[tuple[int, asyncio.Future[Position]]] = deque()
    durable: deque[Position] = deque(maxlen=32)
    number = first
    out = sys.stdout
    while True:
        while len(pending) < WINDOW:
            pending.append((number, ml.add_entry(payload(number))))
            number += 1
        n, fut = pending.popleft()
        pos = await fut
        out.write(f"{n} {pos.ledger_id} {pos.entry_id}\n")
        out.flush()
        durable.append(pos)
        if n % 64 == 0 and len(durable) == durable.maxlen:
            acked = durable[0]
            cursor.mark_delete(acked)
            await cursor.flush()
            out.write(f"ack {acked.ledger_id} {acked.entry_id}\n")
            out.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
