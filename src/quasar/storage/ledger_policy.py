"""When a managed ledger switches ledgers, and which consumed ledgers it may delete.

Rollover (Pulsar's ``currentLedgerIsFull``): the current ledger is switched when it
holds ``max_entries_per_ledger`` entries or ``max_size_per_ledger_mb``, or is older than
``max_ledger_rollover_time_minutes``, but never before it is
``min_ledger_rollover_time_minutes`` old. Checked when an entry is added; a value of
0 or less disables the entries, size or age limit.

Trimming (Pulsar's ``internalTrimLedgers``): walk the ledgers before the slowest durable cursor's ledger, oldest first. A ledger
goes if its retention time has expired *or* the managed ledger is over its retention
size; the walk stops at the first ledger that must stay, at the current ledger, and
at a ledger whose last entries are still being written. ``-1`` disables a limit;
``0`` deletes consumed data at once (the default).

While a reader is open (a non-durable cursor), the last ledger that holds entries
stays too, like the current ledger it usually is. It differs only after a restart,
which opens a new, empty current ledger: Pulsar would then delete the topic's last
messages, and a reader that was told where the topic ends (GET_LAST_MESSAGE_ID; the
official client caches the answer and does not ask again while it has not read that
far) would wait for entries that no longer exist.
"""

from __future__ import annotations

from quasar.storage.api import ManagedLedgerConfig, RetentionPolicy
from quasar.storage.ledger_list import LedgerState

_MIB = 1024 * 1024


def should_rollover(
    current: LedgerState, config: ManagedLedgerConfig, now_mono_ms: float
) -> bool:
    """True if the next entry should go to a new ledger instead of ``current``."""
    if current.assigned == 0:
        return False  # an empty ledger is never switched, however old
    age_ms = now_mono_ms - current.created_mono_ms
    full = (
        config.max_entries_per_ledger > 0
        and current.assigned >= config.max_entries_per_ledger
    ) or (
        config.max_size_per_ledger_mb > 0
        and current.assigned_size >= config.max_size_per_ledger_mb * _MIB
    )
    too_old = (
        config.max_ledger_rollover_time_minutes > 0
        and age_ms >= config.max_ledger_rollover_time_minutes * 60_000
    )
    if not (full or too_old):
        return False
    return age_ms >= config.min_ledger_rollover_time_minutes * 60_000


def ledgers_to_trim(
    ledgers: list[LedgerState],
    consumed_before_ledger_id: int,
    total_size: int,
    retention: RetentionPolicy,
    now_ms: int,
    keep_last_with_entries: bool = False,
) -> list[LedgerState]:
    """Select the ledgers to delete, oldest first.

    ``consumed_before_ledger_id`` is the ledger holding the oldest unacknowledged
    entry of any durable cursor (or the current ledger when there is none): every
    ledger before it is consumed. The last ledger in ``ledgers`` is the current one.
    ``keep_last_with_entries``: a reader is open, so the ledger holding the last
    entry stays (see the module docstring).
    """
    if not ledgers:
        return []
    current_id = ledgers[-1].ledger_id
    # The first ledger that stays whatever retention says: the current one, or the
    # one holding the last entry while a reader is open (see the module docstring).
    last_with_entries = current_id
    if keep_last_with_entries:
        last_with_entries = next(
            (state.ledger_id for state in reversed(ledgers) if state.entries > 0),
            current_id,
        )
    time_ms = retention.retention_time_minutes * 60_000
    size_bytes = retention.retention_size_mb * _MIB
    doomed: list[LedgerState] = []
    size_to_delete = 0
    for state in ledgers:
        if (
            state.ledger_id >= consumed_before_ledger_id
            or state.ledger_id >= last_with_entries
        ):
            break
        if not state.complete:
            break  # entries still being written: not consumed, whatever cursors say
        expired = time_ms == 0 or (
            time_ms > 0 and now_ms - state.closed_at_ms > time_ms
        )
        over_quota = size_bytes == 0 or (
            size_bytes > 0 and total_size - size_to_delete > size_bytes
        )
        if not (expired or over_quota):
            break
        doomed.append(state)
        size_to_delete += state.size
    return doomed
