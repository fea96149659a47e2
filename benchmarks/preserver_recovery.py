"""Recovery time and memory of a coordinator whose preserver holds many entries.

    .venv/bin/python benchmarks/preserver_recovery.py [--entries 100000] [--count 64]
                                                      [--repeat 3]

Builds a broker service in-process on file storage (fsync on, as standalone) in a
temporary directory, fills coordinator 0's terminated-transaction preserver with
``--entries`` ended transactions spread over client names of ``--count`` entries each
(written through the preserver to ``__terminated_txn_state_0``, then compacted, as a
long-running broker leaves it), and closes everything. Then it times loading that
coordinator from cold storage — what TC_CLIENT_CONNECT does after a restart: reading
the compacted topic, decoding every entry, replaying the (empty) log — ``--repeat``
times, and prints the median against two baselines measured the same way:

* ``empty``: the same coordinator with the preserver on and nothing preserved;
* ``off``: the preserver switched off (``transactionMetaPersistCount=0``).

Memory per entry is what the load keeps allocated (tracemalloc, measured in a separate
load because tracing slows it), minus the ``empty`` baseline, divided by the entries:
the preserver's maps plus the system table's copy of each client name's value.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from quasar.broker.service import BrokerService
from quasar.broker.transactions import TransactionService
from quasar.config import ServiceConfiguration
from quasar.protocol import TopicName
from quasar.storage import FileManagedLedgerFactory, SqliteMetadataStore
from quasar.transaction import CoordinatorConfig, TransactionConfig, TxnID, TxnStatus
from quasar.transaction.coordinator import terminated_txn_state_topic


class Broker:
    """A broker service with transactions over one data directory."""

    def __init__(self, root: Path, persist_count: int) -> None:
        self.root = root
        self.persist_count = persist_count

    async def open(self) -> TransactionService:
        self.root.mkdir(parents=True, exist_ok=True)
        self.store = SqliteMetadataStore(str(self.root / "metadata.db"))
        self.ledgers = FileManagedLedgerFactory(str(self.root / "ledgers"), self.store)
        self.service = BrokerService(ServiceConfiguration(), self.ledgers, self.store)
        self.service.resources.bootstrap_standalone("standalone")
        self.txns = TransactionService(
            self.service,
            TransactionConfig(
                transaction_coordinator_count=1,
                coordinator=CoordinatorConfig(
                    transaction_meta_persist_count=self.persist_count
                ),
            ),
        )
        self.service.transactions = self.txns
        return self.txns

    async def close(self) -> None:
        await self.txns.close()
        await self.service.close()
        await self.ledgers.close()
        self.store.close()


async def fill(root: Path, entries: int, count: int) -> None:
    broker = Broker(root, count)
    txns = await broker.open()
    tc = await txns.registry.connect(0)
    now = int(time.time() * 1000)
    for i in range(entries):
        status = TxnStatus.COMMITTED if i % 4 else TxnStatus.ABORTED
        tc.preserver.append(TxnID(0, i), status, f"client-{i // count:06d}", now)
    await tc.preserver.flush()
    assert len(tc.preserver) == entries, len(tc.preserver)
    if count == 0:  # preserver off: its topic is never created
        await broker.close()
        return
    topic = await broker.service.get_topic(
        TopicName.parse(terminated_txn_state_topic(0)), create=False
    )
    while topic.compaction.running:  # one triggered by the table itself
        await asyncio.sleep(0.05)
    await topic.compaction.trigger()
    await broker.close()


async def load_once(root: Path, count: int, *, trace: bool = False) -> tuple[float, int, int]:
    """(seconds to load coordinator 0, entries restored, bytes kept if traced)."""
    broker = Broker(root, count)
    txns = await broker.open()
    if trace:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    tc = await txns.registry.connect(0)
    elapsed = time.perf_counter() - start
    kept = 0
    if trace:
        kept = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    restored = len(tc.preserver)
    await broker.close()
    return elapsed, restored, kept


async def measure(root: Path, count: int, repeat: int) -> tuple[float, int, int]:
    times = []
    restored = 0
    for _ in range(repeat):
        elapsed, restored, _ = await load_once(root, count)
        times.append(elapsed)
    _, _, kept = await load_once(root, count, trace=True)
    return statistics.median(times), restored, kept


async def main(entries: int, count: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="preserver-bench-") as tmp:
        full, empty, off = Path(tmp) / "full", Path(tmp) / "empty", Path(tmp) / "off"
        started = time.perf_counter()
        await fill(full, entries, count)
        filled_s = time.perf_counter() - started
        await fill(empty, 0, count)
        await fill(off, 0, 0)
        full_s, restored, full_bytes = await measure(full, count, repeat)
        empty_s, _, empty_bytes = await measure(empty, count, repeat)
        off_s, _, _ = await measure(off, 0, repeat)
    names = -(-entries // count)
    print(f"preserver recovery: {restored:,} entries, {names:,} client names x {count} "
          f"(filled and compacted in {filled_s:.1f} s), median of {repeat} loads")
    print(f"  {'coordinator load':<34} {'seconds':>9}")
    print(f"  {'preserver off (baseline)':<34} {off_s:>9.3f}")
    print(f"  {'preserver on, 0 entries (baseline)':<34} {empty_s:>9.3f}")
    print(f"  {f'preserver on, {restored:,} entries':<34} {full_s:>9.3f}"
          f"   (+{full_s - empty_s:.3f} s, {(full_s - empty_s) / max(restored, 1) * 1e6:.1f} us/entry)")
    per_entry = (full_bytes - empty_bytes) / max(restored, 1)
    print(f"  memory kept per entry: {per_entry:.0f} bytes "
          f"({(full_bytes - empty_bytes) / 2**20:.1f} MiB for {restored:,} entries)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--count", type=int, default=64, help="transactionMetaPersistCount")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.entries, args.count, args.repeat))
