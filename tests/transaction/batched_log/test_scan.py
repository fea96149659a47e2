"""The offline downgrade check finds batched entries a log cursor still needs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client.registry import CollectorRegistry

from quasar.storage import FileManagedLedgerFactory, SqliteMetadataStore
from quasar.transaction.batched_log import (
    BatchedLogs,
    BatchedWriteConfig,
    LogPosition,
)
from quasar.transaction.batched_log.scan import main, scan
from quasar.transaction.coordinator import TransactionLog
from quasar.transaction.coordinator_registry import transaction_log_ledger_name

from ..helpers import new_record


async def _write(data: Path, batched: bool, records: int) -> list[LogPosition]:
    store = SqliteMetadataStore(str(data / "metadata.db"))
    factory = FileManagedLedgerFactory(str(data / "ledgers"), store)
    logs = BatchedLogs(BatchedWriteConfig(enabled=batched, max_records=records),
                       BatchedWriteConfig(), cluster="c", registry=CollectorRegistry())
    ml = await factory.open(transaction_log_ledger_name(0))
    log = TransactionLog(ml, batched_log=logs.coordinator, name="0")
    log.open()
    positions = list(await asyncio.gather(*(log.append(new_record(i)) for i in range(records))))
    await log.close()
    await ml.close()
    await factory.close()
    store.close()
    return positions


async def _delete(data: Path, positions: list[LogPosition]) -> None:
    store = SqliteMetadataStore(str(data / "metadata.db"))
    factory = FileManagedLedgerFactory(str(data / "ledgers"), store)
    ml = await factory.open(transaction_log_ledger_name(0))
    log = TransactionLog(ml)
    log.open()
    log.delete(positions, 100)
    await log.close()
    await ml.close()
    await factory.close()
    store.close()


async def test_scan_counts_needed_batched_entries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = await _write(tmp_path, True, 3)
    await _write(tmp_path, False, 2)
    [result] = await scan(tmp_path)
    assert (result.entries, result.batched_entries_needed) == (3, 1)
    await _delete(tmp_path, batch[:2])  # partly deleted: still needed
    assert (await scan(tmp_path))[0].batched_entries_needed == 1
    assert await asyncio.to_thread(main, [str(tmp_path)]) == 1
    await _delete(tmp_path, batch[2:])  # the whole batch deleted: never read again
    assert (await scan(tmp_path))[0].batched_entries_needed == 0
    assert await asyncio.to_thread(main, [str(tmp_path)]) == 0
    assert "safe to downgrade" in capsys.readouterr().out
