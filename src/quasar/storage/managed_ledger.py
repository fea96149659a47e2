"""``ManagedLedgerImpl``: an ordered, durable log spread over a list of ledgers.

Shared by the file and memory implementations; entry bytes go through a
``LedgerStorage``. Everything here runs on the event loop thread.

Lifecycle of a ledger:

1. created: id from the global counter, storage created durably, then added to the
   ledger list in the metadata store (so the list never names a missing ledger);
2. current: ``add_entry`` assigns positions synchronously, in call order; storage
   confirms them in the same order and the last-confirmed entry advances;
3. sealed at rollover (entries/size/age) or close; once its last entry is confirmed
   it is "closed" in the metadata with its final length;
4. trimmed when every durable cursor has passed it and retention allows: removed
   from the metadata first, then its data is deleted, then listeners are told.

On open, ledgers not closed in the metadata are recovered (scanned, torn tail
dropped), empty ones are deleted, and a new ledger is created for appends, as Pulsar
does after a broker restart.

A full disk (``StorageFullError``) does not fence the managed ledger the way other
append failures do: the storage has cut the refused records off, so the ledger is
sealed at its last durable entry (the positions handed out after it are given up and
never reused) and the next append creates a new ledger, as Pulsar does after a failed
bookie write. Until space is freed that creation fails too, with a retryable error;
afterwards appends succeed without a restart.

Fencing (``fence_on_open``: brokers sharing ledger storage). The topic's new owner
opens the managed ledger with every ledger not closed in the metadata fenced
(``LedgerStorage.fence_ledger``) before its length is read, then records those
ledgers closed, with that length, in one compare-and-set of the ledger list on the
version it loaded. An append of the previous owner that the fence catches fails
with ``LedgerFencedError``: the managed ledger is then fenced for good, refuses every
later append, and writes nothing more to the metadata (no cursor state, no ledger
list), since the metadata is the new owner's now.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from functools import partial
from itertools import count
from weakref import WeakSet

from quasar.clock import Clock
from quasar.errors import (
    LedgerFencedError,
    ManagedLedgerClosed,
    PersistenceError,
    QuasarError,
    StorageFullError,
)
from quasar.storage.api import (
    EARLIEST,
    LATEST,
    Entry,
    InitialPosition,
    LedgerInfo,
    ManagedLedgerConfig,
    MetadataStore,
    Position,
    new_position,
    resolve_append,
)
from quasar.storage.cursor import ManagedCursorImpl
from quasar.storage.ledger_list import LedgerList, LedgerState
from quasar.storage.ledger_metadata import LedgerMetadata, restore_ledger
from quasar.storage.ledger_policy import ledgers_to_trim, should_rollover
from quasar.storage.ledger_stats import ManagedLedgerStats
from quasar.storage.ledger_storage import LedgerStorage
from quasar.storage.metadata.background import BackgroundMetadataWriter

log = logging.getLogger(__name__)

_non_durable_ids = count(1)


class ManagedLedgerImpl:
    """Implements ``quasar.storage.api.ManagedLedger``."""

    def __init__(
        self,
        name: str,
        config: ManagedLedgerConfig,
        *,
        storage: LedgerStorage,
        metadata: MetadataStore,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
        allocate_ledger_id: Callable[[], int],
        on_closed: Callable[[ManagedLedgerImpl], None],
        metadata_writer: BackgroundMetadataWriter | None = None,
        fence_on_open: bool = False,
    ) -> None:
        """``fence_on_open``: other brokers may have written this managed ledger;
        fence its unclosed ledgers when opening it."""
        self._name = name
        self._fence_on_open = fence_on_open
        self.config = config
        self._storage = storage
        self._clock = clock
        self.loop = loop
        self._allocate_ledger_id = allocate_ledger_id
        self._on_closed = on_closed
        self._meta = LedgerMetadata(metadata, name)
        self._metadata_writer = metadata_writer or BackgroundMetadataWriter(
            metadata, inline=True
        )
        self._ledgers = LedgerList()
        self._lac = Position(-1, -1)
        self._cursors: dict[str, ManagedCursorImpl] = {}
        self._non_durable: WeakSet[ManagedCursorImpl] = WeakSet()
        self._listeners: list[Callable[[int], None]] = []
        self._open = False
        self._failure: BaseException | None = None  # first failed append fences appends
        self._needs_ledger = False  # the current ledger was sealed after a full disk
        self._fenced: LedgerFencedError | None = None  # another broker fenced us
        self._pending_adds = 0
        self._idle: asyncio.Future[None] | None = None
        self.stats = ManagedLedgerStats()

    # ------------------------------------------------------------------ open / recovery

    def initialize(self) -> None:
        """Load (or create) the ledger list, recover unclosed ledgers, load cursors.

        Raises:
            CorruptRecordError: a ledger is damaged in the middle.
            MetadataError: the metadata is unreadable.
        """
        empty: list[int] = []
        try:
            for rec in self._meta.load_ledgers():
                state = restore_ledger(
                    rec, self._storage, self._clock, self._name, fence=self._fence_on_open
                )
                if state.entries == 0:
                    # Dropped below, once the list without it has been saved.
                    empty.append(state.ledger_id)
                else:
                    self._ledgers.append(state)
            self._create_ledger()  # also persists the recovered list
        except BaseException:
            for state in self._ledgers:
                self._storage.release_ledger(state.ledger_id)
            for ledger_id in empty:
                self._storage.release_ledger(ledger_id)
            raise
        for ledger_id in empty:
            self._storage.delete_ledger(ledger_id)
        self._lac = Position(self._ledgers.last.ledger_id, -1)
        self._open = True
        for name, cursor_rec, version in self._meta.load_cursors():
            self._cursors[name] = ManagedCursorImpl(
                self,
                name,
                durable=True,
                mark_delete=cursor_rec.mark_delete,
                read_position=self.next_position(cursor_rec.mark_delete),
                record=cursor_rec,
                metadata_version=version,
            )

    def _persist_info(self) -> None:
        self._meta.save_ledgers(self._ledgers)

    @property
    def fenced(self) -> bool:
        """True once another broker fenced this managed ledger's ledger."""
        return self._check_fenced() is not None

    def _check_fenced(self) -> LedgerFencedError | None:
        """The fence, if another broker put one on the current ledger: learnt from an
        append, or looked up (one ``stat``) before a metadata write."""
        if self._fenced is None and self._fence_on_open and self._ledgers:
            ledger_id = self._ledgers.last.ledger_id
            if self._storage.is_fenced(ledger_id):
                self._fenced = LedgerFencedError(
                    f"managed ledger {self._name}: ledger {ledger_id} was fenced by "
                    "the topic's new owner"
                )
                self._failure = self._failure or self._fenced
        return self._fenced

    def put_cursor(self, cursor_name: str, data: bytes, version: int | None) -> int:
        """Write a cursor's state; returns the new metadata version.

        Raises:
            LedgerFencedError: another broker owns the managed ledger now.
        """
        fenced = self._check_fenced()
        if fenced is not None:
            raise fenced
        return self._meta.put_cursor(cursor_name, data, version)

    def put_cursor_in_background(
        self, cursor_name: str, data: bytes, version: int
    ) -> concurrent.futures.Future[int]:
        """Write a cursor's state off the event loop (``version`` -1: must not exist
        yet); the future holds the new metadata version or the failure. Writes
        complete in call order. Fails with ``LedgerFencedError`` once another
        broker owns the managed ledger."""
        fenced = self._check_fenced()
        if fenced is not None:
            refused: concurrent.futures.Future[int] = concurrent.futures.Future()
            refused.set_exception(fenced)
            return refused
        return self._metadata_writer.put(self._meta.cursor_path(cursor_name), data, version)

    # ------------------------------------------------------------------ ledgers

    def _create_ledger(self) -> None:
        ledger_id = self._allocate_ledger_id()
        self._storage.create_ledger(ledger_id)
        state = LedgerState(
            ledger_id, self._clock.wall_ms(), created_mono_ms=self._clock.monotonic_ms()
        )
        self._ledgers.append(state)
        try:
            self._persist_info()
        except BaseException:
            self._ledgers.remove(ledger_id)
            self._storage.delete_ledger(ledger_id)
            raise

    def _rollover(self) -> None:
        old = self._ledgers.last
        old.sealed = True
        old.closed_at_ms = self._clock.wall_ms()
        try:
            self._create_ledger()
        except BaseException:
            old.sealed = False
            raise
        self._storage.seal_ledger(old.ledger_id)

    def _ledger_completed(self, state: LedgerState) -> None:
        """A sealed ledger's last entry is durable: record its final length."""
        try:
            self._persist_info()
        except Exception as exc:
            # Harmless: the ledger stays "not closed" and is rescanned on open. A
            # retryable failure (a full disk) is expected and counted where it
            # happened, so it gets no traceback.
            if isinstance(exc, QuasarError) and exc.retryable:
                log.warning(
                    "%s: ledger %d stays open in the metadata, rescanned on open: %s",
                    self._name,
                    state.ledger_id,
                    exc,
                )
                return
            log.exception(
                "%s: failed to record ledger %d as closed", self._name, state.ledger_id
            )

    # ------------------------------------------------------------------ appends

    def add_entry(self, data: bytes) -> asyncio.Future[Position]:
        """Append ``data``; the future resolves with its position once durable.

        Raises:
            ManagedLedgerClosed: the managed ledger is closed.
            ValueError: the entry is larger than the storage accepts.
        """
        fut: asyncio.Future[Position] = self.loop.create_future()
        self.append_entry(data, partial(resolve_append, fut))
        return fut

    def append_entry(self, data: bytes, callback: AppendCallback) -> None:
        """``add_entry`` with ``callback(position, error)`` instead of a future.

        Raises:
            ManagedLedgerClosed: the managed ledger is closed.
            ValueError: the entry is larger than the storage accepts.
        """
        if not self._open:
            raise ManagedLedgerClosed(f"managed ledger {self._name} is closed")
        if self._failure is not None:
            callback(None, self._failure)
            return
        payload = data if type(data) is bytes else bytes(data)
        # One clock reading per entry serves the rollover check and the add latency.
        now_ms = self._clock.monotonic_ms()
        if self._needs_ledger:
            try:
                self._create_ledger()
            except QuasarError as exc:
                callback(None, exc)
                return
            except OSError as exc:
                callback(None, PersistenceError(f"cannot create ledger: {exc}"))
                return
            self._needs_ledger = False
        elif should_rollover(self._ledgers.last, self.config, now_ms):
            try:
                self._rollover()
            except QuasarError as exc:
                callback(None, exc)
                return
            except OSError as exc:
                callback(None, PersistenceError(f"cannot create ledger: {exc}"))
                return
        current = self._ledgers.last
        entry_id = current.assigned
        size = len(payload)
        done = partial(self._add_done, current, entry_id, size, now_ms, callback)
        # Storage first: if it refuses the entry (too large), nothing was assigned.
        self._storage.append(current.ledger_id, entry_id, payload, self, done)
        current.assigned = entry_id + 1
        current.assigned_size += size
        self._pending_adds += 1

    def _add_done(
        self,
        state: LedgerState,
        entry_id: int,
        size: int,
        started_ms: float,
        callback: AppendCallback,
        exc: BaseException | None,
    ) -> None:
        self._pending_adds -= 1
        if exc is None and self._fenced is not None:
            # Completed after this owner learnt of the fence: the new owner may or may
            # not have counted the entry, so it is not acknowledged (the client
            # resends it to the new owner).
            exc = self._fenced
        if exc is not None:
            self.stats.add_entry_errors += 1
            if isinstance(exc, LedgerFencedError) and self._fenced is None:
                log.warning("%s: %s; it takes no more writes", self._name, exc)
                self._fenced = exc
            if isinstance(exc, StorageFullError):
                self._give_up_unwritten(state)
            elif self._failure is None:
                self._failure = exc
            callback(None, exc)
        else:
            assert self._failure is None, (
                "an append succeeded after an earlier one failed"
            )
            self._ledgers.confirm(state, size)
            self.stats.entry_added(size, self._clock.monotonic_ms() - started_ms)
            position = self._lac = new_position((state.ledger_id, entry_id))
            try:
                callback(position, None)
            except Exception:
                log.exception("%s: append callback failed", self._name)
            # ``sealed`` first: a plain attribute, false for nearly every entry.
            if state.sealed and state.complete and state is not self._ledgers.last:
                self._ledger_completed(state)
        if self._pending_adds == 0 and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def _give_up_unwritten(self, state: LedgerState) -> None:
        """The storage refused ``state``'s records from its next unconfirmed one on
        (full disk): seal it where it is durable; the next append opens a new ledger."""
        if state.assigned == state.entries:
            return  # a later record of a ledger already given up
        state.assigned = state.entries
        state.assigned_size = state.size
        if state is self._ledgers.last and not state.sealed:
            state.sealed = True
            state.closed_at_ms = self._clock.wall_ms()
            self._storage.seal_ledger(state.ledger_id)
            self._needs_ledger = True
        if state.complete:
            self._ledger_completed(state)

    async def _wait_for_pending_adds(self) -> None:
        if self._pending_adds:
            self._idle = self.loop.create_future()
            await self._idle

    # ------------------------------------------------------------------ reads

    @property
    def name(self) -> str:
        return self._name

    @property
    def last_confirmed_entry(self) -> Position:
        return self._lac

    @property
    def first_position(self) -> Position:
        return self._ledgers.first_position()

    @property
    def number_of_entries(self) -> int:
        return self._ledgers.number_of_entries

    @property
    def total_size(self) -> int:
        return self._ledgers.total_size

    def ledgers(self) -> list[LedgerInfo]:
        return [s.info() for s in self._ledgers]

    def is_confirmed(self, position: Position) -> bool:
        """True if ``position`` is a retained, durable entry."""
        state = self._ledgers.get(position.ledger_id)
        return state is not None and 0 <= position.entry_id < state.entries

    def first_at_or_after(self, position: Position) -> Position | None:
        return self._ledgers.first_at_or_after(position)

    def next_position(self, position: Position) -> Position:
        return self._ledgers.next_position(position)

    def previous_position(self, position: Position) -> Position:
        return self._ledgers.previous_position(position)

    def count_entries(self, first: Position, last: Position) -> int:
        return self._ledgers.count_entries(first, last)

    def read_positions(self, positions: list[Position]) -> list[Entry]:
        """Read confirmed entries by position (missing ones are skipped)."""
        out: list[Entry] = []
        size = 0
        for pos in positions:
            if self.is_confirmed(pos):
                data = self._storage.read(pos.ledger_id, pos.entry_id)
                if data is not None:
                    out.append(Entry(pos, data))
                    size += len(data)
        self.stats.entries_were_read(len(out), size)
        return out

    def read_run(self, start: Position, max_entries: int) -> list[Entry] | None:
        """The confirmed entries from ``start`` on, when they are one contiguous run of
        ``start``'s ledger: up to ``max_entries``, stopping early only at the end of
        the last ledger. None when that does not hold (``start`` not in a retained
        ledger, or the run would cross into a later ledger): use the general read.

        Raises:
            CorruptRecordError: a stored record fails its checksum.
        """
        state = self._ledgers.get(start.ledger_id)
        first = start.entry_id
        if state is None or first < 0:
            return None
        end = first + max_entries
        if end > state.entries:
            if state is not self._ledgers.last:
                return None
            end = state.entries
        ledger_id = start.ledger_id
        read = self._storage.read
        out: list[Entry] = []
        size = 0
        for entry_id in range(first, end):
            data = read(ledger_id, entry_id)
            if data is None:
                return None
            out.append(Entry(new_position((ledger_id, entry_id)), data))
            size += len(data)
        self.stats.entries_were_read(len(out), size)
        return out

    async def read_entry(self, position: Position) -> Entry | None:
        """Read one entry, or ``None`` if it does not exist.

        Raises:
            ManagedLedgerClosed: the managed ledger is closed.
            CorruptRecordError: the stored record fails its checksum.
        """
        return self.read_entry_now(position)

    def read_entry_now(self, position: Position) -> Entry | None:
        """``read_entry`` without awaiting (the read itself never waits).

        Raises:
            ManagedLedgerClosed: the managed ledger is closed.
            CorruptRecordError: the stored record fails its checksum.
        """
        self.check_open()
        found = self.read_positions([position])
        return found[0] if found else None

    async def read_entries(self, start: Position, max_entries: int) -> list[Entry]:
        """Read up to ``max_entries`` confirmed entries at or after ``start``.

        Raises:
            ManagedLedgerClosed: the managed ledger is closed.
            CorruptRecordError: a stored record fails its checksum.
        """
        self.check_open()
        positions: list[Position] = []
        pos = self._ledgers.first_at_or_after(start)
        while pos is not None and len(positions) < max_entries:
            positions.append(pos)
            pos = self._ledgers.first_at_or_after(
                Position(pos.ledger_id, pos.entry_id + 1)
            )
        return self.read_positions(positions)

    # ------------------------------------------------------------------ cursors

    def open_cursor(
        self, name: str, initial_position: int = InitialPosition.LATEST
    ) -> ManagedCursorImpl:
        """Open (or recover) a durable cursor; a new one is persisted before returning.

        Raises:
            ManagedLedgerClosed: the managed ledger is closed.
            MetadataError: the cursor could not be persisted.
        """
        self.check_open()
        existing = self._cursors.get(name)
        if existing is not None:
            return existing
        start = EARLIEST if initial_position == InitialPosition.EARLIEST else LATEST
        cursor = self._new_cursor(name, start, durable=True)
        cursor.persist()  # exists after a crash from now on
        self._cursors[name] = cursor
        return cursor

    def new_non_durable_cursor(
        self, start: Position, name: str = ""
    ) -> ManagedCursorImpl:
        """A cursor whose next entry is ``start``; never persisted, never holds data."""
        self.check_open()
        name = name or f"non-durable-{next(_non_durable_ids)}"
        cursor = self._new_cursor(name, start, durable=False)
        self._non_durable.add(cursor)
        return cursor

    def _new_cursor(
        self, name: str, start: Position, *, durable: bool
    ) -> ManagedCursorImpl:
        if start == LATEST:
            mark_delete = self._lac
            read = self.next_position(self._lac)
        else:
            read = self.first_position if start == EARLIEST else start
            mark_delete = min(self.previous_position(read), self._lac)
        return ManagedCursorImpl(
            self, name, durable=durable, mark_delete=mark_delete, read_position=read
        )

    def delete_cursor(self, name: str) -> None:
        """Delete a durable cursor and its persisted state (unknown names: no-op).

        Raises:
            MetadataError: the persisted state could not be removed.
        """
        cursor = self._cursors.pop(name, None)
        if cursor is None:
            # A reader's non-durable cursor: it stops counting as an open reader now,
            # not when a garbage collection drops it from the weak set.
            for reader in [c for c in self._non_durable if c.name == name]:
                reader.discard()
                self._non_durable.discard(reader)
            return
        cursor.close()
        self._meta.delete_cursor(name)

    def cursors(self) -> dict[str, ManagedCursorImpl]:
        """The durable cursors by name (non-durable cursors are not listed)."""
        return dict(self._cursors)

    # ------------------------------------------------------------------ trimming

    def add_ledger_deleted_listener(self, listener: Callable[[int], None]) -> None:
        self._listeners.append(listener)

    async def trim_consumed_ledgers(self) -> list[int]:
        """Delete ledgers every durable cursor has passed, as retention allows.

        Raises:
            ManagedLedgerClosed: the managed ledger is closed.
            MetadataError: the ledger list could not be updated (nothing deleted).
        """
        self.check_open()
        if self._cursors:
            boundary = min(
                self.next_position(c.mark_delete_position).ledger_id
                for c in self._cursors.values()
            )
        else:
            boundary = self._ledgers.last.ledger_id
        doomed = ledgers_to_trim(
            self._ledgers.all(),
            boundary,
            self._ledgers.total_size,
            self.config.retention,
            self._clock.wall_ms(),
            keep_last_with_entries=any(not c.closed for c in self._non_durable),
        )
        if not doomed:
            return []
        removed = [self._ledgers.remove(s.ledger_id) for s in doomed]
        try:
            self._persist_info()
        except BaseException:
            for state in removed:  # restore the list: nothing was deleted
                self._ledgers.insert(state)
            raise
        first_retained = self._ledgers.first_position()
        # Every cursor behind the trim moves to the first retained entry, as in
        # Pulsar: readers (non-durable cursors, which do not hold trimming back)
        # skip what was deleted, and a durable cursor whose mark-delete was the last
        # entry of a deleted ledger no longer points into it.
        for cursor in [*self._non_durable, *self._cursors.values()]:
            cursor.trimmed_before(first_retained)
        ids = [s.ledger_id for s in removed]
        for ledger_id in ids:
            self._storage.delete_ledger(ledger_id)
            for listener in self._listeners:
                try:
                    listener(ledger_id)
                except Exception:
                    log.exception("%s: ledger-deleted listener failed", self._name)
        return ids

    # ------------------------------------------------------------------ close / delete

    def check_open(self) -> None:
        """Raises ``ManagedLedgerClosed`` unless the managed ledger is open."""
        if not self._open:
            raise ManagedLedgerClosed(f"managed ledger {self._name} is closed")

    async def close(self) -> None:
        """Wait for pending appends, persist cursors, record the current ledger closed."""
        if not self._open:
            return
        self._open = False
        await self._wait_for_pending_adds()
        for cursor in self._cursors.values():
            cursor.close()
        for cursor in list(self._non_durable):
            cursor.close()
        current = self._ledgers.last
        current.sealed = True
        current.closed_at_ms = self._clock.wall_ms()
        self._storage.seal_ledger(current.ledger_id)
        empty = current.assigned == 0
        if self._check_fenced() is not None:
            # The new owner closed our ledgers in the metadata; touch nothing there.
            log.info("%s: closed after being fenced; the metadata is left to the new "
                     "owner", self._name)
            self._release_ledgers()
            return
        try:
            if empty:
                # Nothing was written since open: drop the ledger rather than leave
                # one empty ledger behind per restart (metadata first, then data).
                self._meta.save_ledgers(self._ledgers.all()[:-1])
                self._storage.delete_ledger(current.ledger_id)
            else:
                self._persist_info()
        except Exception:
            log.exception("%s: failed to record ledgers on close", self._name)
        self._release_ledgers()

    def _release_ledgers(self) -> None:
        for state in self._ledgers:
            self._storage.release_ledger(state.ledger_id)
        self._on_closed(self)

    async def delete(self) -> None:
        """Close and delete everything: metadata first, then ledger data.

        Raises:
            MetadataError: the metadata could not be removed.
        """
        if self._open:
            self._open = False
            await self._wait_for_pending_adds()
            for cursor in [*self._cursors.values(), *self._non_durable]:
                cursor.discard()
            self._on_closed(self)
        self._meta.delete_all()
        for state in self._ledgers:
            self._storage.delete_ledger(state.ledger_id)
        self._cursors.clear()

    def __repr__(self) -> str:
        return f"ManagedLedgerImpl({self._name}, lac={self._lac}, ledgers={len(self._ledgers)})"


AppendCallback = Callable[[Position | None, BaseException | None], None]


