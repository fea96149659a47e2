"""The cost of the fence check: a cluster member's storage (``shared=True``) against
a standalone's (``shared=False``) in the same run.

    .venv/bin/python benchmarks/fence_check.py [--rounds N] [--entries N] [--topics N]

Prints (1) one ``OsDisk.fenced`` call (an ``fstat``) in microseconds beside a loop
that does nothing, and (2) appends/s of 1 KB entries from ``--topics`` managed ledgers
with 64 appenders each, fsync on, for both settings, rounds alternating so that
both see the same disk. A group that touched N files pays N ``fstat`` calls after
its fsync, before acknowledging.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from quasar.storage import (
    FileManagedLedgerFactory,
    ManagedLedgerConfig,
    SqliteMetadataStore,
)
from quasar.storage.file import OsDisk

CONCURRENCY = 64


def fstat_cost_us(path: Path, calls: int = 200_000) -> tuple[float, float]:
    disk = OsDisk()
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        start = time.perf_counter()
        for _ in range(calls):
            pass
        empty = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(calls):
            disk.fenced(fd)
        checked = time.perf_counter() - start
    finally:
        os.close(fd)
    return empty / calls * 1e6, checked / calls * 1e6


async def appends_per_s(root: Path, shared: bool, entries: int, topics: int) -> float:
    meta = SqliteMetadataStore(root / "meta.db")
    factory = FileManagedLedgerFactory(root / "data", meta, shared=shared)
    payload = b"x" * 1024
    ledgers = [await factory.open(f"bench/t-{i}", ManagedLedgerConfig()) for i in range(topics)]
    for ml in ledgers:
        await ml.add_entry(payload)  # warm up: files created, writer started

    async def appender(ml: object, n: int) -> None:
        for _ in range(n):
            await ml.add_entry(payload)  # type: ignore[attr-defined]

    per = entries // (topics * CONCURRENCY)
    start = time.perf_counter()
    await asyncio.gather(*(appender(ml, per) for ml in ledgers for _ in range(CONCURRENCY)))
    elapsed = time.perf_counter() - start
    await factory.close()
    meta.close()
    return per * topics * CONCURRENCY / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--topics", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        empty_us, fstat_us = fstat_cost_us(root / "probe")
        print(f"empty loop {empty_us:.3f} us/call, fence check (fstat) {fstat_us:.3f} us/call")
        results: dict[bool, list[float]] = {False: [], True: []}
        for r in range(args.rounds):
            for shared in (False, True):
                run_dir = root / f"r{r}-{shared}"
                run_dir.mkdir()
                results[shared].append(
                    asyncio.run(appends_per_s(run_dir, shared, args.entries, args.topics))
                )
        for shared, label in ((False, "standalone (no check)"), (True, "cluster (fence check)")):
            rates = results[shared]
            print(f"{label:24} median {statistics.median(rates):9.0f} appends/s "
                  f"(min {min(rates):.0f}, max {max(rates):.0f}, {args.rounds} rounds)")


if __name__ == "__main__":
    main()
