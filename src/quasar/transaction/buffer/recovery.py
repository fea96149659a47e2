"""Replaying a topic into a ``BufferState`` (the second half of recovery).

Recovery first installs the snapshot (aborted ids, low watermarks), then reads every
entry from the snapshot's max read position to the end of the topic and applies it.
Why starting there is enough: at snapshot time every ongoing transaction started
after the max read position, so their first entries are replayed; every transaction
whose marker came at or before it had already ended and, if aborted, is in the
snapshot. Entries already reflected in the snapshot (abort markers after the max
read position, the entry at the position itself) are applied again harmlessly:
``apply`` ignores a second abort and data of a transaction already aborted, and a
transaction re-registered by a replayed data entry is ended again by its marker,
which always follows its data.

Plain entries appended while recovery runs are replayed too if they are already
confirmed; they change nothing. Transactional appends and markers cannot be written
before recovery ends (the state table refuses or delays them), so reading until a
read comes back empty sees every entry that matters.
"""

from __future__ import annotations

from collections.abc import Callable

from quasar.storage.api import ManagedLedger, Position

from .records import classify
from .txn_state import BufferState


async def replay(
    ledger: ManagedLedger,
    start: Position,
    state: BufferState,
    batch_entries: int,
    check_open: Callable[[], None],
) -> int:
    """Apply every entry at or after ``start``; returns how many were read.

    ``check_open`` runs before each read and raises to stop (the buffer closed).

    Raises:
        CorruptRecordError: a stored record fails its checksum.
        ManagedLedgerClosed: the ledger closed under us.
    """
    position = start
    replayed = 0
    while True:
        check_open()
        entries = await ledger.read_entries(position, batch_entries)
        if not entries:
            return replayed
        for entry in entries:
            state.apply(classify(entry.data), entry.position)
        replayed += len(entries)
        last = entries[-1].position
        # read_entries starts at the first retained entry at or after a position,
        # crossing ledger boundaries by itself.
        position = Position(last.ledger_id, last.entry_id + 1)
