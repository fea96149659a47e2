"""Topic compaction: running it, recording it durably, and reading its result.

A topic's compaction state is ``{horizon, generation}``: everything up to the horizon
is summarised (latest message per key) in the compacted ledger
``<persistence name>/__compaction/<generation>`` (format in ``compacted_ledger.py``,
algorithm in ``compactor.py``).

Durability. The state lives in the properties of a durable system cursor named
``__compaction`` on the topic's managed ledger, and that cursor's mark-delete is the
horizon: ledgers before it may then be trimmed, since the compacted ledger holds what
``read_compacted`` readers need from them. A compaction goes:

1. open the cursor (on the first run, at the earliest entry, so nothing not yet
   compacted can be trimmed meanwhile), fix the horizon (the last readable entry);
2. write the new generation's ledger completely;
3. move the cursor to the new horizon with the new properties and flush it: from
   this instant the new generation is the current one;
4. delete the previous generation.

A crash before 3 leaves the old generation current and a partial new one, which is
deleted when the topic loads (generation + 1); a crash between 3 and 4 leaves the
old one behind, also deleted on load (generation - 1).

At most one compaction runs per topic, as a task; its status is Pulsar's
LongRunningProcessStatus (``NOT_RUN``, ``RUNNING``, ``SUCCESS``, ``ERROR`` with the
last error), kept in memory like Pulsar does.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from quasar.clock import Clock, SystemClock
from quasar.errors import (
    ConflictError,
    CorruptRecordError,
    ManagedLedgerClosed,
    PersistenceError,
)
from quasar.protocol.topic_name import COMPACTION_CURSOR
from quasar.storage.api import (
    InitialPosition,
    ManagedLedger,
    ManagedLedgerFactory,
    Position,
)

from .compacted_ledger import CompactedLedger, CompactedRecord
from .compactor import TwoPhaseCompactor
from .entry_info import EntryInfo
from .input_bounds import InputBounds

log = logging.getLogger(__name__)

COMPACTED_LEDGER_SEGMENT = "/__compaction/"

# Cursor properties holding the state (cursor properties are integers).
PROP_GENERATION = "compactedLedgerGeneration"
PROP_HORIZON_LEDGER = "compactionHorizonLedgerId"
PROP_HORIZON_ENTRY = "compactionHorizonEntryId"


def compacted_ledger_prefix(persistence_name: str) -> str:
    """The prefix of every compacted-ledger name of a topic."""
    return persistence_name + COMPACTED_LEDGER_SEGMENT


def compacted_ledger_name(persistence_name: str, generation: int) -> str:
    return f"{compacted_ledger_prefix(persistence_name)}{generation}"


async def delete_compacted_ledgers(
    factory: ManagedLedgerFactory, persistence_name: str
) -> None:
    """Delete every compacted ledger of a topic (the topic is being deleted).

    Raises:
        MetadataError: the metadata store failed.
    """
    prefix = compacted_ledger_prefix(persistence_name)
    for name in factory.list_names():
        if name.startswith(prefix):
            await factory.delete(name)


class CompactionStatus(enum.Enum):
    NOT_RUN = "NOT_RUN"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


@dataclass(frozen=True)
class CompactionState:
    """The durable part: what the current compacted ledger covers."""

    horizon: Position
    generation: int

    def properties(self) -> dict[str, int]:
        return {
            PROP_GENERATION: self.generation,
            PROP_HORIZON_LEDGER: self.horizon.ledger_id,
            PROP_HORIZON_ENTRY: self.horizon.entry_id,
        }

    @classmethod
    def from_properties(cls, props: dict[str, int]) -> CompactionState | None:
        """The state recorded in the cursor, or None if no compaction completed."""
        if not {PROP_GENERATION, PROP_HORIZON_LEDGER, PROP_HORIZON_ENTRY} <= props.keys():
            return None
        horizon = Position(props[PROP_HORIZON_LEDGER], props[PROP_HORIZON_ENTRY])
        return cls(horizon, props[PROP_GENERATION])


class CompactionService:
    """One topic's compaction: trigger, status, durable state, compacted reads."""

    def __init__(
        self,
        ledger: ManagedLedger,
        factory: ManagedLedgerFactory,
        persistence_name: str,
        *,
        max_read_position: Callable[[], Position],
        is_aborted: Callable[[EntryInfo, Position], bool],
        on_horizon_moved: Callable[[], None] = lambda: None,
        clock: Clock | None = None,
        input_bounds: InputBounds | None = None,
        retain_null_key: bool = False,
    ) -> None:
        """``input_bounds``: how much the compactor may decompress per entry, and
        where it counts what it refuses (None: ``maxMessageSize``'s default).
        ``retain_null_key``: keep messages without a key (``topicCompactionRetainNullKey``)."""
        self._ledger = ledger
        self._retain_null_key = retain_null_key
        self._input_bounds = input_bounds
        self._factory = factory
        self._persistence_name = persistence_name
        self._max_read_position = max_read_position
        self._is_aborted = is_aborted
        self._on_horizon_moved = on_horizon_moved
        self._clock = clock or SystemClock()
        self.state: CompactionState | None = None
        self.view: CompactedLedger | None = None
        self.status = CompactionStatus.NOT_RUN
        self.last_error = ""
        self._task: asyncio.Task[None] | None = None
        # Pulsar's CompactionRecord stats.
        self.last_removed_messages = 0
        self.last_succeed_ms = 0
        self.last_failed_ms = 0
        self.last_duration_ms = 0.0

    @property
    def horizon(self) -> Position | None:
        return self.state.horizon if self.state is not None else None

    # -- recovery ----------------------------------------------------------------------
    async def recover(self) -> None:
        """Load the state from the ``__compaction`` cursor and open its ledger.

        Leftovers of an interrupted compaction (the generations just before and after
        the current one) are deleted.

        Raises:
            MetadataError, CorruptRecordError: storage failed.
        """
        cursor = self._ledger.cursors().get(COMPACTION_CURSOR)
        if cursor is None:
            return
        state = CompactionState.from_properties(cursor.properties)
        if state is None:
            return
        name = compacted_ledger_name(self._persistence_name, state.generation)
        if not self._factory.exists(name):
            # Should never happen (the state is written after the ledger is complete).
            log.error("%s: compacted ledger %s is missing; compacted reads will only "
                      "see the topic", self._persistence_name, name)
            return
        self.view = CompactedLedger(await self._factory.open(name))
        self.state = state
        for generation in (state.generation - 1, state.generation + 1):
            await self._delete_if_exists(
                compacted_ledger_name(self._persistence_name, generation)
            )

    async def _delete_if_exists(self, name: str) -> None:
        if self._factory.exists(name):
            log.info("deleting leftover compacted ledger %s", name)
            await self._factory.delete(name)

    # -- running -----------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def trigger(self) -> asyncio.Task[None]:
        """Start a compaction in the background; returns its task.

        Raises:
            ConflictError: a compaction of this topic is already running.
        """
        if self.running:
            raise ConflictError("Compaction already in progress")
        self.status = CompactionStatus.RUNNING
        self.last_error = ""
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self._task

    async def _run(self) -> None:
        started = self._clock.monotonic_ms()
        try:
            await self._compact()
        except asyncio.CancelledError:
            self._failed("compaction cancelled (topic closing)", started)
            raise
        except Exception as exc:
            log.exception("compaction of %s failed", self._persistence_name)
            self._failed(f"{type(exc).__name__}: {exc}", started)
        else:
            self.status = CompactionStatus.SUCCESS
            self.last_succeed_ms = self._clock.wall_ms()
            self.last_duration_ms = self._clock.monotonic_ms() - started

    def _failed(self, error: str, started: float) -> None:
        self.status = CompactionStatus.ERROR
        self.last_error = error
        self.last_failed_ms = self._clock.wall_ms()
        self.last_duration_ms = self._clock.monotonic_ms() - started

    async def _compact(self) -> None:
        previous = self.state
        horizon = self._max_read_position()
        if previous is not None and horizon <= previous.horizon:
            self.last_removed_messages = 0
            return  # nothing was written since the last compaction
        generation = previous.generation + 1 if previous is not None else 1
        name = compacted_ledger_name(self._persistence_name, generation)
        await self._delete_if_exists(name)  # a partial one from a failed attempt
        cursor = self._ledger.open_cursor(COMPACTION_CURSOR, InitialPosition.EARLIEST)
        compactor = TwoPhaseCompactor(
            self._ledger, self._factory, self._is_aborted, self._input_bounds,
            retain_null_key=self._retain_null_key,
        )
        result = await compactor.compact(
            horizon, self.view, previous.horizon if previous else None, name
        )
        new_state = CompactionState(horizon, generation)
        try:
            cursor.mark_delete(horizon, new_state.properties())
            if (
                cursor.mark_delete_position != horizon
                or cursor.properties != new_state.properties()
            ):
                raise PersistenceError(
                    f"compaction cursor of {self._persistence_name} is at "
                    f"{cursor.mark_delete_position}, past the horizon {horizon}"
                )
            await cursor.flush()
        except BaseException:
            with contextlib.suppress(Exception):
                await self._factory.delete(name)
            raise
        old = self.view
        self.state = new_state
        self.view = CompactedLedger(result.ledger, result.index)
        self.last_removed_messages = result.messages_removed
        log.info("compacted %s up to %s: %d entries kept, %d messages removed",
                 self._persistence_name, horizon, result.records, result.messages_removed)
        if old is not None:
            try:
                await old.close()
                await self._factory.delete(old.name)
            except Exception:
                # The new generation is durable already; the old one is deleted as a
                # leftover the next time the topic loads.
                log.exception("could not delete compacted ledger %s", old.name)
        self._on_horizon_moved()

    async def wait(self) -> None:
        """Wait for the running compaction, if any, to finish (never raises)."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)

    # -- reading -----------------------------------------------------------------------
    async def read(self, start: Position, max_records: int) -> list[CompactedRecord]:
        """Records of the current compacted ledger with original position >= start.

        Raises:
            CorruptRecordError: a stored record cannot be parsed.
        """
        return await self._read(start, max_records, None)

    async def read_readable(
        self,
        start: Position,
        max_records: int,
        on_unreadable: Callable[[CorruptRecordError], None],
    ) -> list[CompactedRecord]:
        """As ``read``, but each record that cannot be parsed goes to
        ``on_unreadable`` and is skipped (the broker's own tables, which drop what
        they cannot read rather than stop)."""
        return await self._read(start, max_records, on_unreadable)

    async def _read(
        self,
        start: Position,
        max_records: int,
        on_unreadable: Callable[[CorruptRecordError], None] | None,
    ) -> list[CompactedRecord]:
        while True:
            view = self.view
            if view is None:
                return []
            try:
                return await view.read(start, max_records, on_unreadable)
            except ManagedLedgerClosed:
                if self.view is view:
                    raise
                # A compaction replaced the ledger during the read: positions are
                # original positions, so reading the new one from `start` is exact.

    async def last_record(self) -> CompactedRecord | None:
        """The compacted ledger's last record (None if empty or never compacted)."""
        while True:
            view = self.view
            if view is None:
                return None
            try:
                return await view.last_record()
            except ManagedLedgerClosed:
                if self.view is view:
                    raise

    # -- lifecycle and stats -----------------------------------------------------------
    async def close(self) -> None:
        """Stop a running compaction (its partial ledger is deleted) and close."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.view is not None:
            await self.view.close()

    def cursor_internal_stats(self) -> dict[str, object] | None:
        """The ``__compaction`` cursor as Pulsar's internal stats list it (its
        mark-delete position is the horizon of the current compacted view), or None
        before the first compaction opened it."""
        cursor = self._ledger.cursors().get(COMPACTION_CURSOR)
        if cursor is None:
            return None
        return {
            "markDeletePosition": str(cursor.mark_delete_position),
            "readPosition": str(cursor.read_position),
            "individuallyDeletedMessages": "[]",
            "numberOfEntriesSinceFirstNotAckedMessage": 0,
            "totalNonContiguousDeletedMessagesRange": 0,
            "properties": dict(cursor.properties),
            "active": False,
            "state": "Open",
        }

    def status_json(self) -> dict[str, str]:
        """Pulsar's LongRunningProcessStatus."""
        return {"status": self.status.value, "lastError": self.last_error}

    def stats(self) -> dict[str, object]:
        """Pulsar's TopicStats ``compaction`` object."""
        return {
            "lastCompactionRemovedEventCount": self.last_removed_messages,
            "lastCompactionSucceedTimestamp": self.last_succeed_ms,
            "lastCompactionFailedTimestamp": self.last_failed_ms,
            "lastCompactionDurationTimeInMills": int(self.last_duration_ms),
        }
