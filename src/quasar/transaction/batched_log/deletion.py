"""Deleting log records by batch index (PIP-160 on top of PIP-45's batch-index acks).

A log is cleaned through its own durable cursor. A record alone in an entry is
deleted by acknowledging the entry. A record in a batched entry is deleted by
clearing its bit in the entry's batch ack set (1 = still needed); when the last bit
is cleared the cursor acknowledges the whole entry, and only then can the entry's
ledger be trimmed. Replay asks the cursor for the entry's ack set and skips deleted
records (``live_records``), so a record deleted before a restart stays deleted.

Two ways to delete, one per log:

* ``delete_records``: the coordinator log deletes the records of each ended
  transaction individually.
* ``release_before``: the pending-ack log lets go of every record before the oldest
  one still needed, in one cursor update (a mark-delete just before that record's
  entry, plus the bits of the records before it inside that entry), so what is
  released is always a prefix of the log and is persisted atomically.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TypeVar

from quasar.errors import CorruptRecordError
from quasar.protocol.ack_set import clear_index, full_ack_set, is_acked
from quasar.storage.api import ManagedCursor, ManagedLedger, Position

from .entry_format import is_batched_entry
from .position import LogPosition

R = TypeVar("R")


def live_records(
    cursor: ManagedCursor, position: Position, records: Sequence[R], batched: bool
) -> list[tuple[LogPosition, R]]:
    """The records of one entry read for replay, minus those deleted by batch index."""
    if not batched:
        return [(LogPosition(position), r) for r in records]
    acks = cursor.batch_ack_set(position)
    n = len(records)
    return [
        (LogPosition(position, i, n), r)
        for i, r in enumerate(records)
        if acks is None or not is_acked(acks, i)
    ]


async def replay_live_records(
    cursor: ManagedCursor,
    read_entries: int,
    decode: Callable[[bytes], Sequence[R]],
    log_name: str = "",
) -> AsyncIterator[tuple[LogPosition, R]]:
    """Every record of the log not yet deleted, in log order, from the cursor's
    mark-delete position on; ``decode`` turns one entry into its records.

    Entries deleted on the cursor are not read, so an entry an operator set aside
    (``set_aside``) is skipped here.

    Raises:
        CorruptRecordError: from ``decode``, naming ``log_name`` and the entry's
            position; recovery must stop there, since skipping an entry could forget
            a record.
        ManagedLedgerClosed: the ledger was closed meanwhile.
    """
    cursor.rewind()
    while True:
        entries = await cursor.read_entries(read_entries)
        if not entries:
            return
        for entry in entries:
            try:
                records = decode(entry.data)
            except CorruptRecordError as exc:
                raise corrupt_at(log_name, entry.position, exc) from exc
            batched = is_batched_entry(entry.data)
            for live in live_records(cursor, entry.position, records, batched):
                yield live


def corrupt_at(log_name: str, position: Position, exc: Exception) -> CorruptRecordError:
    """``exc`` (what was wrong) as the error of the record at ``position`` of
    ``log_name``."""
    return CorruptRecordError(
        f"{log_name}: the record at {position} cannot be read: {exc}",
        log_name=log_name, position=str(position),
    )


def delete_records(cursor: ManagedCursor, positions: Iterable[LogPosition]) -> None:
    """Delete records: whole entries for un-batched records, bits for batched ones.

    Raises:
        ManagedLedgerClosed: the cursor is closed.
    """
    plain: list[Position] = []
    batched: dict[Position, tuple[int, list[int]]] = {}
    for lp in positions:
        if lp.batch_index < 0:
            plain.append(lp.position)
        else:
            _, indexes = batched.setdefault(lp.position, (lp.batch_size, []))
            indexes.append(lp.batch_index)
    if plain:
        cursor.delete(plain)
    for pos, (size, indexes) in batched.items():
        if cursor.is_acknowledged(pos):
            continue
        bits = cursor.batch_ack_set(pos) or full_ack_set(size)
        for index in indexes:
            bits = clear_index(bits, index)
        cursor.set_batch_ack(pos, bits)  # all clear: the cursor deletes the entry


_WHOLE = 1 << 62  # "first kept index" meaning: nothing of the entry is kept


def release_before(
    cursor: ManagedCursor,
    ledger: ManagedLedger,
    first_needed: LogPosition | None,
    last_applied: LogPosition,
) -> bool:
    """Delete every record before ``first_needed`` (all up to ``last_applied`` when
    nothing is needed), never one after ``last_applied``; return whether anything
    new was released. Never brings a record back.

    Raises:
        ManagedLedgerClosed: the cursor is closed.
    """
    # A bound is (entry, index of the first record kept in it).
    if last_applied.is_batched and last_applied.batch_index + 1 < last_applied.batch_size:
        bound = (last_applied.position, last_applied.batch_index + 1)
        size = last_applied.batch_size
    else:
        bound, size = (last_applied.position, _WHOLE), 0
    if first_needed is not None:
        needed = (first_needed.position, max(first_needed.batch_index, 0))
        if needed < bound:
            bound, size = needed, first_needed.batch_size
    entry, keep_from = bound
    before = (cursor.mark_delete_position, cursor.batch_ack_set(entry))
    if keep_from == _WHOLE:
        if entry > cursor.mark_delete_position:
            cursor.mark_delete(entry)
    else:
        md = ledger.previous_position(entry)
        if md > cursor.mark_delete_position:
            cursor.mark_delete(md)
        if keep_from > 0 and not cursor.is_acknowledged(entry):
            bits = cursor.batch_ack_set(entry) or full_ack_set(size)
            for index in range(keep_from):
                bits = clear_index(bits, index)
            cursor.set_batch_ack(entry, bits)
    return (cursor.mark_delete_position, cursor.batch_ack_set(entry)) != before
