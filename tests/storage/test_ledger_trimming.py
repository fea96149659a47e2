"""Trimming consumed ledgers under retention (Pulsar's internalTrimLedgers semantics)."""

from __future__ import annotations

import asyncio

from quasar.storage import (
    EARLIEST,
    InitialPosition,
    ManagedLedgerImpl,
    Position,
    RetentionPolicy,
)

from .storage_env import StorageEnv


async def fill(ml: ManagedLedgerImpl, n: int) -> list[Position]:
    return list(await asyncio.gather(*(ml.add_entry(b"x" * 100) for _ in range(n))))


async def test_trims_ledgers_every_cursor_passed(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=2)
    deleted: list[int] = []
    ml.add_ledger_deleted_listener(deleted.append)
    slow = ml.open_cursor("slow", InitialPosition.EARLIEST)
    fast = ml.open_cursor("fast", InitialPosition.EARLIEST)
    p = await fill(ml, 7)  # ledgers: [0,1] [2,3] [4,5] [6]
    ids = [i.ledger_id for i in ml.ledgers()]
    fast.mark_delete(p[6])
    assert await ml.trim_consumed_ledgers() == []  # slow holds everything
    slow.mark_delete(p[2])  # first ledger fully consumed, second not
    assert await ml.trim_consumed_ledgers() == [ids[0]]
    assert deleted == [ids[0]]
    assert [i.ledger_id for i in ml.ledgers()] == ids[1:]
    assert ml.first_position == p[2]
    assert ml.number_of_entries == 5
    assert await ml.read_entry(p[0]) is None
    assert [e.position for e in await ml.read_entries(EARLIEST, 10)] == p[2:]
    assert slow.backlog() == 4
    slow.mark_delete(p[6])  # everything consumed: the current ledger stays
    assert await ml.trim_consumed_ledgers() == ids[1:3]
    assert [i.ledger_id for i in ml.ledgers()] == [ids[3]]
    assert ml.number_of_entries == 1
    if env.durable:
        files = sorted(f.name for f in (env.root / "data" / "ledgers").iterdir())
        assert files == [f"{ids[3]}.log"]


async def test_trim_survives_reopen(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=2)
    c = ml.open_cursor("c", InitialPosition.EARLIEST)
    p = await fill(ml, 5)
    c.mark_delete(p[3])
    trimmed = await ml.trim_consumed_ledgers()
    assert len(trimmed) == 2
    await env.reopen()
    ml = await env.open(max_entries_per_ledger=2)
    assert [e.position for e in await ml.read_entries(EARLIEST, 10)] == [p[4]]
    assert not {i.ledger_id for i in ml.ledgers()} & set(trimmed)


async def test_no_durable_cursor_trims_when_retention_allows(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=2)
    reader = ml.new_non_durable_cursor(EARLIEST)
    await fill(ml, 5)
    ids = [i.ledger_id for i in ml.ledgers()]
    assert await ml.trim_consumed_ledgers() == ids[:2]  # readers do not hold data
    got = await reader.read_entries(10)
    assert [e.position.ledger_id for e in got] == [ids[2]]


async def test_infinite_retention_keeps_everything(env: StorageEnv) -> None:
    ml = await env.open(
        max_entries_per_ledger=2,
        retention=RetentionPolicy(retention_time_minutes=-1, retention_size_mb=-1),
    )
    await fill(ml, 5)
    assert await ml.trim_consumed_ledgers() == []


async def test_retention_time(env: StorageEnv) -> None:
    ml = await env.open(
        max_entries_per_ledger=2,
        retention=RetentionPolicy(retention_time_minutes=10, retention_size_mb=-1),
    )
    await fill(ml, 2)
    env.clock.advance(5 * 60_000)
    await fill(ml, 2)  # rolls the first ledger at t=5min
    env.clock.advance(5 * 60_000)
    await fill(ml, 1)  # rolls the second at t=10min
    ids = [i.ledger_id for i in ml.ledgers()]
    assert await ml.trim_consumed_ledgers() == []
    env.clock.advance(5 * 60_000 + 1)  # first ledger closed 10min+1ms ago
    assert await ml.trim_consumed_ledgers() == [ids[0]]
    env.clock.advance(5 * 60_000)
    assert await ml.trim_consumed_ledgers() == [ids[1]]


async def test_retention_size(env: StorageEnv) -> None:
    ml = await env.open(
        max_entries_per_ledger=1,
        retention=RetentionPolicy(retention_time_minutes=-1, retention_size_mb=1),
    )
    for _ in range(5):
        await ml.add_entry(b"y" * (400 * 1024))
    ids = [i.ledger_id for i in ml.ledgers()]
    # 2000 KiB total; dropping the two oldest leaves 1200 KiB, three leaves 800 KiB.
    assert await ml.trim_consumed_ledgers() == ids[:3]


async def test_never_trims_unconsumed_or_current(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=100)
    c = ml.open_cursor("c", InitialPosition.EARLIEST)
    p = await fill(ml, 3)
    c.mark_delete(p[-1])
    assert await ml.trim_consumed_ledgers() == []  # only the current ledger exists
    assert ml.number_of_entries == 3


async def test_non_durable_cursor_behind_trim_moves_up(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=2)
    reader = ml.new_non_durable_cursor(EARLIEST)
    p = await fill(ml, 5)
    reader.delete([p[1]])
    await ml.trim_consumed_ledgers()
    assert reader.backlog() == 1
    assert reader.mark_delete_position < p[4]
    assert [e.position for e in await reader.read_entries(5)] == [p[4]]
