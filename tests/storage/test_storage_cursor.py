"""Cursor conformance: acks, ranges, batch ack sets, seeks, backlog, persistence."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from quasar.errors import ManagedLedgerClosed
from quasar.storage import (
    EARLIEST,
    LATEST,
    InitialPosition,
    ManagedCursor,
    ManagedCursorImpl,
    ManagedLedgerImpl,
    Position,
)

from .storage_env import StorageEnv


async def fill(ml: ManagedLedgerImpl, n: int) -> list[Position]:
    return list(
        await asyncio.gather(*(ml.add_entry(f"m{i}".encode()) for i in range(n)))
    )


async def test_latest_and_earliest_cursors(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=4)
    before = await fill(ml, 6)
    latest = ml.open_cursor("latest")
    earliest = ml.open_cursor("earliest", InitialPosition.EARLIEST)
    assert isinstance(latest, ManagedCursor)
    assert latest.durable and latest.name == "latest"
    assert latest.mark_delete_position == before[-1]
    assert not latest.has_more_entries()
    assert latest.backlog() == 0
    assert earliest.backlog() == 6
    assert earliest.read_position == before[0]
    assert [e.position for e in await earliest.read_entries(100)] == before
    after = await fill(ml, 3)
    assert latest.has_more_entries()
    assert [e.position for e in await latest.read_entries(2)] == after[:2]
    assert [e.position for e in await latest.read_entries(2)] == after[2:]
    assert await latest.read_entries(2) == []
    assert not latest.has_more_entries()
    assert latest.backlog() == 3
    assert ml.open_cursor("latest") is latest  # reopening by name returns it
    assert set(ml.cursors()) == {"latest", "earliest"}


async def test_in_order_acks_move_mark_delete_without_ranges(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=3)
    positions = await fill(ml, 8)
    c = ml.open_cursor("c", InitialPosition.EARLIEST)
    for i, p in enumerate(positions):
        c.delete([p])
        assert c.mark_delete_position == p
        assert c.individually_deleted_ranges() == []
        assert c.backlog() == 7 - i


async def test_out_of_order_acks_build_ranges_then_collapse(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=4)
    p = await fill(ml, 10)
    c = ml.open_cursor("c", InitialPosition.EARLIEST)
    start_md = c.mark_delete_position
    c.delete([p[2], p[3], p[5], p[4], p[8]])
    assert c.mark_delete_position == start_md
    # p[2..3] are in ledger 0; p[4..5] in ledger 1: ranges never cross a ledger.
    assert c.individually_deleted_ranges() == [(p[2], p[3]), (p[4], p[5]), (p[8], p[8])]
    assert c.backlog() == 5
    assert c.is_acknowledged(p[4]) and not c.is_acknowledged(p[6])
    c.delete([p[0]])
    assert c.mark_delete_position == p[0]
    c.delete([p[1]])  # now contiguous through p[5], across the ledger boundary
    assert c.mark_delete_position == p[5]
    assert c.individually_deleted_ranges() == [(p[8], p[8])]
    c.delete([p[6], p[7]])
    assert c.mark_delete_position == p[8]
    assert c.individually_deleted_ranges() == []
    assert c.backlog() == 1
    c.delete([p[3], p[0]])  # duplicates are ignored
    assert c.backlog() == 1


async def test_read_skips_deleted_entries(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=3)
    p = await fill(ml, 9)
    c = ml.open_cursor("c", InitialPosition.EARLIEST)
    c.delete([p[1], p[3], p[4], p[5], p[8]])
    got = [e.position for e in await c.read_entries(2)]
    assert got == [p[0], p[2]]
    got = [e.position for e in await c.read_entries(10)]
    assert got == [p[6], p[7]]
    assert await c.read_entries(10) == []
    assert c.read_position == ml.next_position(p[8])
    c.rewind()
    assert [e.position for e in await c.read_entries(10)] == [p[0], p[2], p[6], p[7]]


async def test_cumulative_ack(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=3)
    p = await fill(ml, 7)
    c = ml.open_cursor("c", InitialPosition.EARLIEST)
    c.delete([p[5]])
    c.mark_delete(p[3], {"txn": 7})
    assert c.mark_delete_position == p[3]
    assert c.properties == {"txn": 7}
    assert c.individually_deleted_ranges() == [(p[5], p[5])]
    c.mark_delete(p[4])  # joins the range
    assert c.mark_delete_position == p[5]
    assert c.individually_deleted_ranges() == []
    assert c.properties == {"txn": 7}  # None keeps the properties
    c.mark_delete(p[1])  # older: ignored
    assert c.mark_delete_position == p[5]
    # Positions with no confirmed entry behind them (they come from clients) are
    # ignored rather than raised on.
    c.mark_delete(Position(p[-1].ledger_id, p[-1].entry_id + 1))
    c.delete([Position(p[-1].ledger_id + 5, 0), Position(p[0].ledger_id, 999)])
    c.set_batch_ack(Position(p[-1].ledger_id + 5, 0), [1])
    assert c.mark_delete_position == p[5]
    assert c.individually_deleted_ranges() == []
    assert c.read_position == p[6]  # mark-delete pushed the read position forward


async def test_batch_ack_sets(env: StorageEnv) -> None:
    ml = await env.open()
    p = await fill(ml, 3)
    c = ml.open_cursor("c", InitialPosition.EARLIEST)
    assert c.batch_ack_set(p[1]) is None
    c.set_batch_ack(p[1], [0b1010])
    assert c.batch_ack_set(p[1]) == [0b1010]
    assert not c.is_acknowledged(p[1])
    c.set_batch_ack(p[1], [0])  # every index acked: the entry is deleted
    assert c.is_acknowledged(p[1]) and c.batch_ack_set(p[1]) is None
    c.set_batch_ack(p[2], [1, 0])
    c.mark_delete(p[2])
    assert c.batch_ack_set(p[2]) is None  # acknowledged entries drop their ack sets
    c.set_batch_ack(p[2], [1])  # ignored: already acknowledged
    assert c.batch_ack_set(p[2]) is None


async def test_seek_rewind_reset(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=3)
    p = await fill(ml, 8)
    c = ml.open_cursor("c", InitialPosition.EARLIEST)
    c.seek(p[5])
    assert [e.position for e in await c.read_entries(1)] == [p[5]]
    assert c.mark_delete_position < p[0]  # seek does not acknowledge
    c.seek(EARLIEST)
    assert c.read_position == p[0]
    c.seek(LATEST)
    assert await c.read_entries(10) == []
    c.rewind()
    assert c.read_position == p[0]
    c.delete([p[6]])
    c.reset(p[4])
    assert c.mark_delete_position == p[3]
    assert c.individually_deleted_ranges() == []  # acks at/after p[4] forgotten
    assert [e.position for e in await c.read_entries(10)] == p[4:]
    c.reset(p[1])  # backwards: everything from p[1] is unacknowledged again
    assert c.mark_delete_position == p[0]
    assert c.backlog() == 7
    c.reset(EARLIEST)
    assert c.backlog() == 8
    c.reset(LATEST)
    assert c.backlog() == 0 and c.mark_delete_position == p[-1]


async def test_non_durable_cursor(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=3)
    p = await fill(ml, 5)
    r = ml.new_non_durable_cursor(p[2], "reader")
    assert not r.durable and r.name == "reader"
    assert [e.position for e in await r.read_entries(10)] == p[2:]
    assert "reader" not in ml.cursors()
    e = ml.new_non_durable_cursor(EARLIEST)
    assert [x.position for x in await e.read_entries(1)] == [p[0]]
    lt = ml.new_non_durable_cursor(LATEST)
    assert await lt.read_entries(1) == []
    q = await ml.add_entry(b"new")
    assert [x.position for x in await lt.read_entries(1)] == [q]
    lt.mark_delete(q)
    await lt.flush()  # a no-op, never persisted
    assert env.meta.children(f"/managed-ledgers/{_quoted(ml.name)}") == []


def _quoted(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


async def test_delete_cursor(env: StorageEnv) -> None:
    ml = await env.open()
    c = ml.open_cursor("doomed")
    ml.delete_cursor("doomed")
    ml.delete_cursor("doomed")  # idempotent
    assert ml.cursors() == {}
    with pytest.raises(ManagedLedgerClosed):
        await c.read_entries(1)
    await env.reopen()
    ml = await env.open()
    assert ml.cursors() == {}


async def test_cursor_state_survives_reopen(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=3)
    p = await fill(ml, 9)
    c = ml.open_cursor("sub", InitialPosition.EARLIEST)
    c.mark_delete(p[1], {"k": 42})
    c.delete([p[4], p[5], p[7]])
    c.set_batch_ack(p[3], [0b110])
    await env.reopen()  # clean close persists pending state
    ml = await env.open(max_entries_per_ledger=3)
    c = ml.cursors()["sub"]
    assert c.mark_delete_position == p[1]
    assert c.properties == {"k": 42}
    assert c.individually_deleted_ranges() == [(p[4], p[5]), (p[7], p[7])]
    assert c.batch_ack_set(p[3]) == [0b110]
    assert c.backlog() == 4
    assert [e.position for e in await c.read_entries(10)] == [p[2], p[3], p[6], p[8]]


async def test_flush_is_durable_across_crash(file_env: StorageEnv) -> None:
    ml = await file_env.open(cursor_persist_interval_ms=3_600_000)
    p = await fill(ml, 6)
    c = ml.open_cursor("sub", InitialPosition.EARLIEST)
    c.mark_delete(p[2])
    await c.flush()
    c.mark_delete(p[4])  # not flushed; the timer is an hour away
    await file_env.crash()
    ml = await file_env.open()
    c = ml.cursors()["sub"]
    # Redelivers what was acked after the last persist, never goes back further.
    assert c.mark_delete_position == p[2]


async def test_concurrent_flushes_share_one_write(
    file_env: StorageEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flushes requested in one loop iteration cost one metadata write, and every
    caller's change is in it (commits of many transactions on one subscription)."""
    ml = await file_env.open(cursor_persist_interval_ms=3_600_000)
    p = await fill(ml, 6)
    c = ml.open_cursor("sub", InitialPosition.EARLIEST)
    await c.flush()
    writes: list[str] = []
    put = ml.put_cursor_in_background

    def counting_put(name: str, data: bytes, version: int) -> concurrent.futures.Future[int]:
        writes.append(name)
        return put(name, data, version)

    monkeypatch.setattr(ml, "put_cursor_in_background", counting_put)

    async def ack_and_flush(i: int) -> None:
        c.delete([p[i]])
        await c.flush()

    await asyncio.gather(*(ack_and_flush(i) for i in (0, 2, 4)))
    assert writes == ["sub"]
    await c.flush()  # nothing changed since: no write
    assert writes == ["sub"]
    await file_env.crash()
    ml = await file_env.open()
    c = ml.cursors()["sub"]
    assert c.mark_delete_position == p[0]
    assert c.individually_deleted_ranges() == [(p[2], p[2]), (p[4], p[4])]


async def test_flush_failure_reaches_every_waiter(
    file_env: StorageEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    ml = await file_env.open(cursor_persist_interval_ms=3_600_000)
    p = await fill(ml, 3)
    c = ml.open_cursor("sub", InitialPosition.EARLIEST)
    await c.flush()

    def failing_put(name: str, data: bytes, version: int) -> concurrent.futures.Future[int]:
        failed: concurrent.futures.Future[int] = concurrent.futures.Future()
        failed.set_exception(OSError("metadata store down"))
        return failed

    monkeypatch.setattr(ml, "put_cursor_in_background", failing_put)
    c.delete([p[0]])
    c.delete([p[1]])
    results = await asyncio.gather(c.flush(), c.flush(), return_exceptions=True)
    assert [type(r) for r in results] == [OSError, OSError]
    monkeypatch.undo()
    await c.flush()  # still dirty after the failure: written now
    await file_env.crash()
    ml = await file_env.open()
    assert ml.cursors()["sub"].mark_delete_position == p[1]


def _gated_puts(
    ml: ManagedLedgerImpl, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[concurrent.futures.Future[int]], threading.Event]:
    """Make the cursor's background writes wait for ``gate`` on the writer thread."""
    gate = threading.Event()
    started: list[concurrent.futures.Future[int]] = []
    put = ml.put_cursor_in_background

    def gated_put(name: str, data: bytes, version: int) -> concurrent.futures.Future[int]:
        assert gate.wait(30), "test gate never opened"
        return put(name, data, version)

    def submit(name: str, data: bytes, version: int) -> concurrent.futures.Future[int]:
        written = _GATE_POOL.submit(lambda: gated_put(name, data, version).result())
        started.append(written)
        return written

    monkeypatch.setattr(ml, "put_cursor_in_background", submit)
    return started, gate


_GATE_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1)


async def _flush_held_in_flight(
    env: StorageEnv, monkeypatch: pytest.MonkeyPatch
) -> tuple[
    ManagedCursorImpl, list[Position], list[concurrent.futures.Future[int]],
    threading.Event, asyncio.Future[None],
]:
    """A cursor with p[0] acked and its flush's write taken and held on the gate."""
    ml = await env.open(cursor_persist_interval_ms=3_600_000)
    p = await fill(ml, 6)
    c = ml.open_cursor("sub", InitialPosition.EARLIEST)
    writes, gate = _gated_puts(ml, monkeypatch)
    c.delete([p[0]])
    flushed = asyncio.ensure_future(c.flush())
    while not writes:  # the write took its snapshot and is held
        await asyncio.sleep(0)
    return c, p, writes, gate, flushed


async def test_flush_asked_during_a_write_gets_the_next_write(
    file_env: StorageEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change made after the write in flight took its snapshot is not durable when
    that write lands: its flush waits for the next write, which holds it."""
    c, p, writes, gate, first = await _flush_held_in_flight(file_env, monkeypatch)
    c.delete([p[2]])
    second = asyncio.ensure_future(c.flush())
    # The loop is free while the write is held: other work runs meanwhile.
    for _ in range(10):
        await asyncio.sleep(0)
    assert not first.done() and not second.done()
    assert len(writes) == 1
    gate.set()
    await asyncio.gather(first, second)
    assert len(writes) == 2
    await file_env.crash()
    ml = await file_env.open()
    c = ml.cursors()["sub"]
    assert c.mark_delete_position == p[0]
    assert c.individually_deleted_ranges() == [(p[2], p[2])]


async def test_persist_waits_for_the_write_in_flight(
    file_env: StorageEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() writes synchronously; a background write still in flight lands first,
    so the close's write carries the next version instead of failing on it."""
    c, p, _, gate, flushed = await _flush_held_in_flight(file_env, monkeypatch)
    c.delete([p[1]])
    threading.Timer(0.05, gate.set).start()
    c.close()  # blocks until the held write landed, then writes p[1]
    await flushed
    await file_env.crash()
    ml = await file_env.open()
    assert ml.cursors()["sub"].mark_delete_position == p[1]


async def test_throttled_persist_happens_on_the_loop(file_env: StorageEnv) -> None:
    ml = await file_env.open(cursor_persist_interval_ms=0)
    p = await fill(ml, 3)
    c = ml.open_cursor("sub", InitialPosition.EARLIEST)
    c.delete([p[0], p[2]])
    await asyncio.sleep(0)  # let the (zero-interval) persist timer run
    await file_env.crash()
    ml = await file_env.open()
    c = ml.cursors()["sub"]
    assert c.mark_delete_position == p[0]
    assert c.individually_deleted_ranges() == [(p[2], p[2])]


async def test_new_cursor_is_persisted_immediately(file_env: StorageEnv) -> None:
    ml = await file_env.open()
    await fill(ml, 2)
    ml.open_cursor("sub")
    await file_env.crash()
    ml = await file_env.open()
    assert list(ml.cursors()) == ["sub"]


async def test_unacked_ranges_persisted_are_bounded(env: StorageEnv) -> None:
    ml = await env.open(max_unacked_ranges_to_persist=3)
    p = await fill(ml, 12)
    c = ml.open_cursor("sub", InitialPosition.EARLIEST)
    c.delete([p[1], p[3], p[5], p[7], p[9]])  # five ranges
    assert len(c.individually_deleted_ranges()) == 5  # exact in memory
    await env.reopen()
    ml = await env.open()
    c = ml.cursors()["sub"]
    # Only the three nearest mark-delete were persisted: the rest is redelivered.
    assert c.individually_deleted_ranges() == [(p[1], p[1]), (p[3], p[3]), (p[5], p[5])]
    assert c.backlog() == 9


async def test_batch_ack_sets_persisted_are_bounded_by_count_and_bytes(
    env: StorageEnv,
) -> None:
    # Four ack sets of 3 words each; 8 words' worth of bytes persists the first two.
    ml = await env.open(max_batch_deleted_index_bytes_to_persist=8 * 8)
    p = await fill(ml, 6)
    c = ml.open_cursor("sub", InitialPosition.EARLIEST)
    for pos in p[1:5]:
        c.set_batch_ack(pos, [1, 0, 1])
    await env.reopen()
    ml = await env.open(max_batch_deleted_index_to_persist=1)
    c = ml.cursors()["sub"]
    # Only those nearest mark-delete: the rest are delivered whole again.
    assert [c.batch_ack_set(pos) for pos in p[1:5]] == [[1, 0, 1], [1, 0, 1], None, None]
    c.set_batch_ack(p[3], [1])
    await env.reopen()
    ml = await env.open()
    c = ml.cursors()["sub"]
    # The count bound: one ack set.
    assert [c.batch_ack_set(pos) for pos in p[1:5]] == [[1, 0, 1], None, None, None]
