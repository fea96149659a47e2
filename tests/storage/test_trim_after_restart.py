"""Readers and cursors over trimmed ledgers: after a restart opened a new, empty current
ledger, trimming keeps the ledger with the topic's last entry while a reader is open,
the reader's cursor lands on the first retained entry and reads to the end, and a
durable cursor that pointed into a deleted ledger is moved out of it (persisted)."""

from __future__ import annotations

import asyncio

from quasar.storage import (
    EARLIEST,
    InitialPosition,
    ManagedLedgerImpl,
    Position,
    RetentionPolicy,
)
from quasar.storage.ledger_list import LedgerState
from quasar.storage.ledger_policy import ledgers_to_trim

from .storage_env import StorageEnv


async def fill(ml: ManagedLedgerImpl, n: int) -> list[Position]:
    return list(await asyncio.gather(*(ml.add_entry(b"x" * 10) for _ in range(n))))


def test_the_last_ledger_with_entries_stays_while_a_reader_is_open() -> None:
    ledgers = [
        LedgerState(i, 0, entries=2, size=20, assigned=2, sealed=True) for i in (1, 2, 3)
    ]
    ledgers.append(LedgerState(4, 0))  # the empty current ledger a restart opened

    def trimmed(reader_open: bool) -> list[int]:
        chosen = ledgers_to_trim(
            ledgers, 99, 60, RetentionPolicy(), 0, keep_last_with_entries=reader_open
        )
        return [s.ledger_id for s in chosen]

    assert trimmed(reader_open=True) == [1, 2]
    assert trimmed(reader_open=False) == [1, 2, 3]  # nobody may wait for ledger 3
    # With entries in the current ledger, every earlier ledger may go either way.
    ledgers[-1] = LedgerState(4, 0, entries=1, size=10, assigned=1)
    assert trimmed(reader_open=True) == [1, 2, 3]


async def test_reader_reads_to_the_end_after_restart_and_trim(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=2)
    p = await fill(ml, 6)  # ledgers [0,1] [2,3] [4,5]
    await env.reopen()  # a new, empty current ledger
    ml = await env.open(max_entries_per_ledger=2)
    assert ml.last_confirmed_entry.entry_id == -1
    reader = ml.new_non_durable_cursor(EARLIEST)
    assert [e.position for e in await reader.read_entries(1)] == [p[0]]
    trimmed = await ml.trim_consumed_ledgers()  # no durable cursor: nothing holds data
    assert len(trimmed) == 2
    # The reader moved past what was deleted and reads what is stored, to the end.
    assert ml.first_position == p[4]
    assert reader.mark_delete_position < p[4] <= reader.read_position
    assert [e.position for e in await reader.read_entries(10)] == p[4:]
    assert not reader.has_more_entries()
    # A reader created now at a position in a deleted ledger starts at the first
    # stored entry.
    late = ml.new_non_durable_cursor(p[1])
    assert [e.position for e in await late.read_entries(10)] == p[4:]
    # With no reader open, nothing holds the last ledger any more.
    ml.delete_cursor(reader.name)
    ml.delete_cursor(late.name)
    assert len(await ml.trim_consumed_ledgers()) == 1
    assert ml.number_of_entries == 0


async def test_durable_cursor_is_moved_out_of_a_deleted_ledger(env: StorageEnv) -> None:
    ml = await env.open(max_entries_per_ledger=2)
    sub = ml.open_cursor("sub", InitialPosition.EARLIEST)
    p = await fill(ml, 5)  # ledgers [0,1] [2,3] [4]
    sub.mark_delete(p[3])  # the last entry of the second ledger
    assert len(await ml.trim_consumed_ledgers()) == 2
    moved = sub.mark_delete_position
    assert moved < p[4] and moved.ledger_id == p[4].ledger_id  # (ledger of p[4], -1)
    assert sub.backlog() == 1
    await sub.flush()
    await env.reopen()
    ml = await env.open(max_entries_per_ledger=2)
    sub = ml.open_cursor("sub")
    assert sub.mark_delete_position == moved
    assert [e.position for e in await sub.read_entries(10)] == [p[4]]
