"""The max read position: held behind the oldest open transaction, advanced by plain
publishes when none is open, waited for without spinning."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from quasar.errors import PersistenceError, ServiceNotReady
from quasar.storage import EARLIEST, Position
from quasar.transaction import TxnID
from quasar.transaction.buffer import TbState

from .helpers import TbEnv, drain, entry

T1 = TxnID(0, 1)
T2 = TxnID(0, 2)
T3 = TxnID(1, 7)


async def test_no_snapshot_plain_publishes_move_it(env: TbEnv) -> None:
    tb = await env.start()
    assert tb.state is TbState.NO_SNAPSHOT
    p = await env.send(b"a")
    assert tb.max_read_position == p
    assert await env.visible() == [b"a"]
    assert env.store.writes == []  # no transactional producer yet: no snapshot


async def test_open_txn_holds_later_plain_messages(env: TbEnv) -> None:
    tb = await env.ready()
    p0 = await env.send(b"plain-0")
    t1a = await env.send(b"t1-a", T1)
    assert tb.max_read_position == p0  # just before T1's first entry
    await env.send(b"plain-1")
    await env.send(b"t1-b", T1)
    assert tb.max_read_position == p0
    assert await env.visible() == [b"plain-0"]
    await env.commit(T1)
    assert await env.visible() == [b"plain-0", b"t1-a", b"plain-1", b"t1-b"]
    assert tb.max_read_position > t1a
    assert tb.max_read_position == env.ml.last_confirmed_entry  # the marker


async def test_interleaved_txns_release_in_write_order(env: TbEnv) -> None:
    tb = await env.ready()
    await env.send(b"t1-0", T1)
    await env.send(b"t2-0", T2)
    await env.send(b"plain", None)
    await env.send(b"t3-0", T3)
    await env.send(b"t1-1", T1)
    # T2 ends first but T1 is older: nothing moves.
    await env.commit(T2)
    assert await env.visible() == []
    # T1 ends: everything up to T3's first entry becomes readable.
    await env.commit(T1)
    assert await env.visible() == [b"t1-0", b"t2-0", b"plain"]
    await env.abort(T3)
    assert await env.visible() == [b"t1-0", b"t2-0", b"plain", b"t1-1"]
    assert tb.ongoing_count() == 0
    assert tb.max_read_position == env.ml.last_confirmed_entry


async def test_plain_after_all_ended_moves_it(env: TbEnv) -> None:
    tb = await env.ready()
    await env.send(b"t1", T1)
    await env.commit(T1)
    p = await env.send(b"plain")
    assert tb.max_read_position == p


async def test_listener_and_waiter(env: TbEnv) -> None:
    tb = await env.ready()
    seen: list[Position] = []
    remove = tb.add_max_read_position_listener(seen.append)
    p0 = await env.send(b"a")
    assert seen == [p0]
    await env.send(b"t1", T1)
    await env.send(b"b")
    assert seen == [p0]  # held: no notification
    waiter = asyncio.ensure_future(tb.wait_for_max_read_position(p0))
    await drain()
    assert not waiter.done()  # parked, not spinning
    await env.commit(T1)
    assert seen[-1] == tb.max_read_position
    assert await waiter == tb.max_read_position
    remove()
    await env.send(b"c")
    assert seen[-1] != tb.max_read_position
    # Already beyond: returns at once.
    assert await tb.wait_for_max_read_position(p0) == tb.max_read_position


async def test_plain_entries_with_nothing_open_each_move_notify_and_count(
    env: TbEnv,
) -> None:
    # With no transaction open, each plain entry moves the max read position to
    # itself, tells the listeners once, and counts as a snapshot change in READY only
    # (Pulsar's changeMaxReadPositionCount); the same holds again once the open
    # transaction has ended.
    tb = await env.start()
    assert tb.state is TbState.NO_SNAPSHOT
    seen: list[Position] = []
    tb.add_max_read_position_listener(seen.append)
    a = await env.send(b"a")
    assert (seen, tb.max_read_position, tb._snapshots.changes) == ([a], a, 0)
    await tb.check_if_recovered(True)  # writes the first snapshot: READY
    assert tb.state is TbState.READY
    before = tb._snapshots.changes
    b = await env.send(b"b")
    c = await env.send(b"c")
    assert (seen[-2:], tb.max_read_position) == ([b, c], c)
    assert tb._snapshots.changes == before + 2
    await env.send(b"t1", T1)
    held = tb.max_read_position
    await env.send(b"d")
    assert tb.max_read_position == held and seen[-1] == c
    await env.commit(T1)
    e = await env.send(b"e")
    assert (seen[-1], tb.max_read_position) == (e, e)
    assert await env.visible() == [b"a", b"b", b"c", b"t1", b"d", b"e"]


async def test_waiter_fails_on_close(env: TbEnv) -> None:
    tb = await env.ready()
    waiter = asyncio.ensure_future(tb.wait_for_max_read_position(tb.max_read_position))
    await drain()
    await tb.close()
    with pytest.raises(ServiceNotReady):
        await waiter


async def test_first_txn_append_writes_the_snapshot_first(env: TbEnv) -> None:
    tb = await env.start()
    assert tb.state is TbState.NO_SNAPSHOT
    p0 = await env.send(b"plain")
    # No check_if_recovered: the append itself waits for the first snapshot.
    pos = await tb.append_transactional(T1, entry(b"t1", T1))
    assert tb.state is TbState.READY
    assert env.store.writes == [env.tb.topic]
    assert pos > p0
    assert tb.max_read_position == p0


async def test_queued_appends_keep_their_order(env: TbEnv) -> None:
    tb = await env.start()
    env.store.hold()
    futs = [tb.append_transactional(T1, entry(str(i).encode(), T1)) for i in range(5)]
    await drain()
    assert not any(f.done() for f in futs)
    env.store.release()
    positions = [await f for f in futs]
    assert positions == sorted(positions)


async def test_first_snapshot_failure_fails_queued_appends(env: TbEnv) -> None:
    tb = await env.start()
    env.store.fail_writes(1)
    fut = tb.append_transactional(T1, entry(b"x", T1))
    with pytest.raises(Exception, match="injected"):
        await fut
    assert tb.state is TbState.NO_SNAPSHOT
    assert await tb.append_transactional(T1, entry(b"y", T1))  # retried: works
    assert tb.state is TbState.READY


async def test_earliest_until_recovered(env: TbEnv) -> None:
    await env.ready()
    await env.send(b"a")
    await env.stop()
    tb = await env.start(recover=False)
    assert tb.max_read_position == EARLIEST
    await tb.recover()
    assert tb.max_read_position == env.ml.last_confirmed_entry


@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_plain_entry_completing_with_an_earlier_txn_entry_stays_held(
    kind: str, tmp_path: Path
) -> None:
    # A transactional publish and a plain one from two producers, appended back to back:
    # their storage completions arrive in one group, and the plain entry's completion
    # must not make the open transaction's entry readable.
    env = TbEnv(kind, tmp_path if kind == "file" else None)
    try:
        tb = await env.ready()
        p0 = await env.send(b"plain-0")
        done: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        t1 = tb.append_transactional(T1, entry(b"t1-a", T1))
        tb.append_non_transactional_cb(
            entry(b"plain-1"),
            lambda pos, exc: done.set_exception(exc) if exc else done.set_result(pos),
        )
        t1_position, p1 = await t1, await done
        await drain()
        assert t1_position < p1
        assert tb.max_read_position == p0, "the open transaction's entry became readable"
        assert await env.visible() == [b"plain-0"]
        await env.commit(T1)
        assert await env.visible() == [b"plain-0", b"t1-a", b"plain-1"]
    finally:
        await env.close()


async def test_a_failed_storage_write_fails_the_append_and_the_end_cleanly(
    env: TbEnv,
) -> None:
    # Appends are applied from storage callbacks; a failed write must fail the caller's
    # future, leave no pending append behind and move nothing, and a ledger that has
    # failed answers later appends (and markers) inside the call.
    tb = await env.ready()
    p0 = await env.send(b"plain-0")
    storage = env.factory._memory  # type: ignore[attr-defined]
    real_append = storage.append

    def failing_append(ledger_id, entry_id, data, owner, done):  # type: ignore[no-untyped-def]
        storage._ledgers[ledger_id].append(data)
        storage.loop.call_soon(done, PersistenceError("injected write failure"))

    storage.append = failing_append
    try:
        with pytest.raises(PersistenceError):
            await tb.append_transactional(T1, entry(b"t1-a", T1))
        assert tb._pending_appends == {}
        assert tb.max_read_position == p0
        # The ledger has failed: the next append is answered at once, with its error.
        with pytest.raises(PersistenceError):
            await tb.append_transactional(T2, entry(b"t2-a", T2))
        assert tb._pending_appends == {}
        with pytest.raises(PersistenceError):
            await env.commit(T1)
        assert tb._ending == {}
        assert tb.max_read_position == p0
    finally:
        storage.append = real_append
