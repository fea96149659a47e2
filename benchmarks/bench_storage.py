"""Storage benchmark: append throughput of the file managed ledger with fsync on.

    .venv/bin/python benchmarks/bench_storage.py [--entries N] [--size BYTES]

Prints appends/s for 1 KB entries awaited one at a time (every append pays a full
write + fdatasync) and with 64 concurrent appenders (group commit shares fsyncs),
plus fsyncs per append as counted by the group-commit writer.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from quasar.storage import (
    FileManagedLedgerFactory,
    ManagedLedgerConfig,
    SqliteMetadataStore,
)
from quasar.storage.config import JournalConfig


async def run(mode: str, entries: int, size: int, sync: bool, root: Path) -> None:
    meta = SqliteMetadataStore(root / f"{mode}-{sync}.db")
    factory = FileManagedLedgerFactory(
        root / f"{mode}-{sync}", meta, journal=JournalConfig(journal_sync_data=sync)
    )
    ml = await factory.open("bench/topic", ManagedLedgerConfig())
    payload = b"x" * size
    await ml.add_entry(payload)  # warm up: ledger file created, writer started
    stats = factory.writer_stats()
    appends0, syncs0, groups0 = stats.appends, stats.syncs, stats.groups
    start = time.perf_counter()
    if mode == "sequential":
        for _ in range(entries):
            await ml.add_entry(payload)
    else:
        concurrency = int(mode.split("-")[1])

        async def appender(n: int) -> None:
            for _ in range(n):
                await ml.add_entry(payload)

        await asyncio.gather(
            *(appender(entries // concurrency) for _ in range(concurrency))
        )
    elapsed = time.perf_counter() - start
    done = stats.appends - appends0
    syncs = stats.syncs - syncs0
    groups = stats.groups - groups0
    print(
        f"{mode:>14}  fsync={'on ' if sync else 'off'}  {done / elapsed:>9,.0f} appends/s  "
        f"{elapsed / done * 1e6:>7.1f} us/append  fsyncs/append={syncs / done:.3f}  "
        f"appends/group={done / groups:.1f}"
    )
    await factory.close()
    meta.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=5_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quasar-bench-", dir=".") as tmp:
        root = Path(tmp)
        for sync in (True, False):
            for mode in ("sequential", "concurrent-64"):
                await run(mode, args.entries, args.size, sync, root)


if __name__ == "__main__":
    asyncio.run(main())
