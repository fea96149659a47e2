"""Snapshot triggers (count, time), segmented snapshots, aborted-set trimming."""

from __future__ import annotations

import pytest

from quasar.errors import ServiceNotReady
from quasar.transaction import TxnID
from quasar.transaction.buffer import TransactionBufferConfig
from quasar.transaction.buffer.snapshot_format import (
    decode_index,
    segment_capacity,
    segment_key,
)

from .helpers import TOPIC, TbEnv, drain, ledger_config


def txn(i: int) -> TxnID:
    return TxnID(0, i)


async def test_count_trigger() -> None:
    env = TbEnv(config=TransactionBufferConfig(snapshot_max_transaction_count=4))
    try:
        await env.ready()
        base = len(env.store.writes)
        # Each transaction is one change: its data holds the max read position where
        # it was, its commit marker moves it.
        for i in range(1, 4):
            await env.send(b"x", txn(i))
            await env.commit(txn(i))
            await drain()
        assert len(env.store.writes) == base
        await env.send(b"x", txn(4))
        await env.commit(txn(4))
        await drain()
        assert len(env.store.writes) == base + 1
        index = decode_index(env.store.data[TOPIC])
        assert index.max_read_position <= env.tb.max_read_position
    finally:
        await env.close()


async def test_time_trigger_only_when_changed() -> None:
    env = TbEnv(config=TransactionBufferConfig(snapshot_min_time_in_millis=1000))
    try:
        await env.ready()
        base = len(env.store.writes)
        await env.sched.advance(5000)
        assert len(env.store.writes) == base  # nothing changed
        await env.send(b"a", txn(1))
        await env.abort(txn(1))
        await env.sched.advance(999)
        assert len(env.store.writes) == base
        await env.sched.advance(1)
        assert len(env.store.writes) == base + 1
        index = decode_index(env.store.data[TOPIC])
        assert [t for t, _ in index.aborted] == [txn(1)]
        assert index.max_read_position == env.tb.max_read_position
        assert env.tb.stats()["lastSnapshotTimestamps"] == env.clock.wall_ms()
    finally:
        await env.close()


async def test_snapshot_failure_is_retried_later() -> None:
    env = TbEnv(config=TransactionBufferConfig(snapshot_min_time_in_millis=1000))
    try:
        await env.ready()
        await env.send(b"a", txn(1))
        await env.abort(txn(1))
        env.store.fail_writes(1)
        with pytest.raises(Exception, match="injected"):
            await env.tb.take_snapshot()
        await env.tb.take_snapshot()
        assert [t for t, _ in decode_index(env.store.data[TOPIC]).aborted] == [txn(1)]
    finally:
        await env.close()


async def test_take_snapshot_needs_ready(env: TbEnv) -> None:
    await env.start()
    with pytest.raises(ServiceNotReady):
        await env.tb.take_snapshot()


async def test_segmented_snapshot_round_trip() -> None:
    config = TransactionBufferConfig(snapshot_segment_size_bytes=1024)
    cap = segment_capacity(1024, TOPIC)
    n = 2 * cap + 5
    env = TbEnv(config=config)
    try:
        await env.ready()
        for i in range(1, n + 1):
            await env.send(b"x", txn(i))
            await env.abort(txn(i))
        await env.tb.take_snapshot()
        index = decode_index(env.store.data[TOPIC])
        assert [s.seq for s in index.segments] == [0, 1]
        assert len(index.aborted) == 5
        assert all(len(v) <= 1024 for v in env.store.data.values())
        assert env.tb.stats(segment_stats=True)["segmentsStats"] == {
            "currentSegmentCapacity": cap,
            "unsealedAbortTxnIDSize": 5,
            "segmentsSize": 2,
            "lastTookSnapshotSegmentTimestamp": env.clock.wall_ms(),
        }
        writes = len(env.store.writes)
        # Another snapshot rewrites only the index.
        await env.send(b"y", txn(n + 1))
        await env.abort(txn(n + 1))
        await env.tb.take_snapshot()
        assert env.store.writes[writes:] == [TOPIC]
        tb = await env.restart()
        assert tb.aborted_txn_count() == n + 1
        assert all(tb.is_aborted(txn(i)) for i in range(1, n + 2))
        assert await env.visible() == []
    finally:
        await env.close()


async def test_trim_on_ledger_deletion_drops_ids_and_segments() -> None:
    config = TransactionBufferConfig(snapshot_segment_size_bytes=1024)
    cap = segment_capacity(1024, TOPIC)
    env = TbEnv(config=config, ledger=ledger_config(max_entries_per_ledger=2))
    try:
        tb = await env.ready()
        n = cap + 3
        for i in range(1, n + 1):  # data + marker: one ledger per transaction
            await env.send(b"x", txn(i))
            await env.abort(txn(i))
        await tb.take_snapshot()
        assert decode_index(env.store.data[TOPIC]).segments
        await env.send(b"tail")  # rolls over: every txn ledger is now complete
        deleted = await env.ml.trim_consumed_ledgers()
        assert deleted
        assert tb.aborted_txn_count() == 0
        assert await env.visible() == [b"tail"]
        await tb.take_snapshot()  # drops the segment from the index...
        await tb.take_snapshot()  # ...and deletes it once that index is durable
        assert segment_key(TOPIC, 0) in env.store.deletes
        assert segment_key(TOPIC, 0) not in env.store.data
        index = decode_index(env.store.data[TOPIC])
        assert index.segments == [] and index.aborted == []
        tb = await env.restart()
        assert tb.aborted_txn_count() == 0
    finally:
        await env.close()


async def test_partial_trim_keeps_recent_ids() -> None:
    env = TbEnv(ledger=ledger_config(max_entries_per_ledger=4))
    try:
        tb = await env.ready()
        for i in range(1, 7):
            await env.send(b"x", txn(i))
            await env.abort(txn(i))
        await env.ml.trim_consumed_ledgers()
        kept = [i for i in range(1, 7) if tb.is_aborted(txn(i))]
        assert kept and kept == list(range(kept[0], 7))
        assert await env.visible() == []
        await tb.take_snapshot()
        tb = await env.restart()
        assert [i for i in range(1, 7) if tb.is_aborted(txn(i))] == kept
    finally:
        await env.close()


async def test_delete_snapshot_removes_everything() -> None:
    env = TbEnv(config=TransactionBufferConfig(snapshot_segment_size_bytes=1024))
    try:
        tb = await env.ready()
        for i in range(1, segment_capacity(1024, TOPIC) + 2):
            await env.send(b"x", txn(i))
            await env.abort(txn(i))
        await tb.take_snapshot()
        assert len(env.store.data) == 2
        await tb.delete_snapshot()
        assert env.store.data == {}
    finally:
        await env.close()
