"""Setting a corrupt log entry aside: the operator's way past a record the broker
cannot read.

A coordinator log or a pending-ack log stops its recovery at the first entry it
cannot decode, because skipping an entry silently could forget a transaction's
record. The operator names that entry (``ledger:entry``, as the error reports it);
``set_aside`` checks that it really cannot be decoded, acknowledges it on the log's
own cursor and makes the cursor durable, so every later replay, this one and after
any restart, skips it as it skips records deleted the ordinary way. The ledger itself
is not changed (trimming removes the entry once the cursor has passed it); the
entry's bytes are returned so the caller can keep them for inspection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from quasar.errors import (
    CorruptRecordError,
    PreconditionFailedError,
    ResourceNotFoundError,
)
from quasar.storage.api import InitialPosition, ManagedLedger, Position

log = logging.getLogger(__name__)


def parse_position(text: str) -> Position:
    """``"ledger:entry"`` as a ``Position``.

    Raises:
        ValueError: not two non-negative integers separated by a colon.
    """
    parts = text.strip().split(":")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"position {text!r} is not ledger:entry")
    return Position(int(parts[0]), int(parts[1]))


async def set_aside(
    ledger: ManagedLedger,
    cursor_name: str,
    position: Position,
    decode: Callable[[bytes], Sequence[Any]],
    properties: dict[str, int] | None = None,
) -> bytes:
    """Acknowledge the undecodable entry at ``position`` on ``cursor_name`` durably and
    return its bytes; ``properties`` are stored on the cursor in the same write.

    Raises:
        ResourceNotFoundError: the log has no entry there.
        PreconditionFailedError: the entry decodes (only an entry the broker cannot
            read may be set aside), or the cursor has already acknowledged it.
        MetadataError, ManagedLedgerClosed: from storage.
    """
    entry = await ledger.read_entry(position)
    if entry is None:
        raise ResourceNotFoundError(f"{ledger.name} has no entry at {position}")
    try:
        decode(entry.data)
    except CorruptRecordError as exc:
        why = str(exc)
    else:
        raise PreconditionFailedError(
            f"the entry at {position} of {ledger.name} is readable; only an entry "
            "the broker cannot read may be set aside"
        )
    cursor = ledger.open_cursor(cursor_name, InitialPosition.EARLIEST)
    if cursor.is_acknowledged(position):
        raise PreconditionFailedError(
            f"the entry at {position} of {ledger.name} is already set aside or deleted"
        )
    if properties:
        merged = dict(cursor.properties)
        for key, value in properties.items():
            merged[key] = max(merged.get(key, value), value)
        # A cumulative ack at the current mark-delete acknowledges nothing new; it is
        # how the cursor API attaches properties, persisted with the deletion below.
        cursor.mark_delete(cursor.mark_delete_position, merged)
    cursor.delete([position])
    await cursor.flush()
    log.warning("%s: entry %s set aside by the operator (%d bytes): %s",
                ledger.name, position, len(entry.data), why)
    return bytes(entry.data)


async def decodable_entries(
    ledger: ManagedLedger,
    decode: Callable[[bytes], Sequence[Any]],
    skip: Position,
    read_entries: int = 1000,
) -> list[Any]:
    """The records of every entry of ``ledger`` except ``skip`` and entries that do
    not decode (used to bound what a set-aside entry could have held)."""
    out: list[Any] = []
    if not ledger.number_of_entries:
        return out
    pos = ledger.first_position
    last = ledger.last_confirmed_entry
    while pos <= last:
        batch = await ledger.read_entries(pos, read_entries)
        if not batch:
            break
        for entry in batch:
            if entry.position == skip:
                continue
            try:
                out.extend(decode(entry.data))
            except CorruptRecordError:
                continue
        pos = ledger.next_position(batch[-1].position)
    return out
