"""Recovery: with and without a snapshot, mid-flight snapshots, plain entries
written while recovering, damaged snapshots, file storage after a crash."""

from __future__ import annotations

import asyncio
from pathlib import Path

from quasar.storage import EARLIEST, Position
from quasar.transaction import TxnAction, TxnID
from quasar.transaction.buffer import TbState, TransactionBufferConfig
from quasar.transaction.buffer.records import TXN_COMMIT
from quasar.transaction.buffer.snapshot_format import segment_capacity, segment_key

from .helpers import TOPIC, TbEnv, drain, entry

T1 = TxnID(0, 1)
T2 = TxnID(0, 2)
T3 = TxnID(0, 3)
T4 = TxnID(0, 4)


async def test_no_snapshot_means_no_replay(env: TbEnv) -> None:
    await env.start()
    for i in range(3):
        await env.send(str(i).encode())
    tb = await env.restart()
    assert tb.state is TbState.NO_SNAPSHOT
    assert tb.max_read_position == env.ml.last_confirmed_entry
    assert await env.visible() == [b"0", b"1", b"2"]


async def test_open_txn_survives_restart(env: TbEnv) -> None:
    await env.ready()
    await env.send(b"p0")
    await env.send(b"t1", T1)
    await env.send(b"p1")
    tb = await env.restart()
    assert tb.state is TbState.READY
    assert tb.ongoing_count() == 1
    assert await env.visible() == [b"p0"]
    await env.commit(T1)
    assert await env.visible() == [b"p0", b"t1", b"p1"]


async def test_snapshot_taken_mid_flight(env: TbEnv) -> None:
    tb = await env.ready()
    await env.send(b"t1-a", T1)  # stays open across the snapshot
    await env.send(b"t2", T2)
    await env.abort(T2)  # aborted behind the open T1
    await env.send(b"t3", T3)
    await env.commit(T3)
    await tb.take_snapshot()
    await env.send(b"t1-b", T1)
    await env.send(b"t4", T4)
    await env.abort(T4)  # after the snapshot: found by the replay
    before = (tb.max_read_position, tb.ongoing_count(), tb.aborted_txn_count())
    tb = await env.restart()
    assert (tb.max_read_position, tb.ongoing_count(), tb.aborted_txn_count()) == before
    assert tb.is_aborted(T2) and tb.is_aborted(T4) and not tb.is_aborted(T3)
    await env.commit(T1)
    assert await env.visible() == [b"t1-a", b"t3", b"t1-b"]
    # Ends repeated by a coordinator after the restart still write nothing new.
    n = len(await env.markers())
    await env.commit(T3)
    await env.abort(T4)
    assert len(await env.markers()) == n




async def test_plain_entries_written_while_recovering_become_visible() -> None:
    env = TbEnv()
    try:
        await env.ready()
        await env.send(b"t1", T1)
        await env.commit(T1)
        await env.stop()
        env.store.hold_reads()
        tb = await env.start(recover=False)
        seen: list[Position] = []
        tb.add_max_read_position_listener(seen.append)
        recovering = asyncio.ensure_future(tb.recover())
        await drain()
        assert tb.state is TbState.INITIALIZING
        p = await tb.append_non_transactional(entry(b"during"))
        assert tb.max_read_position == EARLIEST
        assert await env.visible() == []
        env.store.release()
        await recovering
        assert tb.max_read_position == p
        assert seen == [p]  # told without another publish (#12382)
        assert await env.visible() == [b"t1", b"during"]
    finally:
        await env.close()


async def test_corrupt_snapshot_falls_back_to_replay(env: TbEnv) -> None:
    """An unreadable snapshot is replaced by a replay of the whole topic: the buffer
    serves, and an end of a transaction it never saw is answered as usual."""
    await env.ready()
    await env.stop()
    env.store.data[TOPIC] = b"garbage"
    tb = await env.start(recover=False)
    await tb.recover()
    assert tb.state is TbState.READY
    await tb.end_txn(T1, TxnAction.COMMIT, -1)


async def test_missing_segment_still_needed_falls_back_to_replay() -> None:
    env = TbEnv(config=TransactionBufferConfig(snapshot_segment_size_bytes=1024))
    try:
        tb = await env.ready()
        n = segment_capacity(1024, TOPIC) + 2
        for i in range(1, n):
            await env.send(b"x", TxnID(0, i))
            await env.abort(TxnID(0, i))
        await env.send(b"kept")
        await tb.take_snapshot()
        await env.stop()
        del env.store.data[segment_key(TOPIC, 0)]
        tb = await env.start()
        assert tb.state is TbState.READY
        # Every aborted transaction is still known as aborted after the replay.
        assert await env.visible() == [b"kept"]
    finally:
        await env.close()


async def test_garbage_named_by_index_is_deleted_after_restart() -> None:
    from quasar.transaction.buffer.snapshot_format import (
        decode_index,
        encode_index,
    )

    env = TbEnv()
    try:
        await env.ready()
        await env.stop()
        index = decode_index(env.store.data[TOPIC])
        leftover = segment_key(TOPIC, 7)
        env.store.data[leftover] = b"orphan"
        env.store.data[TOPIC] = encode_index(
            type(index)(**{**index.__dict__, "garbage": [7], "next_segment_seq": 8})
        )
        tb = await env.start()
        await tb.take_snapshot()
        assert leftover not in env.store.data
    finally:
        await env.close()


async def test_recovery_on_file_storage_after_crash(tmp_path: Path) -> None:
    env = TbEnv("file", tmp_path)
    try:
        tb = await env.ready()
        await env.send(b"p0")
        await env.send(b"t1-a", T1)
        await env.send(b"t2", T2)
        await env.abort(T2)
        await tb.take_snapshot()  # mid-flight: T1 open
        await env.send(b"t3", T3)
        await env.commit(T3)
        await env.send(b"t1-b", T1)
        await env.send(b"p1")
        await env.send(b"t4", T4)
        await env.abort(T4)
        expected = (tb.max_read_position, tb.ongoing_count(), tb.aborted_txn_count())
        tb = await env.crash()
        assert tb.state is TbState.READY
        assert (tb.max_read_position, tb.ongoing_count(), tb.aborted_txn_count()) == expected
        assert await env.visible() == [b"p0"]
        await env.commit(T1)
        assert await env.visible() == [b"p0", b"t1-a", b"t3", b"t1-b", b"p1"]
        assert (await env.markers())[-1] == (TXN_COMMIT, T1)
        # A second crash with no new snapshot: the replay starts at the old one.
        tb = await env.crash()
        assert await env.visible() == [b"p0", b"t1-a", b"t3", b"t1-b", b"p1"]
        assert tb.ongoing_count() == 0
    finally:
        await env.close()
