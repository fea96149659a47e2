"""What an operator does to a subscription's cursor: skip, clear the backlog, reset,
and find the n-th message still to be delivered (peek).

Positions are counted in entries, as Pulsar's ``skipEntries`` and ``getNthEntry``
count them: a batch is one entry. Entries already acknowledged individually are
not counted (Pulsar's ``IndividualDeletedEntries.Exclude``). Nothing here reads past
the topic's ``max_read_position``: entries held back behind an open transaction are
not the operator's to skip or peek, and skipping them would lose them when the
transaction commits.
"""

from __future__ import annotations

from quasar.errors import PreconditionFailedError
from quasar.storage.api import ManagedLedger, Position

from .subscription import Subscription

__all__ = [
    "clear_backlog",
    "entry_exists",
    "last_readable",
    "nth_unacked",
    "reset_position",
    "skip_entries",
]

# An invalid position for a cursor reset; Pulsar's reason, with the position.
NO_SUCH_POSITION = "Unable to find position for position specified: "


def nth_unacked(sub: Subscription, limit: Position, n: int) -> Position | None:
    """The ``n``-th (1-based) entry after mark-delete that is not acknowledged,
    up to ``limit``; None when there are fewer."""
    cursor = sub.cursor
    ledger = sub.topic.ledger
    position = cursor.mark_delete_position
    found = 0
    while True:
        following = ledger.next_position(position)
        if following <= position or following > limit:
            return None
        position = following
        if not cursor.is_acknowledged(position):
            found += 1
            if found == n:
                return position


def skip_entries(sub: Subscription, limit: Position, n: int) -> int:
    """Acknowledge the next ``n`` unacknowledged entries (fewer if the backlog is
    shorter); return how many were skipped."""
    if n <= 0:
        return 0
    if n >= sub.backlog():
        before = sub.backlog()
        clear_backlog(sub, limit)
        return before - sub.backlog()
    target = nth_unacked(sub, limit, n)
    if target is None:
        before = sub.backlog()
        clear_backlog(sub, limit)
        return before - sub.backlog()
    sub.acknowledge_up_to(target)
    return n


def last_readable(ledger: ManagedLedger, limit: Position) -> Position | None:
    """The last entry at or before ``limit``; None if there is none. ``limit`` may be
    ``(ledger, -1)``, "before the first entry" of a ledger that has none yet."""
    if limit.entry_id >= 0:
        return limit
    previous = ledger.previous_position(limit)
    if previous >= limit or previous < ledger.first_position or previous.entry_id < 0:
        return None
    return previous


def clear_backlog(sub: Subscription, limit: Position) -> None:
    """Acknowledge everything up to ``limit`` (the last readable entry)."""
    last = last_readable(sub.topic.ledger, limit)
    if last is not None and last > sub.cursor.mark_delete_position:
        sub.acknowledge_up_to(last)


def entry_exists(ledger: ManagedLedger, position: Position) -> bool:
    """Whether ``position`` is a retained entry of ``ledger``."""
    if position.entry_id < 0:
        return False
    last = ledger.last_confirmed_entry
    if position.ledger_id == last.ledger_id:
        return position.entry_id <= last.entry_id
    for info in ledger.ledgers():
        if info.ledger_id == position.ledger_id:
            return position.entry_id < info.entries
    return False


def reset_position(ledger: ManagedLedger, position: Position, excluded: bool) -> Position:
    """Where a cursor reset to ``position`` starts delivering: ``position`` itself, or
    the entry after it when ``excluded``.

    The position after the last entry is valid (the subscription then has no
    backlog), as is a position before the first retained entry (it starts at the
    first one).

    Raises:
        PreconditionFailedError: no such entry (412, Pulsar's answer).
    """
    first = ledger.first_position
    end = ledger.next_position(ledger.last_confirmed_entry)
    if position < first:
        return first
    if position == end and not excluded:
        return end
    if not entry_exists(ledger, position):
        raise PreconditionFailedError(f"{NO_SUCH_POSITION}{position}")
    return ledger.next_position(position) if excluded else position
