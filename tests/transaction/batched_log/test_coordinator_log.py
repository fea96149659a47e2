"""The coordinator log with PIP-160 batching: one entry for many records, deletion by
batch index, trimming, and restarts with batching switched off and on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from prometheus_client.registry import CollectorRegistry

from quasar.errors import PersistenceError, TransactionCoordinatorNotFound
from quasar.protocol.ack_set import unacked_indexes
from quasar.storage.api import ManagedLedger
from quasar.transaction import TransactionCoordinator
from quasar.transaction.batched_log import (
    BatchedLogs,
    BatchedWriteConfig,
    is_batched_entry,
)
from quasar.transaction.txn_status import TxnAction, TxnStatus

from ..helpers import FailingLedger, TcEnv, ledger_config

T = TypeVar("T")
COMMIT = TxnAction.COMMIT


def _logs(enabled: bool, **kw: Any) -> BatchedLogs:
    kw.setdefault("max_delay_in_millis", 1)
    settings = BatchedWriteConfig(enabled=enabled, **kw)
    return BatchedLogs(settings, BatchedWriteConfig(), cluster="test", registry=CollectorRegistry())


async def _run(env: TcEnv, *aws: Awaitable[T]) -> list[T]:
    """Run requests concurrently, moving virtual time 1 ms at a time until all are done."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    await asyncio.sleep(0)
    while not all(t.done() for t in tasks):
        await env.sched.advance(1)
    return [t.result() for t in tasks]


async def _entries(ml: ManagedLedger) -> list[bytes]:
    if ml.number_of_entries == 0:
        return []
    return [e.data for e in await ml.read_entries(ml.first_position, 1_000_000)]


@pytest.fixture
async def benv() -> Any:
    e = TcEnv(batched_log=_logs(True).coordinator)
    yield e
    await e.close()


async def test_concurrent_records_share_one_entry(benv: TcEnv) -> None:
    tc = await benv.start()
    txns = await _run(benv, *(tc.new_txn(60_000) for _ in range(5)))
    assert [t.least_bits for t in txns] == [0, 1, 2, 3, 4]
    data = await _entries(tc.ledger)
    assert len(data) == 1 and is_batched_entry(data[0])
    assert tc.transaction_log.writer.records_written == 5
    await _run(benv, *(tc.add_partitions(t, [f"p{t.least_bits}"]) for t in txns))
    assert tc.ledger.number_of_entries == 2
    assert tc.get_txn_meta(txns[3]).partitions() == ["p3"]


async def test_records_are_deleted_by_batch_index_and_the_entry_goes_last(
    benv: TcEnv,
) -> None:
    tc = await benv.start()
    txns = await _run(benv, *(tc.new_txn(60_000) for _ in range(3)))
    first = tc.ledger.first_position
    cursor = tc.transaction_log.cursor
    await _run(benv, tc.end_txn(txns[0], COMMIT), tc.end_txn(txns[2], COMMIT))
    # The NEW records of the ended transactions are deleted one by one ...
    acks = cursor.batch_ack_set(first)
    assert acks is not None and unacked_indexes(acks, 3) == [1]
    assert not cursor.is_acknowledged(first)
    # ... and the entry is acknowledged with the last of them.
    await _run(benv, tc.end_txn(txns[1], COMMIT))
    assert cursor.is_acknowledged(first)
    assert cursor.backlog() == 0


async def test_ended_transactions_let_ledgers_be_trimmed() -> None:
    env = TcEnv(
        batched_log=_logs(True).coordinator, ledger=ledger_config(max_entries_per_ledger=2)
    )
    try:
        tc = await env.start()
        for _ in range(4):
            txns = await _run(env, *(tc.new_txn(60_000) for _ in range(4)))
            await _run(env, *(tc.end_txn(t, COMMIT) for t in txns))
        await tc.transaction_log.wait_for_trim()
        await env.settle()
        await tc.transaction_log.wait_for_trim()
        assert tc.transaction_log.cursor.backlog() == 0
        # 12 entries (NEW, COMMITTING, COMMITTED batches) in 2-entry ledgers: every
        # ledger before the current one is gone.
        assert tc.transaction_log.writer.entries_written == 12
        assert len(tc.ledger.ledgers()) <= 2
    finally:
        await env.close()


async def test_replay_skips_deleted_records_after_a_restart(benv: TcEnv) -> None:
    tc = await benv.start()
    txns = await _run(benv, *(tc.new_txn(60_000) for _ in range(3)))
    await _run(benv, tc.end_txn(txns[1], COMMIT))
    tc = await benv.restart()
    assert [m.txn_id for m in tc.transactions()] == [txns[0], txns[2]]
    assert tc.next_sequence() == 3


@pytest.mark.parametrize("first_on", [True, False])
async def test_restart_with_batching_switched(tmp_path: Path, first_on: bool) -> None:
    """A log written with batching on is read with it off, and the reverse; the log
    then holds both layouts and replays as one."""
    env = TcEnv("file", tmp_path, batched_log=_logs(first_on).coordinator)
    try:
        tc = await env.start()
        a = await _run(env, *(tc.new_txn(60_000) for _ in range(3)))
        await _run(env, *(tc.add_partitions(t, ["pa"]) for t in a))
        await _run(env, tc.end_txn(a[0], COMMIT))
        env.batched_log = _logs(not first_on).coordinator
        tc = await env.restart()
        assert tc.transaction_log.writer.enabled is (not first_on)
        assert [m.txn_id for m in tc.transactions()] == a[1:]
        assert tc.get_txn_meta(a[1]).partitions() == ["pa"]
        b = await _run(env, *(tc.new_txn(60_000) for _ in range(3)))
        await _run(env, tc.add_partitions(b[0], ["pb"]), tc.end_txn(a[1], COMMIT))
        kinds = {is_batched_entry(d) for d in await _entries(tc.ledger)}
        assert kinds == {True, False}
        tc = await env.crash()  # kill -9: the log is all there is
        live = {m.txn_id: m for m in tc.transactions()}
        assert set(live) == {a[2], *b}
        assert live[b[0]].partitions() == ["pb"]
        assert live[a[2]].status is TxnStatus.OPEN
        assert tc.next_sequence() == 6
        await _run(env, *(tc.end_txn(t, COMMIT) for t in live))
        assert tc.active_transactions() == 0
    finally:
        await env.close()


async def test_a_failed_batch_fails_every_request_in_it(benv: TcEnv) -> None:
    ml = FailingLedger(await benv.open_ledger())
    fenced: list[TransactionCoordinator] = []
    tc = TransactionCoordinator(
        0, ml, benv.clock, benv.config, benv.client,  # type: ignore[arg-type]
        scheduler=benv.sched, on_fenced=fenced.append, batched_log=benv.batched_log,
    )
    await tc.start()
    ml.failing = True
    tasks = [asyncio.ensure_future(tc.new_txn(60_000)) for _ in range(4)]
    await benv.sched.advance(1)
    for t in tasks:
        with pytest.raises(TransactionCoordinatorNotFound) as info:
            t.result()
        assert isinstance(info.value.__cause__, PersistenceError)
    assert fenced == [tc]
    await tc.close()
    await ml.close()


async def test_runtime_switch_reaches_live_coordinators(benv: TcEnv) -> None:
    logs = _logs(False)
    benv.batched_log = logs.coordinator
    tc = await benv.start()
    assert logs.coordinator.status() == [("0", False)]
    await _run(benv, *(tc.new_txn(60_000) for _ in range(3)))
    assert tc.ledger.number_of_entries == 3
    logs.coordinator.set_enabled(True)
    assert logs.coordinator.status() == [("0", True)]
    await _run(benv, *(tc.new_txn(60_000) for _ in range(3)))
    assert tc.ledger.number_of_entries == 4
    await benv.stop()
    assert logs.coordinator.status() == []
