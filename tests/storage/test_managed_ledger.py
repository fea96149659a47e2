"""Managed-ledger conformance: the file and memory implementations behave the same."""

from __future__ import annotations

import asyncio

import pytest

from quasar.errors import ManagedLedgerClosed, NotFound
from quasar.storage import (
    EARLIEST,
    LATEST,
    ManagedLedger,
    ManagedLedgerFactory,
    Position,
)

from .storage_env import StorageEnv


def payloads(n: int, start: int = 0) -> list[bytes]:
    return [f"entry-{i}".encode() * (1 + i % 3) for i in range(start, start + n)]


async def test_satisfies_protocols(env: StorageEnv) -> None:
    ml = await env.open()
    assert isinstance(ml, ManagedLedger)
    assert isinstance(env.factory, ManagedLedgerFactory)


async def test_empty_ledger(env: StorageEnv) -> None:
    ml = await env.open()
    current = ml.ledgers()[-1].ledger_id
    assert ml.last_confirmed_entry == Position(current, -1)
    assert ml.number_of_entries == 0 and ml.total_size == 0
    assert await ml.read_entries(EARLIEST, 10) == []
    assert await ml.read_entry(Position(current, 0)) is None
    assert ml.first_position == Position(current, 0)


async def test_append_assigns_positions_in_call_order(env: StorageEnv) -> None:
    ml = await env.open()
    data = payloads(20)
    futures = [ml.add_entry(d) for d in data]
    resolved: list[int] = []
    for i, fut in enumerate(futures):
        fut.add_done_callback(lambda _f, i=i: resolved.append(i))
    positions = await asyncio.gather(*futures)
    ledger = positions[0].ledger_id
    assert positions == [Position(ledger, i) for i in range(20)]
    assert resolved == list(range(20))  # futures resolve in append order
    assert ml.last_confirmed_entry == positions[-1]
    assert ml.number_of_entries == 20
    assert ml.total_size == sum(len(d) for d in data)
    entries = await ml.read_entries(EARLIEST, 100)
    assert [e.data for e in entries] == data
    assert [e.position for e in entries] == positions
    assert (await ml.read_entry(positions[7])) == (positions[7], data[7])
    assert await ml.read_entry(Position(ledger, 20)) is None
    assert [e.data for e in await ml.read_entries(positions[5], 3)] == data[5:8]


async def test_append_entry_callbacks_match_add_entry(env: StorageEnv) -> None:
    """The callback form assigns the same positions, in call order, once durable."""
    ml = await env.open()
    data = payloads(30)
    got: list[tuple[Position | None, BaseException | None]] = []
    done = asyncio.get_running_loop().create_future()

    def callback(pos: Position | None, exc: BaseException | None) -> None:
        got.append((pos, exc))
        if len(got) == 15:
            done.set_result(None)

    futures = []
    for i, d in enumerate(data):
        if i % 2:
            futures.append(ml.add_entry(d))
        else:
            ml.append_entry(d, callback)
    await done
    positions = await asyncio.gather(*futures)
    ledger = positions[0].ledger_id
    assert [p for p, _ in got] == [Position(ledger, i) for i in range(0, 30, 2)]
    assert all(exc is None for _, exc in got)
    assert positions == [Position(ledger, i) for i in range(1, 30, 2)]
    assert [e.data for e in await ml.read_entries(EARLIEST, 100)] == data
    await ml.close()
    with pytest.raises(ManagedLedgerClosed):
        ml.append_entry(b"x", callback)


async def test_entries_are_copied_and_may_be_empty(env: StorageEnv) -> None:
    ml = await env.open()
    buf = bytearray(b"mutable")
    pos = await ml.add_entry(bytes(buf))
    empty = await ml.add_entry(b"")
    buf[0] = ord("X")
    assert (await ml.read_entry(pos)) == (pos, b"mutable")
    assert (await ml.read_entry(empty)) == (empty, b"")


async def test_rollover_by_entries(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=3)
    positions = [await ml.add_entry(d) for d in payloads(10)]
    ledger_ids = sorted({p.ledger_id for p in positions})
    assert len(ledger_ids) == 4
    assert [p.entry_id for p in positions] == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    infos = ml.ledgers()
    assert [i.ledger_id for i in infos] == ledger_ids
    assert [i.entries for i in infos] == [3, 3, 3, 1]
    assert all(i.size > 0 for i in infos)
    assert [e.position for e in await ml.read_entries(EARLIEST, 100)] == positions
    # next/previous cross ledger boundaries both ways.
    for a, b in zip(positions, positions[1:], strict=False):
        assert ml.next_position(a) == b
        assert ml.previous_position(b) == a
    assert ml.next_position(positions[-1]) == Position(ledger_ids[-1], 1)
    assert ml.previous_position(positions[0]) == Position(ledger_ids[0], -1)
    assert ml.count_entries(positions[0], positions[-1]) == 10
    assert ml.count_entries(positions[2], positions[6]) == 5
    assert ml.count_entries(positions[4], positions[4]) == 1
    assert ml.count_entries(positions[5], positions[4]) == 0
    assert ml.count_entries(EARLIEST, LATEST) == 10


async def test_rollover_by_size(env: StorageEnv) -> None:
    ml = await env.open(max_size_per_ledger_mb=1)
    big = b"x" * (600 * 1024)
    positions = [await ml.add_entry(big) for _ in range(4)]
    assert [p.entry_id for p in positions] == [0, 1, 0, 1]


async def test_rollover_waits_for_min_time_and_rolls_by_age(env: StorageEnv) -> None:
    ml = await env.open(
        max_entries_per_ledger=2,
        min_ledger_rollover_time_minutes=10,
        max_ledger_rollover_time_minutes=60,
    )
    positions = [await ml.add_entry(d) for d in payloads(5)]
    assert len({p.ledger_id for p in positions}) == 1  # full, but younger than 10 min
    env.clock.advance(10 * 60_000)
    p = await ml.add_entry(b"after-min")
    assert p == Position(positions[-1].ledger_id + 1, 0) or p.entry_id == 0
    assert p.ledger_id != positions[-1].ledger_id
    ml2 = await env.open("age", max_ledger_rollover_time_minutes=1)
    a = await ml2.add_entry(b"a")
    env.clock.advance(59_000)
    assert (await ml2.add_entry(b"b")).ledger_id == a.ledger_id
    env.clock.advance(1_000)
    assert (await ml2.add_entry(b"c")).ledger_id != a.ledger_id


async def test_read_entries_crosses_ledgers_and_stops_at_lac(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=2)
    data = payloads(7)
    positions = [await ml.add_entry(d) for d in data]
    got = await ml.read_entries(positions[1], 4)
    assert [e.data for e in got] == data[1:5]
    got = await ml.read_entries(ml.next_position(positions[-1]), 10)
    assert got == []


async def test_closed_ledger_rejects_operations(env: StorageEnv) -> None:
    ml = await env.open()
    await ml.add_entry(b"x")
    await ml.close()
    with pytest.raises(ManagedLedgerClosed):
        ml.add_entry(b"y")
    with pytest.raises(ManagedLedgerClosed):
        await ml.read_entries(EARLIEST, 1)
    await ml.close()  # idempotent


async def test_open_returns_same_instance_and_lists_names(env: StorageEnv) -> None:
    a = await env.open("tenant/ns/persistent/a")
    assert await env.open("tenant/ns/persistent/a") is a
    await env.open("tenant/ns/persistent/b%2F")
    assert env.factory.list_names() == [
        "tenant/ns/persistent/a",
        "tenant/ns/persistent/b%2F",
    ]
    assert env.factory.exists("tenant/ns/persistent/a")
    assert not env.factory.exists("tenant/ns/persistent/zzz")


async def test_reopen_keeps_entries_and_starts_a_new_ledger(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=3)
    data = payloads(7)
    positions = [await ml.add_entry(d) for d in data]
    await env.reopen()
    ml = await env.open(max_entries_per_ledger=3)
    entries = await ml.read_entries(EARLIEST, 100)
    assert [(e.position, e.data) for e in entries] == list(
        zip(positions, data, strict=True)
    )
    assert ml.number_of_entries == 7
    # The recovered ledger is closed; new appends go to a new ledger.
    assert ml.last_confirmed_entry.ledger_id > positions[-1].ledger_id
    assert ml.last_confirmed_entry.entry_id == -1
    p = await ml.add_entry(b"new")
    assert p.ledger_id > positions[-1].ledger_id and p.entry_id == 0
    assert ml.next_position(positions[-1]) == p
    assert [e.data for e in await ml.read_entries(positions[-1], 10)] == [
        data[-1],
        b"new",
    ]


async def test_reopen_without_writes_does_not_pile_up_empty_ledgers(
    env: StorageEnv,
) -> None:
    ml = await env.open()
    await ml.add_entry(b"x")
    for _ in range(3):
        await env.reopen()
        ml = await env.open()
    assert [i.entries for i in ml.ledgers()] == [1, 0]


async def test_ledger_ids_never_repeat(env: StorageEnv) -> None:
    seen: set[int] = set()
    for name in ["a", "b", "c"]:
        ml = await env.open(name, max_entries_per_ledger=1)
        for _ in range(3):
            await ml.add_entry(b"x")
        ids = {i.ledger_id for i in ml.ledgers()}
        assert not ids & seen
        seen |= ids
        await env.factory.delete(name)
    ml = await env.open("a")
    assert ml.ledgers()[-1].ledger_id not in seen


async def test_delete(env: StorageEnv) -> None:
    ml = await env.open("gone", max_entries_per_ledger=2)
    for d in payloads(5):
        await ml.add_entry(d)
    cursor = ml.open_cursor("sub")
    cursor.mark_delete(ml.last_confirmed_entry)
    await env.factory.delete("gone")
    assert not env.factory.exists("gone")
    assert "gone" not in env.factory.list_names()
    assert env.meta.children("/managed-ledgers") == []
    if env.durable:
        assert list((env.root / "data" / "ledgers").iterdir()) == []
    with pytest.raises(NotFound):
        await env.factory.delete("gone")
    fresh = await env.open("gone")
    assert fresh.number_of_entries == 0 and fresh.cursors() == {}


async def test_delete_not_open(env: StorageEnv) -> None:
    ml = await env.open("closed-then-deleted")
    await ml.add_entry(b"x")
    ml.open_cursor("c")
    await ml.close()
    await env.factory.delete("closed-then-deleted")
    assert not env.factory.exists("closed-then-deleted")
    if env.durable:
        assert list((env.root / "data" / "ledgers").iterdir()) == []


async def test_close_waits_for_pending_appends(env: StorageEnv) -> None:
    ml = await env.open()
    futures = [ml.add_entry(d) for d in payloads(50)]
    await ml.close()
    assert all(f.done() and not f.exception() for f in futures)
