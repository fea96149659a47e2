"""Offline check before a downgrade: which transaction logs still hold batched entries.

    python -m quasar.transaction.batched_log.scan DATA_DIR [--metadata-store URL]

A broker version without PIP-160 cannot read a batched entry. This scans a *stopped*
broker's data directory (the storage lock refuses to open it while a broker runs) and
lists every coordinator log (``__transaction_log_N``) and pending-ack log
(``..__transaction_pending_ack``) with a batched entry its log cursor still needs: not
acknowledged, or acknowledged only for some of its records. Entries the cursor has
acknowledged completely are never read again, so they do not count. Exit status 0:
nothing needs PIP-160 any more (safe to downgrade); 1: something does (start the
broker again with batching off, let the listed transactions end, check again).

Opening a log recovers it exactly as the broker's start does (the last ledger is
sealed and a new one opened), so the scan changes nothing a broker start would not.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from quasar.storage import FileManagedLedgerFactory
from quasar.storage.api import ManagedLedger
from quasar.storage.metadata.config import MetadataStoreConfig
from quasar.storage.metadata.factory import SQLITE_FILE, open_metadata_store

from .entry_format import is_batched_entry

TC_LOG_MARK = "__transaction_log_"
PENDING_ACK_SUFFIX = "__transaction_pending_ack"
LOG_CURSORS = ("transaction.subscription", "__pending_ack_state")
READ_BATCH = 1000


@dataclass(frozen=True)
class LogScan:
    name: str
    entries: int
    batched_entries_needed: int


def is_transaction_log(name: str) -> bool:
    return TC_LOG_MARK in name or name.endswith(PENDING_ACK_SUFFIX)


async def scan_ledger(name: str, ml: ManagedLedger) -> LogScan:
    """Count the batched entries of one log that its cursor still needs."""
    cursors = [c for n, c in ml.cursors().items() if n in LOG_CURSORS]
    needed = entries = 0
    if ml.number_of_entries:
        pos = ml.first_position
        last = ml.last_confirmed_entry
        while pos <= last:
            batch = await ml.read_entries(pos, READ_BATCH)
            if not batch:
                break
            for entry in batch:
                entries += 1
                if is_batched_entry(entry.data) and (
                    not cursors or any(not c.is_acknowledged(entry.position) for c in cursors)
                ):
                    needed += 1
            pos = ml.next_position(batch[-1].position)
    return LogScan(name, entries, needed)


async def scan(data_dir: Path, metadata_store_url: str = "") -> list[LogScan]:
    """Every transaction log of a stopped broker's ``data_dir``; its metadata is in
    the data directory, or at ``metadata_store_url`` (the broker's
    ``metadataStoreUrl``) when given.

    Raises:
        StorageError: the directory is locked by a running broker.
        MetadataError: the metadata store cannot be opened.
    """
    store = open_metadata_store(
        MetadataStoreConfig(metadata_store_url=metadata_store_url), data_dir
    )
    factory = FileManagedLedgerFactory(str(data_dir / "ledgers"), store)
    out = []
    try:
        for name in sorted(n for n in factory.list_names() if is_transaction_log(n)):
            ml = await factory.open(name)
            try:
                out.append(await scan_ledger(name, cast(ManagedLedger, ml)))
            finally:
                await ml.close()
    finally:
        await factory.close()
        store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1].strip())
    parser.add_argument("data_dir", type=Path)
    parser.add_argument(
        "--metadata-store", default="", metavar="URL",
        help="the broker's metadataStoreUrl when its metadata is in ZooKeeper",
    )
    args = parser.parse_args(argv)
    if not args.metadata_store and not (args.data_dir / SQLITE_FILE).exists():
        # Without it the scan would find no logs and call a downgrade safe.
        parser.error(
            f"{args.data_dir} has no {SQLITE_FILE}: for a broker whose metadata is in "
            "ZooKeeper, pass --metadata-store with its metadataStoreUrl"
        )
    results = asyncio.run(scan(args.data_dir, args.metadata_store))
    blocking = [r for r in results if r.batched_entries_needed]
    for r in results:
        print(f"{r.batched_entries_needed:>8} of {r.entries:>8} entries batched and needed: "
              f"{r.name}")
    print("safe to downgrade" if not blocking else
          f"{len(blocking)} log(s) still need PIP-160; do not downgrade yet")
    return 1 if blocking else 0


if __name__ == "__main__":
    sys.exit(main())
