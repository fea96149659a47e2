"""A partition's ledgers (the admin API's ``internalStats``) and what a range needs of them.

Positions are ``(ledger, entry)``. Entry ids are dense within a ledger; ledger ids come
from one broker-wide counter, so they increase along a partition but are not dense.
Retention deletes whole ledgers, oldest first; deleting a topic deletes all of them.
So a ledger older than the partition's first stored one is gone, and nothing between
two stored ledgers ever is. What was in a deleted ledger is not known any more: when
the ledger of the last message a query read is gone, the messages after it *may*
have been lost (Spark's "possible data loss").

Inside one ledger a reader can skip entries without loss: transaction markers and
aborted messages are never delivered. Only a skip across a ledger that held entries of
the range, and is gone now, loses messages.
"""

from __future__ import annotations

from dataclasses import dataclass

# A range's ledgers as stored when it was planned: (ledger id, entries).
PlannedLedgers = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class LedgerSpan:
    ledger_id: int
    entries: int
    size: int


def first_position(spans: list[LedgerSpan]) -> tuple[int, int] | None:
    """The first stored entry, or None when the partition stores none."""
    for s in spans:
        if s.entries > 0:
            return (s.ledger_id, 0)
    return None


def is_deleted(spans: list[LedgerSpan] | None, ledger_id: int) -> bool:
    """Whether ``ledger_id`` was deleted from the partition's front (or with it).

    A ledger id between two stored ledgers, or after the last, is not a deleted
    ledger of this partition (retention never deletes in the middle).
    """
    if spans is None:
        return True
    return not spans or ledger_id < spans[0].ledger_id


def planned_ledgers(
    spans: list[LedgerSpan], first_ledger: int | None, last_ledger: int
) -> PlannedLedgers:
    """The stored ledgers from ``first_ledger`` (None: the first) to ``last_ledger``."""
    return tuple(
        (s.ledger_id, s.entries)
        for s in spans
        if (first_ledger is None or s.ledger_id >= first_ledger)
        and s.ledger_id <= last_ledger
    )


def skipped_ledgers(
    prev: tuple[int, int] | None,
    cur: tuple[int, int],
    end: tuple[int, int],
    planned: PlannedLedgers | None,
) -> list[int]:
    """Ledgers whose range entries lie strictly between ``prev`` and ``cur``.

    ``prev`` is the last position read (or the one before the range's first
    message; None: the range starts at the partition's beginning), ``cur`` the
    position just received, ``end`` the range's last entry. ``planned`` is what the
    driver saw stored when it planned the range (None: the range lies in one
    ledger and was planned without the list). An empty answer means nothing of the
    range can have been lost between the two.
    """
    if prev is not None and cur[0] == prev[0]:
        return []  # within a ledger: only markers or aborted messages in between
    counts = dict(planned or ())
    out: list[int] = []
    if prev is not None and prev < end:
        entries = counts.get(prev[0])
        last_needed = end[1] if prev[0] == end[0] else None
        if entries is not None:
            last_needed = entries - 1 if last_needed is None else min(last_needed, entries - 1)
        if last_needed is None or last_needed > prev[1]:
            out.append(prev[0])
    low = -1 if prev is None else prev[0]
    for ledger_id, entries in planned or ():
        if low < ledger_id < cur[0] and ledger_id <= end[0] and entries > 0:
            out.append(ledger_id)
    return out
