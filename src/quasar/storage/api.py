"""Storage interfaces: the managed ledger, its cursors, and the metadata store.

Pulsar stores a topic as a *managed ledger*: an ordered list of ledgers, each an
append-only sequence of entries. A position is ``(ledger_id, entry_id)``; positions
order by ledger, then entry. quasar keeps this model so message ids, admin stats and
internal stats look like Pulsar's.

Two implementations satisfy these protocols and pass one conformance suite
(``tests/storage``): ``quasar.storage.file`` (embedded, durable, the default) and
``quasar.storage.memory`` (for tests and simulation).

Durability contract: ``ManagedLedger.add_entry`` resolves only after the entry is on
disk (fsync/fdatasync, group commit). ``ManagedCursor.flush`` resolves only after the
cursor state is durable. Ordinary acknowledgements are persisted lazily, at most
``cursor_persist_interval_ms`` late; after a crash a subscription may redeliver
messages acknowledged within that window but never goes back further.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple, Protocol, runtime_checkable

from quasar.storage.ledger_stats import ManagedLedgerStats


class Position(NamedTuple):
    """A place in a managed ledger: ``(ledger_id, entry_id)``.

    ``entry_id == -1`` means "before the first entry of that ledger", which is how an
    empty ledger's last-confirmed position and a cursor at the start are written.
    """

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:  # Pulsar's textual form, used in admin stats
        return f"{self.ledger_id}:{self.entry_id}"


# ``new_position((ledger_id, entry_id))`` equals ``Position(ledger_id, entry_id)``
# without the NamedTuple's Python-level ``__new__`` (half the cost; hot paths only).
new_position: Callable[[tuple[int, int]], Position] = partial(tuple.__new__, Position)


# Sentinels understood by cursors and seeks (same meaning as Pulsar's PositionImpl).
EARLIEST = Position(-1, -1)
LATEST = Position(2**63 - 1, 2**63 - 1)


class Entry(NamedTuple):
    """One stored entry: its position and its bytes, exactly as they were appended."""

    position: Position
    data: bytes


class InitialPosition:
    """Where a new durable cursor starts."""

    LATEST = 0
    EARLIEST = 1


@dataclass(frozen=True)
class RetentionPolicy:
    """How long consumed data is kept (Pulsar's namespace retention policy).

    ``-1`` means unlimited; ``0`` means consumed ledgers are deleted as soon as every
    cursor has moved past them (Pulsar's default).
    """

    retention_time_minutes: int = 0  # defaultRetentionTimeInMinutes
    retention_size_mb: int = 0  # defaultRetentionSizeInMB


@dataclass(frozen=True)
class ManagedLedgerConfig:
    """Per-ledger settings. Defaults follow Pulsar's broker.conf."""

    max_entries_per_ledger: int = 50_000  # managedLedgerMaxEntriesPerLedger
    max_size_per_ledger_mb: int = 2048  # managedLedgerMaxSizePerLedgerMbytes
    max_ledger_rollover_time_minutes: int = 240  # managedLedgerMaxLedgerRolloverTimeMinutes
    min_ledger_rollover_time_minutes: int = 10  # managedLedgerMinLedgerRolloverTimeMinutes
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    # Cursor state (mark-delete, individually deleted ranges) is persisted at most this
    # late for ordinary acks. Pulsar throttles with managedLedgerDefaultMarkDeleteRateLimit
    # (1 per second); we express it as an interval.
    cursor_persist_interval_ms: int = 1000
    # Individually deleted ranges a cursor writes, those nearest mark-delete; the rest
    # live in memory only and are redelivered after a restart
    # (managedLedgerMaxUnackedRangesToPersist).
    max_unacked_ranges_to_persist: int = 10_000
    # Batch ack sets a cursor writes, those nearest mark-delete, at most this many
    # (managedLedgerMaxBatchDeletedIndexToPersist) and at most this many bytes of
    # ack-set words, 8 per word (managedLedgerMaxBatchDeletedIndexBytesToPersist): a
    # client's ack sets cannot grow the metadata store beyond that per subscription.
    max_batch_deleted_index_to_persist: int = 10_000
    max_batch_deleted_index_bytes_to_persist: int = 1_048_576


@dataclass(frozen=True)
class LedgerInfo:
    """One ledger of a managed ledger, as shown by internal stats."""

    ledger_id: int
    entries: int
    size: int
    timestamp_ms: int  # creation time (wall clock)


@runtime_checkable
class ManagedCursor(Protocol):
    """A subscription's (or reader's) position in a managed ledger.

    A cursor tracks: the mark-delete position (every entry at or before it is
    acknowledged), individually deleted entries after it, batch-index ack sets for
    partially acknowledged batch entries, and the read position (the next entry
    ``read_entries`` returns). Deleted entries are never returned by ``read_entries``.
    """

    @property
    def name(self) -> str: ...

    @property
    def durable(self) -> bool: ...

    @property
    def mark_delete_position(self) -> Position: ...

    @property
    def read_position(self) -> Position: ...

    @property
    def properties(self) -> dict[str, int]: ...

    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        """Acknowledged ranges after mark-delete, as inclusive ``(first, last)`` pairs."""
        ...

    def is_acknowledged(self, position: Position) -> bool:
        """True if ``position`` is at/before mark-delete or individually deleted."""
        ...

    async def read_entries(self, max_entries: int) -> list[Entry]:
        """Read up to ``max_entries`` unacknowledged entries from the read position.

        Advances the read position past what it returns. Returns ``[]`` when the read
        position has caught up with the last confirmed entry.
        """
        ...

    def has_more_entries(self) -> bool:
        """True if an entry exists at or after the read position."""
        ...

    def seek(self, read_position: Position) -> None:
        """Move the read position (does not change acknowledgements)."""
        ...

    def rewind(self) -> None:
        """Move the read position back to the first unacknowledged entry."""
        ...

    def delete(self, positions: Iterable[Position]) -> None:
        """Acknowledge individual entries; mark-delete advances over contiguous runs."""
        ...

    def mark_delete(self, position: Position, properties: dict[str, int] | None = None) -> None:
        """Acknowledge every entry at or before ``position`` (cumulative ack)."""
        ...

    def set_batch_ack(self, position: Position, ack_set: Sequence[int]) -> None:
        """Record a batch entry's remaining-unacked bitset (1 = not yet acked)."""
        ...

    def batch_ack_set(self, position: Position) -> list[int] | None:
        """The remaining-unacked bitset of a partially acked batch entry, if any."""
        ...

    def reset(self, position: Position) -> None:
        """Reset so ``position`` is the next entry delivered; forget acks at/after it."""
        ...

    async def flush(self) -> None:
        """Persist the cursor state now and wait until it is durable."""
        ...

    def backlog(self) -> int:
        """Number of entries after mark-delete that are not individually deleted."""
        ...


def resolve_append(
    fut: asyncio.Future[Position], position: Position | None, exc: BaseException | None
) -> None:
    """An ``append_entry`` callback's outcome into a future (its owner may have dropped
    or cancelled it already)."""
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(position)  # type: ignore[arg-type]


@runtime_checkable
class ManagedLedger(Protocol):
    """An ordered, durable log of entries spread over a list of ledgers."""

    # Counters of appends and reads for the broker's stats and metrics.
    stats: ManagedLedgerStats

    @property
    def name(self) -> str: ...

    @property
    def last_confirmed_entry(self) -> Position:
        """The last durable entry; ``(current_ledger_id, -1)`` when there is none yet."""
        ...

    @property
    def first_position(self) -> Position:
        """The first retained entry (the position an earliest cursor reads first)."""
        ...

    @property
    def number_of_entries(self) -> int: ...

    @property
    def total_size(self) -> int: ...

    def ledgers(self) -> list[LedgerInfo]: ...

    def add_entry(self, data: bytes) -> asyncio.Future[Position]:
        """Append ``data``; the future resolves with its position once it is durable.

        Positions are assigned in call order, and futures resolve in that order.
        Raises ``ManagedLedgerClosed`` if closed; the future fails with
        ``PersistenceError``/``FatalStorageError`` on I/O failure.
        """
        ...

    def append_entry(
        self,
        data: bytes,
        callback: Callable[[Position | None, BaseException | None], None],
    ) -> None:
        """``add_entry`` without a future, for the publish hot path.

        ``callback(position, None)`` runs on the loop once the entry is durable, or
        ``callback(None, error)`` on failure; callbacks run in append order (a
        failure found at once, such as an earlier storage failure, may run before
        this returns). Raises like ``add_entry``.
        """
        ...

    async def read_entry(self, position: Position) -> Entry | None:
        """Read one entry, or ``None`` if it does not exist (deleted or never written)."""
        ...

    def read_entry_now(self, position: Position) -> Entry | None:
        """``read_entry`` without awaiting: entries come from the entry cache or a
        local file, so the read never waits for anything but the disk. For the rare
        caller on a synchronous path (checking an acknowledgement against its entry).
        """
        ...

    async def read_entries(self, start: Position, max_entries: int) -> list[Entry]:
        """Read entries at or after ``start``, in order, up to the last confirmed one."""
        ...

    def next_position(self, position: Position) -> Position:
        """The position right after ``position`` (crossing ledger boundaries)."""
        ...

    def previous_position(self, position: Position) -> Position:
        """The position right before ``position`` (crossing ledger boundaries)."""
        ...

    def count_entries(self, first: Position, last: Position) -> int:
        """Number of retained entries in the inclusive range ``[first, last]``."""
        ...

    def open_cursor(
        self, name: str, initial_position: int = InitialPosition.LATEST
    ) -> ManagedCursor:
        """Open (or recover) a durable cursor."""
        ...

    def new_non_durable_cursor(self, start: Position, name: str = "") -> ManagedCursor:
        """A cursor whose next entry is ``start`` (``EARLIEST``/``LATEST`` allowed)."""
        ...

    def delete_cursor(self, name: str) -> None: ...

    def cursors(self) -> dict[str, ManagedCursor]: ...

    def add_ledger_deleted_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(ledger_id)`` after a ledger is deleted (trimmed)."""
        ...

    async def trim_consumed_ledgers(self) -> list[int]:
        """Delete ledgers every cursor has passed, as retention allows; return their ids."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class ManagedLedgerFactory(Protocol):
    """Opens managed ledgers by name (a topic's persistence name)."""

    async def open(
        self, name: str, config: ManagedLedgerConfig | None = None
    ) -> ManagedLedger: ...

    async def delete(self, name: str) -> None:
        """Delete a managed ledger with all its ledgers and cursors."""
        ...

    def exists(self, name: str) -> bool: ...

    def list_names(self) -> list[str]: ...

    async def close(self) -> None: ...


class Versioned(NamedTuple):
    value: bytes
    version: int


@runtime_checkable
class MetadataStore(Protocol):
    """Versioned key/value store; keys are ``/``-separated paths.

    Writes are durable when they return. ``expected_version=-1`` means "must not
    exist"; ``None`` means "any". A mismatch raises ``BadVersion``.
    """

    def get(self, path: str) -> Versioned | None: ...

    def put(self, path: str, value: bytes, expected_version: int | None = None) -> int:
        """Write ``value``; returns the new version (0 for a new key)."""
        ...

    def delete(self, path: str, expected_version: int | None = None) -> None:
        """Delete a key; raises ``NotFound`` if absent."""
        ...

    def delete_recursive(self, path: str) -> None: ...

    def children(self, path: str) -> list[str]:
        """Names (not full paths) of the direct children of ``path``, sorted."""
        ...

    def close(self) -> None: ...
