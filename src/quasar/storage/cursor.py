"""``ManagedCursorImpl``: a subscription's (or reader's) position in a managed ledger.

State, as in Pulsar's ManagedCursorImpl:

* ``mark_delete``: every entry at or before it is acknowledged;
* individually deleted ranges after it (``PositionRangeSet``); in-order
  acknowledgement only moves mark-delete and never builds ranges;
* batch-index ack sets for partially acknowledged batch entries;
* properties attached by cumulative acks;
* the read position: a lower bound, ``read_entries`` returns the first
  unacknowledged entries at or after it.

Persistence (durable cursors only). A change marks the cursor dirty and arms one
timer of ``cursor_persist_interval_ms`` on the event loop; when it fires, the whole
state is written to the metadata store. ``flush()`` and ``close()`` write at once.
Timer and ``flush()`` writes run on the metadata-writer thread (the loop does not wait
for SQLite's fsync), one per cursor at a time so versions stay in order; ``close()``
and the first write of a new cursor are synchronous.
After a crash a subscription therefore redelivers at most what was acknowledged in
the last interval, never less than the persisted mark-delete.

At most ``max_unacked_ranges_to_persist`` ranges (the ledger config's; Pulsar's
``managedLedgerMaxUnackedRangesToPersist``) are written, and at most
``max_batch_deleted_index_to_persist`` batch ack sets holding at most
``max_batch_deleted_index_bytes_to_persist`` bytes of words: those nearest mark-delete.
Ack sets come from clients, so the byte bound is what keeps one subscription's row in
the metadata store small whatever they send. Acknowledgements in ranges past that bound live
in memory only, so after a restart those entries are delivered again; that is
redelivery, never loss, and the in-memory state stays exact while the process runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

from quasar.errors import ManagedLedgerClosed
from quasar.storage.api import EARLIEST, LATEST, Entry, ManagedLedgerConfig, Position
from quasar.storage.codec import CursorRecord, encode_cursor
from quasar.storage.ranges import PositionRangeSet

log = logging.getLogger(__name__)


class CursorLedger(Protocol):
    """What a cursor reads of and writes through its managed ledger.

    ``ManagedLedgerImpl`` provides it; naming it here keeps the cursor below the ledger
    that owns it.
    """

    config: ManagedLedgerConfig
    loop: asyncio.AbstractEventLoop

    @property
    def name(self) -> str: ...
    @property
    def last_confirmed_entry(self) -> Position: ...
    @property
    def first_position(self) -> Position: ...
    def check_open(self) -> None: ...
    def is_confirmed(self, position: Position) -> bool: ...
    def first_at_or_after(self, position: Position) -> Position | None: ...
    def next_position(self, position: Position) -> Position: ...
    def previous_position(self, position: Position) -> Position: ...
    def count_entries(self, first: Position, last: Position) -> int: ...
    def read_run(self, start: Position, max_entries: int) -> list[Entry] | None: ...
    def read_positions(self, positions: list[Position]) -> list[Entry]: ...
    def put_cursor(self, cursor_name: str, data: bytes, version: int | None) -> int: ...
    def put_cursor_in_background(
        self, cursor_name: str, data: bytes, version: int
    ) -> concurrent.futures.Future[int]: ...


class ManagedCursorImpl:
    """Implements ``quasar.storage.api.ManagedCursor`` for both storage backends."""

    def __init__(
        self,
        ledger: CursorLedger,
        name: str,
        *,
        durable: bool,
        mark_delete: Position,
        read_position: Position,
        record: CursorRecord | None = None,
        metadata_version: int | None = None,
    ) -> None:
        self._ml = ledger
        self._name = name
        self._durable = durable
        self._md = mark_delete
        self._read = read_position
        self._ranges = PositionRangeSet()
        self._batch: dict[Position, list[int]] = {}
        self._props: dict[str, int] = {}
        if record is not None:
            self._props = dict(record.properties)
            for lid, first, last in record.ranges:
                self._ranges.add_range(lid, first, last)
            for pos, bits in record.batch:
                self._batch[pos] = bits
        self._version = metadata_version  # None: never written to the metadata store
        self._dirty = False
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._flush_waiters: list[asyncio.Future[None]] | None = None
        # The background write in flight (at most one, so versions stay in order).
        self._in_flight: concurrent.futures.Future[int] | None = None
        self._closed = False

    # ------------------------------------------------------------------ properties

    @property
    def name(self) -> str:
        return self._name

    @property
    def durable(self) -> bool:
        return self._durable

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def mark_delete_position(self) -> Position:
        return self._md

    @property
    def read_position(self) -> Position:
        return self._read

    @property
    def properties(self) -> dict[str, int]:
        return dict(self._props)

    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        return self._ranges.as_pairs()

    def is_acknowledged(self, position: Position) -> bool:
        return position <= self._md or position in self._ranges

    def batch_ack_set(self, position: Position) -> list[int] | None:
        bits = self._batch.get(position)
        return None if bits is None else list(bits)

    def backlog(self) -> int:
        """Entries after mark-delete that are not individually deleted."""
        after_md = Position(self._md.ledger_id, self._md.entry_id + 1)
        total = self._ml.count_entries(after_md, self._ml.last_confirmed_entry)
        return max(total - self._ranges.count, 0)

    # ------------------------------------------------------------------ reading

    async def read_entries(self, max_entries: int) -> list[Entry]:
        """Read up to ``max_entries`` unacknowledged entries from the read position.

        Raises:
            ManagedLedgerClosed: the managed ledger (or this cursor) is closed.
            CorruptRecordError: a stored entry fails its checksum.
        """
        self._check_open()
        if max_entries <= 0:
            return []
        ml = self._ml
        start = max(self._read, Position(self._md.ledger_id, self._md.entry_id + 1))
        if not self._ranges:
            # Nothing acknowledged individually beyond mark-delete (in-order acks):
            # the next entries are one contiguous run of a ledger, read in one go.
            run = ml.read_run(start, max_entries)
            if run is not None:
                if run:
                    self._read = ml.next_position(run[-1].position)
                return run
        pos = ml.first_at_or_after(start)
        wanted: list[Position] = []
        last_seen: Position | None = None
        while pos is not None and len(wanted) < max_entries:
            acked = self._ranges.range_containing(pos)
            if acked is not None:
                # Jump over the whole acknowledged range without touching its entries.
                last_seen = Position(acked[0], acked[2])
            else:
                wanted.append(pos)
                last_seen = pos
            pos = ml.first_at_or_after(
                Position(last_seen.ledger_id, last_seen.entry_id + 1)
            )
        if last_seen is not None:
            self._read = ml.next_position(last_seen)
        return ml.read_positions(wanted)

    def has_more_entries(self) -> bool:
        start = max(self._read, Position(self._md.ledger_id, self._md.entry_id + 1))
        return self._ml.first_at_or_after(start) is not None

    def seek(self, read_position: Position) -> None:
        self._check_open()
        self._read = self._resolve(read_position)

    def rewind(self) -> None:
        self._check_open()
        self._read = self._ml.next_position(self._md)

    # ------------------------------------------------------------------ acknowledging

    def delete(self, positions: Iterable[Position]) -> None:
        """Acknowledge individual entries; mark-delete advances over contiguous runs.

        Positions that are not retained, confirmed entries (after the last confirmed
        entry, trimmed, never written) or already acknowledged are ignored: the
        positions come from clients, and acknowledging nothing is harmless.

        Raises:
            ManagedLedgerClosed: the cursor is closed.
        """
        self._check_open()
        changed = False
        ml = self._ml
        batch = self._batch
        for pos in positions:
            md = self._md
            if pos <= md or not ml.is_confirmed(pos):
                continue
            if batch:
                batch.pop(pos, None)
            if (pos[0] == md[0] and pos[1] == md[1] + 1) or pos == ml.next_position(md):
                self._md = pos  # in-order ack: no range needed
                changed = True
            elif self._ranges.add(pos):
                changed = True
        if changed:
            self._after_mark_delete_moved()
            self._changed()

    def mark_delete(
        self, position: Position, properties: dict[str, int] | None = None
    ) -> None:
        """Acknowledge every entry at or before ``position`` (cumulative ack).

        Ignored when ``position`` is before the current mark-delete (a late duplicate)
        or after the last confirmed entry (no such entry exists; Pulsar rejects it as
        an invalid mark-delete position).

        Raises:
            ManagedLedgerClosed: the cursor is closed.
        """
        self._check_open()
        if position > self._ml.last_confirmed_entry:
            log.debug(
                "%s: ignoring mark-delete past the last entry: %s", self, position
            )
            return
        if position < self._md:
            return
        if properties is not None:
            self._props = dict(properties)
        self._md = position
        self._after_mark_delete_moved()
        self._changed()

    def set_batch_ack(self, position: Position, ack_set: Sequence[int]) -> None:
        """Record a batch entry's remaining-unacked bitset (1 = not yet acked).

        An all-zero set means the whole batch is acknowledged: the entry is deleted.
        Positions that are acknowledged already or not a confirmed entry are ignored.

        Raises:
            ManagedLedgerClosed: the cursor is closed.
        """
        self._check_open()
        if self.is_acknowledged(position) or not self._ml.is_confirmed(position):
            return
        if not any(ack_set):
            self.delete([position])
            return
        self._batch[position] = list(ack_set)
        self._changed()

    def reset(self, position: Position) -> None:
        """Make ``position`` the next entry delivered; entries before it count as
        acknowledged and every acknowledgement at or after it is forgotten."""
        self._check_open()
        target = self._resolve(position)
        # Clamped to the last confirmed entry: entries not written yet can never be
        # acknowledged, even when the reset points past them.
        self._md = min(
            self._ml.previous_position(target), self._ml.last_confirmed_entry
        )
        self._ranges.clear()
        self._batch.clear()
        self._read = target
        self._changed()

    def _after_mark_delete_moved(self) -> None:
        ml = self._ml
        self._ranges.remove_through(self._md)
        # Absorb ranges that now continue mark-delete (possibly across ledgers).
        head = self._ranges.first()
        while head is not None and Position(head[0], head[1]) == ml.next_position(
            self._md
        ):
            self._ranges.pop_first()
            self._md = Position(head[0], head[2])
            head = self._ranges.first()
        if self._batch:
            for pos in [p for p in self._batch if p <= self._md]:
                del self._batch[pos]
        if self._read <= self._md:
            self._read = ml.next_position(self._md)

    def _resolve(self, position: Position) -> Position:
        if position == EARLIEST:
            return self._ml.first_position
        if position == LATEST:
            return self._ml.next_position(self._ml.last_confirmed_entry)
        return position

    def trimmed_before(self, first_retained: Position) -> None:
        """Ledgers before ``first_retained`` were deleted: move a lagging mark-delete up
        to just before it, and the read position with it.

        A non-durable cursor may lag anywhere (it does not hold trimming back); a
        durable one only by pointing at the last entry of a deleted ledger, and it
        persists the move.
        """
        floor = self._ml.previous_position(first_retained)
        if self._md < floor:
            self._md = floor
            self._after_mark_delete_moved()
            self._changed()

    # ------------------------------------------------------------------ persistence

    def _changed(self) -> None:
        if not self._durable or self._closed:
            return
        self._dirty = True
        if self._timer is None:
            interval_ms = self._ml.config.cursor_persist_interval_ms
            loop = self._ml.loop
            if interval_ms <= 0:
                self._timer = loop.call_soon(self._persist_from_timer)
            else:
                self._timer = loop.call_later(
                    interval_ms / 1000.0, self._persist_from_timer
                )

    def _persist_from_timer(self) -> None:
        self._timer = None
        if not self._dirty or self._closed:
            return
        if self._in_flight is not None:
            self._changed()  # one write at a time: try again after the interval
            return
        self._start_write([])

    def record(self) -> CursorRecord:
        """The state to persist (bounded, see the module docstring)."""
        config = self._ml.config
        ranges = self._ranges.head(config.max_unacked_ranges_to_persist)
        return CursorRecord(self._md, dict(self._props), ranges, self._batch_to_persist())

    def _batch_to_persist(self) -> list[tuple[Position, list[int]]]:
        """The batch ack sets nearest mark-delete within both persistence bounds."""
        config = self._ml.config
        count = config.max_batch_deleted_index_to_persist
        words_left = config.max_batch_deleted_index_bytes_to_persist // 8
        batch: list[tuple[Position, list[int]]] = []
        for position, bits in sorted(self._batch.items()):
            if len(batch) >= count or len(bits) > words_left:
                break  # the rest are redelivered whole after a restart
            words_left -= len(bits)
            batch.append((position, bits))
        return batch

    def persist(self) -> None:
        """Write the state to the metadata store now (durable when it returns).

        Waits (blocking) for a background write in flight first, so the versions of
        the cursor's writes stay in order.

        Raises:
            MetadataError, BadVersion: the write failed (BadVersion: another owner).
        """
        if not self._durable:
            return
        self._wait_in_flight()
        self._dirty = False
        try:
            self._version = self._ml.put_cursor(
                self._name, encode_cursor(self.record()), self._version
            )
        except BaseException:
            self._dirty = True
            raise

    async def flush(self) -> None:
        """Persist now if anything changed since the last write; durable on return.

        Raises:
            ManagedLedgerClosed: the cursor is closed.
            MetadataError, BadVersion: the write failed.
        """
        self._check_open()
        if not self._durable:
            return
        self._cancel_timer()
        if not (self._dirty or self._version is None or self._in_flight is not None):
            return
        # Callers that flush in the same loop iteration (every transaction committing
        # on this subscription at once) share one metadata write: each of them made
        # its change before asking, so the one write that runs next covers them all.
        # The write runs on the metadata writer's thread, so the loop goes on serving
        # while SQLite syncs; callers that ask while a write is in flight share the
        # next one (their change may have missed the one in flight).
        waiter = self._ml.loop.create_future()
        if self._flush_waiters is None:
            self._flush_waiters = []
            if self._in_flight is None:
                self._ml.loop.call_soon(self._flush_for_waiters)
        self._flush_waiters.append(waiter)
        await waiter

    def _flush_for_waiters(self) -> None:
        if self._in_flight is not None:
            return  # its completion serves the waiters
        waiters, self._flush_waiters = self._flush_waiters or [], None
        if not waiters:
            return
        if self._closed:
            # close() persisted whatever it could; only a failed final write is left.
            failure = None if not self._dirty else ManagedLedgerClosed(
                f"cursor {self._name} of {self._ml.name} closed before it was flushed"
            )
            _settle(waiters, failure)
        elif self._dirty or self._version is None:
            self._start_write(waiters)
        else:
            _settle(waiters, None)

    def _start_write(self, waiters: list[asyncio.Future[None]]) -> None:
        """Write the current state in the background; ``waiters`` learn the outcome."""
        self._dirty = False
        written = self._ml.put_cursor_in_background(
            self._name,
            encode_cursor(self.record()),
            -1 if self._version is None else self._version,
        )
        self._in_flight = written
        asyncio.wrap_future(written, loop=self._ml.loop).add_done_callback(
            lambda mirror: self._mirror_done(mirror, written, waiters)
        )

    def _mirror_done(
        self,
        mirror: asyncio.Future[int],
        written: concurrent.futures.Future[int],
        waiters: list[asyncio.Future[None]],
    ) -> None:
        # The outcome is read from ``written``; the loop's mirror of it is marked
        # retrieved too, or a failed write (a full disk) would also be logged as a
        # "Future exception was never retrieved" when the mirror is collected.
        if not mirror.cancelled():
            mirror.exception()
        self._write_done(written, waiters)

    def _write_done(
        self, written: concurrent.futures.Future[int], waiters: list[asyncio.Future[None]]
    ) -> None:
        if self._in_flight is written:
            self._in_flight = None
        failure = written.exception()
        if failure is None:
            self._note_version(written.result())
        else:
            # Stay dirty: the next change, flush() or close tries again. Acks are only
            # ever redelivered because of this, never lost.
            self._dirty = True
            if not waiters and not self._closed:  # closed: deleted or closed meanwhile
                log.error(
                    "failed to persist cursor %s of %s: %s", self._name, self._ml.name,
                    failure,
                )
        _settle(waiters, failure)
        if self._flush_waiters is not None:
            self._flush_for_waiters()

    def _wait_in_flight(self) -> None:
        """Block until the background write in flight (if any) has landed."""
        written, self._in_flight = self._in_flight, None
        if written is None:
            return
        try:
            self._note_version(written.result())
        except Exception:  # noqa: BLE001 - its completion reports it to its waiters
            self._dirty = True

    def _note_version(self, version: int) -> None:
        if self._version is None or version > self._version:
            self._version = version

    def close(self) -> None:
        """Persist pending changes (durable cursors) and stop the timer."""
        if self._closed:
            return
        self._cancel_timer()
        if self._durable and self._dirty:
            try:
                self.persist()
            except Exception:
                log.exception("failed to persist cursor %s on close", self._name)
        self._closed = True

    def discard(self) -> None:
        """Close without persisting (the managed ledger is being deleted)."""
        self._cancel_timer()
        self._closed = True

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check_open(self) -> None:
        if self._closed:
            raise ManagedLedgerClosed(
                f"cursor {self._name} of {self._ml.name} is closed"
            )
        self._ml.check_open()

    def __repr__(self) -> str:
        return (
            f"ManagedCursorImpl({self._ml.name}/{self._name}, md={self._md}, "
            f"read={self._read}, ranges={len(self._ranges)})"
        )


def _settle(waiters: list[asyncio.Future[None]], failure: BaseException | None) -> None:
    for waiter in waiters:
        if waiter.done():
            continue
        if failure is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(failure)
