"""Pending-ack logs with PIP-160 batching: shared entries, release by batch index,
replay that skips released records, restarts with batching switched, failures."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from prometheus_client.registry import CollectorRegistry

from quasar.errors import ServiceNotReady
from quasar.protocol.ack_set import unacked_indexes
from quasar.storage.api import ManagedLedger
from quasar.transaction.batched_log import (
    BatchedLogControl,
    BatchedLogs,
    BatchedWriteConfig,
    is_batched_entry,
)
from quasar.transaction.pending_ack import PendingAckHandle
from quasar.transaction.pending_ack.log import pending_ack_writer

from ..helpers import FailingLedger
from ..pending_ack.helpers import SUB, T1, T2, T3, TOPIC, PaEnv, individual

T = TypeVar("T")


def _control(enabled: bool) -> BatchedLogControl:
    settings = BatchedWriteConfig(enabled=enabled, max_delay_in_millis=1)
    return BatchedLogs(BatchedWriteConfig(), settings, cluster="test",
                       registry=CollectorRegistry()).pending_ack


class BatchedPaEnv(PaEnv):
    def __init__(self, *args: Any, control: BatchedLogControl, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.control = control
        self.wrap: Any = None

    def new_handle(self) -> PendingAckHandle:
        ledger = self.log_ledger if self.wrap is None else self.wrap(self.log_ledger)
        self._handle = PendingAckHandle(
            self.cursor, self.log_ledger, TOPIC, SUB, self.clock, self.sched, self.config,
            on_low_watermark_abort=lambda t, r: self.lwm_aborts.append((t, r)),
            on_fenced=self.fenced.append,
            writer=pending_ack_writer(self.control, ledger, TOPIC, SUB, self.sched, self.clock),
        )
        return self._handle


async def _run(env: PaEnv, *aws: Awaitable[T]) -> list[T]:
    tasks = [asyncio.ensure_future(a) for a in aws]
    await asyncio.sleep(0)
    while not all(t.done() for t in tasks):
        await env.sched.advance(1)
    return [t.result() for t in tasks]


async def _kinds(ml: ManagedLedger) -> list[bool]:
    entries = await ml.read_entries(ml.first_position, 1_000_000)
    return [is_batched_entry(e.data) for e in entries]


@pytest.fixture
async def pa() -> Any:
    env = BatchedPaEnv(control=_control(True))
    await env.start()
    yield env
    await env.close()


async def test_acks_share_an_entry_and_are_released_by_batch_index(pa: BatchedPaEnv) -> None:
    h = pa.handle
    await _run(pa, h.individual_ack(T1, individual(pa, 0)),
               h.individual_ack(T2, individual(pa, 1)),
               h.individual_ack(T3, individual(pa, 2)))
    assert await _kinds(pa.log_ledger) == [True]
    first = pa.log_ledger.first_position
    log_cursor = h.log.cursor
    await _run(pa, h.abort(T1, -1))
    # T1's ACK (index 0) is released; T2's (index 1) is the oldest needed record.
    assert log_cursor.mark_delete_position < first
    acks = log_cursor.batch_ack_set(first)
    assert acks is not None and unacked_indexes(acks, 3) == [1, 2]
    restarted = await pa.restart()
    assert restarted.pending_positions() == [pa.p(1), pa.p(2)]
    await _run(pa, restarted.commit(T3, -1))
    # Only a prefix of the log is released: T3's ACK waits behind T2's.
    assert unacked_indexes(restarted.log.cursor.batch_ack_set(first) or [], 3) == [1, 2]
    await _run(pa, restarted.commit(T2, -1))
    assert restarted.log.cursor.mark_delete_position == pa.log_ledger.last_confirmed_entry
    assert pa.cursor.is_acknowledged(pa.p(1)) and pa.cursor.is_acknowledged(pa.p(2))
    assert not pa.cursor.is_acknowledged(pa.p(0))


async def test_an_entry_stays_while_one_of_its_records_is_needed(pa: BatchedPaEnv) -> None:
    h = pa.handle
    await _run(pa, h.individual_ack(T1, individual(pa, 0)),
               h.individual_ack(T2, individual(pa, 1)))
    first = pa.log_ledger.first_position
    await _run(pa, h.commit(T2, -1))
    assert not h.log.cursor.is_acknowledged(first)  # T1's ACK is still needed there
    await _run(pa, h.commit(T1, -1))
    assert h.log.cursor.is_acknowledged(first)


@pytest.mark.parametrize("first_on", [True, False])
async def test_restart_with_batching_switched(tmp_path: Path, first_on: bool) -> None:
    env = BatchedPaEnv("file", tmp_path, control=_control(first_on))
    try:
        h = await env.start()
        await _run(env, h.individual_ack(T1, individual(env, 0)),
                   h.individual_ack(T2, individual(env, 1)),
                   h.individual_ack(T3, individual(env, 2)))
        env.control = _control(not first_on)
        h = await env.crash()
        assert h.pending_positions() == [env.p(0), env.p(1), env.p(2)]
        await _run(env, h.commit(T1, -1), h.abort(T2, -1))
        assert set(await _kinds(env.log_ledger)) == {True, False}
        h = await env.crash()
        assert h.pending_positions() == [env.p(2)]
        assert env.cursor.is_acknowledged(env.p(0))
        assert not env.cursor.is_acknowledged(env.p(1))
        await _run(env, h.commit(T3, -1))
        assert env.cursor.is_acknowledged(env.p(2))
    finally:
        await env.close()


async def test_a_failed_batch_fails_every_ack_in_it() -> None:
    env = BatchedPaEnv(control=_control(True))
    failing: list[FailingLedger] = []
    env.wrap = lambda ml: failing.append(FailingLedger(ml)) or failing[-1]
    try:
        h = await env.start()
        failing[0].failing = True
        tasks = [asyncio.ensure_future(h.individual_ack(t, individual(env, i)))
                 for i, t in enumerate((T1, T2, T3))]
        await asyncio.sleep(0)
        await env.sched.advance(1)
        for t in tasks:
            assert isinstance(t.exception(), ServiceNotReady)
        assert env.fenced == [h]
    finally:
        await env.close()


async def test_status_lists_open_logs(pa: BatchedPaEnv) -> None:
    assert pa.control.status() == [(f"{TOPIC}-{SUB}", True)]
    pa.control.set_enabled(False)
    assert pa.control.status() == [(f"{TOPIC}-{SUB}", False)]
    await pa.handle.close()
    assert pa.control.status() == []


async def test_positions_kept_are_bounded_by_live_transactions(pa: BatchedPaEnv) -> None:
    """One old open transaction does not make the store remember every later one."""
    from quasar.transaction import TxnID

    h = pa.handle
    await _run(pa, h.individual_ack(T1, individual(pa, 0)))
    for i in range(1, 15):
        txn = TxnID(1, i)
        await _run(pa, h.individual_ack(txn, individual(pa, i)))
        await _run(pa, h.commit(txn, -1))
    store = h._store  # noqa: SLF001 - the bound is internal
    assert list(store._first) == [T1]  # noqa: SLF001
    assert h.log.cursor.mark_delete_position < pa.log_ledger.first_position
