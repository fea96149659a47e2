"""``TopicTransactionBuffer``: read-committed isolation for one topic partition.

Transactional messages are appended inline to the topic's managed ledger, beside
plain ones. Two things hide what must not be read yet:

1. the **max read position**: dispatchers never read past it. It sits just before the
   first entry of the oldest ongoing transaction, else at the last entry the buffer
   has seen confirmed. Plain messages published after an open transaction's first
   entry wait behind it, so consumers see entries in the order they were written;
2. the **aborted set**: entries of aborted transactions are skipped (``is_aborted``).

Ending a transaction appends a commit (21) or abort (22) marker entry; once it is
durable the buffer applies it (``BufferState.apply``), which may move the max read
position. The buffer keeps no log of its own: recovery reads the latest snapshot
``{max read position, aborted ids, low watermarks}`` and replays the topic from the
snapshot's max read position through the same ``apply``.

Ordering: every append registers the buffer's apply callback on the ledger's future
*before* the caller sees that future, and the ledger resolves futures in position
order, so state changes happen in position order and before the caller's own
callback (its send receipt) runs.

Lifecycle and per-state behaviour: ``state.py``. Snapshot layout: ``snapshot_format``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import NamedTuple, TypeVar

from quasar.clock import Clock
from quasar.errors import (
    BrokerError,
    CorruptRecordError,
    InvalidTxnStatus,
    ManagedLedgerClosed,
    NotAllowedError,
    PersistenceError,
    RemoteProtocolError,
    ServiceNotReady,
    TooManyRequests,
)
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import EARLIEST, ManagedLedger, Position, resolve_append

from ..crash_points import crash_point
from ..scheduler import Scheduler
from ..txn_status import TxnAction
from .config import TransactionBufferConfig
from .first_snapshot import FirstSnapshotGate
from .low_watermark import LowWatermarkCleaner
from .max_read import MaxReadWatch
from .records import (
    PLAIN,
    RecordKind,
    TbRecord,
    check_client_entry,
    make_marker,
    marker_record,
)
from .recovery import replay
from .snapshot_scheduler import SnapshotScheduler, SnapshotState
from .snapshot_store import SnapshotStore
from .snapshotter import SnapshotWriter, load_snapshot
from .state import TbAction, TbOp, TbState, action_for, check_transition
from .txn_state import BufferState

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Crash points this package places (``quasar.transaction.crash_points``).
CRASH_POINTS = ("tb.after_marker_before_state", "tb.during_snapshot")


class _Ending(NamedTuple):
    action: TxnAction
    done: asyncio.Future[None]


def _quiet(fut: asyncio.Future[T]) -> None:
    """Mark a future's exception retrieved (it is also delivered elsewhere)."""
    if not fut.cancelled():
        fut.exception()


def _failed(exc: BaseException) -> asyncio.Future[Position]:
    fut: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
    fut.set_exception(exc)
    return fut


class TopicTransactionBuffer:
    """The transaction buffer of one topic partition; see the module docstring.

    Construct it inside the event loop, then ``await recover()`` while loading the
    topic. All methods run on the event loop thread.
    """

    def __init__(
        self,
        ledger: ManagedLedger,
        topic: str,
        snapshot_store: SnapshotStore,
        clock: Clock,
        scheduler: Scheduler,
        config: TransactionBufferConfig | None = None,
        *,
        on_corrupt_snapshot: Callable[[CorruptRecordError], None] | None = None,
    ) -> None:
        """``on_corrupt_snapshot`` is told when the snapshot cannot be read (recovery
        then replays the whole topic instead)."""
        self.topic = topic
        self._on_corrupt_snapshot = on_corrupt_snapshot
        self.config = config if config is not None else TransactionBufferConfig()
        self._ledger = ledger
        self._store = snapshot_store
        self._clock = clock
        self._scheduler = scheduler
        self._state = TbState.NONE
        self._plain_rejected = False
        self._plain_moves_max_read = False
        self._counts_changes = False
        self._buf = BufferState(self.config.max_ended_transactions)
        self._writer = SnapshotWriter(
            snapshot_store, topic, self.config.snapshot_segment_size_bytes
        )
        self._loop = asyncio.get_running_loop()
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._ready.add_done_callback(_quiet)
        self._max_read = EARLIEST
        self._pending_appends: dict[TxnID, int] = {}
        self._ending: dict[TxnID, _Ending] = {}
        self._gate: FirstSnapshotGate | None = None
        self._watch = MaxReadWatch(topic)
        self._snapshots = SnapshotScheduler(
            topic, self._writer, self._snapshot_state, clock, scheduler,
            max_changes=self.config.snapshot_max_transaction_count,
            interval_ms=self.config.snapshot_min_time_in_millis,
            timer_enabled=lambda: action_for(self._state, TbOp.SNAPSHOT) is TbAction.PROCEED,
        )
        self._cleaner = LowWatermarkCleaner(
            topic,
            lambda: [t for t in self._buf.orphans() if t not in self._ending],
            lambda txn: self._end(txn, TxnAction.ABORT),
            lambda: self._state is TbState.READY,
        )
        self.committed_count = 0
        self.aborted_count = 0
        self.recover_start_ms = 0
        self.recover_end_ms = 0
        ledger.add_ledger_deleted_listener(self._on_ledger_deleted)

    def _enter(self, new: TbState) -> None:
        """Move to ``new`` (checked against ``TRANSITIONS``) and keep the answers the
        publish path needs from ``ACTIONS`` as plain flags: a table lookup per plain
        entry is a measurable part of the broker's unbatched publish cost."""
        check_transition(self._state, new)
        self._state = new
        plain = action_for(new, TbOp.APPEND_PLAIN)
        self._plain_rejected = plain is TbAction.REJECT_CLOSED
        # PROCEED (READY, NO_SNAPSHOT) is where ``_apply`` moves the max read position.
        self._plain_moves_max_read = plain is TbAction.PROCEED
        self._counts_changes = new is TbState.READY

    # ================================================================== queries

    @property
    def state(self) -> TbState:
        return self._state

    @property
    def max_read_position(self) -> Position:
        """Dispatchers must not read entries after this position.

        ``EARLIEST`` (before every entry) until recovery has finished.
        """
        if action_for(self._state, TbOp.MAX_READ) is TbAction.EARLIEST:
            return EARLIEST
        return self._max_read

    def is_aborted(
        self, txn_id: tuple[int, int], position: Position | None = None
    ) -> bool:
        """True if the entry of ``txn_id`` at ``position`` must be skipped.

        ``txn_id`` may be a plain ``(most, least)`` tuple (``EntryInfo.txn``). Pass
        the entry's position: an entry written before an earlier commit of the same
        id stays visible even if a late send of it was aborted afterwards.
        """
        txn = txn_id if type(txn_id) is TxnID else TxnID(*txn_id)
        return self._buf.is_aborted(txn, position)

    @property
    def lwm_aborted_count(self) -> int:
        """Transactions aborted here because a low watermark covered them."""
        return self._cleaner.aborted_count

    @property
    def last_snapshot_ms(self) -> int:
        """Wall-clock time of the last snapshot written or recovered (0: none)."""
        return self._snapshots.last_snapshot_ms

    def ongoing_count(self) -> int:
        return len(self._buf.ongoing)

    def ongoing_transactions(self) -> dict[TxnID, Position]:
        """Open transactions on this partition and the position of their first entry."""
        return dict(self._buf.ongoing)

    def aborted_txn_count(self) -> int:
        """Aborted ids currently kept (they leave with their marker's ledger)."""
        return len(self._buf.aborted)

    def low_watermark(self, tc_id: int) -> int:
        return self._buf.low_watermark(tc_id)

    def transaction_in_buffer_stats(self, txn_id: TxnID) -> dict[str, object]:
        """Pulsar's ``TransactionInBufferStats``: first position if ongoing, aborted."""
        start = self._buf.ongoing.get(txn_id)
        return {
            "startPosition": str(start) if start is not None else None,
            "aborted": self._buf.is_aborted(txn_id),
        }

    def stats(self, low_watermarks: bool = False, segment_stats: bool = False) -> dict[str, object]:
        """Shaped like Pulsar's ``TransactionBufferStats``."""
        out: dict[str, object] = {
            "state": self._state.value,
            "maxReadPosition": str(self.max_read_position),
            "lastSnapshotTimestamps": self.last_snapshot_ms,
            "ongoingTxnSize": len(self._buf.ongoing),
            "recoverStartTime": self.recover_start_ms,
            "recoverEndTime": self.recover_end_ms,
            "totalAbortedTransactions": len(self._buf.aborted),
            "snapshotType": "Segment",
        }
        if low_watermarks:
            out["lowWaterMarks"] = dict(sorted(self._buf.low_watermarks.items()))
        if segment_stats:
            out["segmentsStats"] = {
                "currentSegmentCapacity": self._writer.capacity,
                "unsealedAbortTxnIDSize": self._writer.unsealed_count(len(self._buf.aborted)),
                "segmentsSize": self._writer.sealed_segments,
                "lastTookSnapshotSegmentTimestamp": self.last_snapshot_ms,
            }
        return out

    # ================================================================== waiting

    def add_max_read_position_listener(
        self, listener: Callable[[Position], None]
    ) -> Callable[[], None]:
        """Call ``listener(new_position)`` whenever the max read position moves forward
        (including when recovery ends). Returns a function that removes it."""
        return self._watch.add_listener(listener)

    async def wait_for_max_read_position(self, beyond: Position) -> Position:
        """Wait until the max read position is after ``beyond``; return it.

        Raises:
            ServiceNotReady: the buffer closed first.
        """
        current = self.max_read_position
        if current > beyond:
            return current
        if self._state is TbState.CLOSED:
            raise ServiceNotReady(f"transaction buffer of {self.topic} is closed")
        return await self._watch.wait_beyond(beyond)

    async def check_if_recovered(self, txn_enabled: bool) -> None:
        """Call when a producer connects (Pulsar's ``checkIfTBRecoverCompletely``).

        A transactional producer waits for recovery; if the topic has no snapshot
        yet, the first one is written now, so the producer's transactional entries
        never need the gate in ``append_transactional``. Others return at once.

        Raises:
            ServiceNotReady: recovery failed or the buffer closed (retryable).
            Exception: the first snapshot could not be written (from the store).
        """
        if not txn_enabled:
            return
        await self._wait_ready()
        if self._state is TbState.NO_SNAPSHOT:
            await asyncio.shield(self._open_gate().done)

    # ================================================================== publishing

    def append_transactional(self, txn_id: TxnID, data: bytes) -> asyncio.Future[Position]:
        """Append a message published in ``txn_id``; the future gives its position.

        The first entry of a transaction on this partition records it as ongoing
        (at that position), which holds the max read position just before it.

        The future fails with:
            NotAllowedError: the transaction has ended (its coordinator's low
                watermark covers it, or it was committed/aborted here, or its end is
                being written), or the entry's metadata does not carry ``txn_id``.
            TooManyRequests: it is a new transaction and ``max_ongoing_transactions``
                or ``max_aborted_transactions`` is reached (retryable).
            ServiceNotReady: not recovered yet, or closed (retryable).
            RemoteProtocolError: the entry's metadata cannot be decoded.
            PersistenceError / FatalStorageError / ManagedLedgerClosed: from storage.
        """
        action = action_for(self._state, TbOp.APPEND_TXN)
        if action is TbAction.REJECT_NOT_READY:
            return _failed(ServiceNotReady(f"transaction buffer of {self.topic} is recovering"))
        if action is TbAction.REJECT_CLOSED:
            return _failed(ServiceNotReady(f"transaction buffer of {self.topic} is closed"))
        try:
            self._check_txn_append(txn_id, data)
        except (BrokerError, RemoteProtocolError) as exc:
            return _failed(exc)
        if action is TbAction.FIRST_SNAPSHOT:
            # A snapshot must be durable before the first transactional entry, so a
            # recovery that finds none may skip the replay.
            return self._open_gate().enqueue(txn_id, data)
        return self._append_txn_now(txn_id, data)

    def append_non_transactional(self, data: bytes) -> asyncio.Future[Position]:
        """Append a plain message; the future gives its position.

        It becomes readable at once if no transaction is open here, else when every
        transaction that started before it has ended. Use this instead of
        ``ledger.add_entry`` for every plain publish.

        The future fails with:
            NotAllowedError: the entry carries transaction ids or a marker type.
            ServiceNotReady: the buffer is closed.
            RemoteProtocolError: the entry's metadata cannot be decoded.
            PersistenceError / FatalStorageError / ManagedLedgerClosed: from storage.
        """
        fut: asyncio.Future[Position] = self._loop.create_future()
        self.append_non_transactional_cb(data, partial(resolve_append, fut))
        return fut

    def append_non_transactional_cb(
        self,
        data: bytes,
        callback: Callable[[Position | None, BaseException | None], None],
    ) -> None:
        """``append_non_transactional`` with ``callback(position, error)`` instead of a
        future (the broker's publish hot path); the same checks and failures."""
        if self._plain_rejected:
            callback(None, ServiceNotReady(f"transaction buffer of {self.topic} is closed"))
            return
        if self.config.verify_client_entries:
            try:
                check_client_entry(data, None)
            except (BrokerError, RemoteProtocolError) as exc:
                callback(None, exc)
                return

        def added(position: Position | None, exc: BaseException | None) -> None:
            if exc is None:
                assert position is not None
                if self._plain_moves_max_read and not self._buf.ongoing:
                    # Nothing pins the max read position, so it follows this entry:
                    # ``_apply`` inlined for the common publish (checked here, at
                    # storage completion, where ``_apply`` would check it too).
                    if position > self._max_read:
                        self._max_read = position
                        if self._counts_changes:
                            self._snapshots.changed()
                        self._watch.notify(position)
                else:
                    self._apply(PLAIN, position)
            callback(position, exc)

        try:
            self._ledger.append_entry(data, added)
        except ManagedLedgerClosed as exc:
            callback(None, exc)

    def _check_txn_append(self, txn: TxnID, data: bytes) -> None:
        if self.config.verify_client_entries:
            check_client_entry(data, txn)
        buf = self._buf
        if buf.is_fenced(txn) or buf.ended_action(txn) is not None or txn in self._ending:
            raise NotAllowedError(
                f"Transaction {txn} has already ended on {self.topic}; "
                "use a new transaction to send messages"
            )
        if txn in buf.ongoing or txn in self._pending_appends:
            return
        cfg = self.config
        limit = cfg.max_ongoing_transactions
        # Open = ongoing, or first entry still being written (not applied yet). The
        # sum of both bounds that from above; count exactly only near the limit.
        if limit and len(buf.ongoing) + len(self._pending_appends) >= limit:
            starting = len(buf.ongoing) + sum(
                1 for t in self._pending_appends if t not in buf.ongoing
            )
            if starting >= limit:
                raise TooManyRequests(
                    f"{self.topic} already has {starting} open transactions"
                )
        if cfg.max_aborted_transactions and len(buf.aborted) >= cfg.max_aborted_transactions:
            raise TooManyRequests(
                f"{self.topic} keeps {len(buf.aborted)} aborted transactions; "
                "new ones are refused until retention trims them"
            )

    def _append_txn_now(self, txn: TxnID, data: bytes) -> asyncio.Future[Position]:
        fut: asyncio.Future[Position] = self._loop.create_future()
        # Counted first: a failed ledger answers inside append_entry.
        self._pending_appends[txn] = self._pending_appends.get(txn, 0) + 1
        try:
            self._ledger.append_entry(data, partial(self._txn_data_added, txn, fut))
        except BaseException as exc:
            self._txn_append_settled(txn)
            if isinstance(exc, ManagedLedgerClosed):
                return _failed(exc)
            raise
        return fut

    def _txn_append_settled(self, txn: TxnID) -> None:
        left = self._pending_appends[txn] - 1
        if left:
            self._pending_appends[txn] = left
        else:
            del self._pending_appends[txn]

    def _txn_data_added(
        self,
        txn: TxnID,
        fut: asyncio.Future[Position],
        position: Position | None,
        exc: BaseException | None,
    ) -> None:
        self._txn_append_settled(txn)
        if exc is None:
            assert position is not None
            self._apply(TbRecord(RecordKind.TXN_DATA, txn), position)
            if self._buf.is_fenced(txn) and txn in self._buf.ongoing:
                # Accepted just before a low watermark covering it arrived: an orphan.
                self._cleaner.trigger()
        resolve_append(fut, position, exc)

    def _apply(self, record: TbRecord, position: Position) -> None:
        """The live path into ``BufferState.apply``; then move the max read position.

        Every append (plain, transactional, marker) is applied from its storage
        callback, which runs in completion order = position order. A future's own
        callbacks run a loop turn later: a transactional entry applied that way let a
        plain entry completing in the same storage group move the max read position
        past it, making the open transaction's entry readable.
        """
        if record is not PLAIN:  # a plain entry changes no transaction's state
            before = len(self._buf.aborted)
            self._buf.apply(record, position)
            if self._state is TbState.READY and len(self._buf.aborted) != before:
                self._snapshots.changed()
        if self._state in (TbState.READY, TbState.NO_SNAPSHOT):
            first = self._buf.first_ongoing_position()
            self._move_max_read(
                position if first is None else self._ledger.previous_position(first)
            )

    def _move_max_read(self, candidate: Position) -> None:
        # Never backwards: dispatchers may already have read up to the old value.
        if candidate <= self._max_read:
            return
        self._max_read = candidate
        if self._state is TbState.READY:
            self._snapshots.changed()
        self._notify()

    def _notify(self) -> None:
        self._watch.notify(self.max_read_position)

    # ================================================================== ending

    async def end_txn(self, txn_id: TxnID, action: TxnAction, low_watermark: int) -> None:
        """Commit or abort ``txn_id`` on this partition (END_TXN_ON_PARTITION).

        Writes a commit/abort marker and, once it is durable, ends the transaction
        here. Idempotent: a repeated end with the same action succeeds without a
        second marker (joining one still being written). A transaction that never
        published here still gets a marker, so a late send for it is refused and, for
        an abort, filtered even after a restart. ``low_watermark`` (inclusive, ``-1``
        when nothing ended; see ``buffer_client``) is merged first; afterwards every
        ongoing transaction it covers is aborted here (the coordinator forgot to end
        it on this partition).

        Raises:
            InvalidTxnStatus: it already ended here with the other action.
            ServiceNotReady: recovery failed or the buffer is closed (retryable).
            PersistenceError: the marker could not be appended (retryable).
            FatalStorageError: the storage failed for good.
        """
        moved = self._buf.merge_low_watermark(txn_id.most_bits, low_watermark)
        try:
            while True:
                step = action_for(self._state, TbOp.END_TXN)
                if step is TbAction.WAIT:
                    await self._wait_ready()
                elif step is TbAction.REJECT_CLOSED:
                    raise ServiceNotReady(f"transaction buffer of {self.topic} is closed")
                elif step is TbAction.NOOP:
                    if self._gate is None:
                        # No snapshot, so no transactional entry exists here; remember
                        # the end so a late send is refused while the topic is loaded.
                        prior = self._buf.ended_action(txn_id)
                        if prior is not None and prior is not action:
                            raise self._conflict(txn_id, prior, action)
                        self._buf.ended.add(txn_id, action)
                        return
                    await asyncio.shield(self._gate.done)
                else:
                    break
            await self._end(txn_id, action)
            self._snapshots.after_end()
        finally:
            if moved:
                self._cleaner.trigger()

    async def _end(self, txn: TxnID, action: TxnAction) -> None:
        ending = self._ending.get(txn)
        if ending is not None:
            if ending.action is not action:
                raise self._conflict(txn, ending.action, action)
            await asyncio.shield(ending.done)
            return
        prior = self._buf.ended_action(txn)
        if prior is not None:
            if prior is not action:
                raise self._conflict(txn, prior, action)
            return
        if (
            txn not in self._buf.ongoing
            and txn not in self._pending_appends
            and self._buf.is_fenced(txn)
        ):
            return  # ended everywhere already and has no data here: nothing to mark
        marker = make_marker(txn, action, self._clock.wall_ms())
        ending = _Ending(action, self._loop.create_future())
        ending.done.add_done_callback(_quiet)
        # Registered first: a failed ledger answers inside append_entry.
        self._ending[txn] = ending
        try:
            self._ledger.append_entry(marker, partial(self._marker_added, txn, ending))
        except BaseException as exc:
            if self._ending.get(txn) is ending:
                del self._ending[txn]
            if isinstance(exc, ManagedLedgerClosed):
                raise PersistenceError(f"{self.topic}: {exc}") from exc
            raise
        await asyncio.shield(ending.done)

    def _conflict(self, txn: TxnID, done: TxnAction, asked: TxnAction) -> BrokerError:
        past = "committed" if done is TxnAction.COMMIT else "aborted"
        return InvalidTxnStatus(
            f"Transaction {txn} was {past} on {self.topic}; cannot {asked.name.lower()} it"
        )

    def _marker_added(
        self,
        txn: TxnID,
        ending: _Ending,
        position: Position | None,
        exc: BaseException | None,
    ) -> None:
        if self._ending.get(txn) is ending:
            del self._ending[txn]
        if exc is not None:
            ending.done.set_exception(exc)
            return
        assert position is not None
        crash_point("tb.after_marker_before_state")
        self._apply(marker_record(txn, ending.action), position)
        if ending.action is TxnAction.COMMIT:
            self.committed_count += 1
        else:
            self.aborted_count += 1
        ending.done.set_result(None)

    # ================================================================== snapshots

    async def take_snapshot(self) -> None:
        """Write a snapshot now (admin, tests, and before a planned unload).

        Raises:
            ServiceNotReady: the buffer is not READY.
            Exception: from the store.
        """
        if action_for(self._state, TbOp.SNAPSHOT) is not TbAction.PROCEED:
            raise ServiceNotReady(f"transaction buffer of {self.topic} is {self._state.value}")
        await self._snapshots.take()

    def _snapshot_state(self) -> SnapshotState:
        return SnapshotState(self._buf.aborted, self._max_read, self._buf.low_watermarks)

    def _open_gate(self) -> FirstSnapshotGate:
        """Start (or join) writing the first snapshot of a NO_SNAPSHOT buffer."""
        if self._gate is None:
            self._gate = FirstSnapshotGate(
                self._snapshots.take, self._first_snapshot_written, self._admit_queued
            )
        return self._gate

    def _first_snapshot_written(self, error: BaseException | None) -> BaseException | None:
        self._gate = None
        if error is not None:
            return error  # stay NO_SNAPSHOT; the next transactional append retries
        if self._state is not TbState.NO_SNAPSHOT:
            return ServiceNotReady(f"transaction buffer of {self.topic} is closed")
        self._enter(TbState.READY)
        self._snapshots.start_timer()
        return None

    def _admit_queued(self, txn: TxnID, data: bytes) -> asyncio.Future[Position]:
        try:
            self._check_txn_append(txn, data)
        except (BrokerError, RemoteProtocolError) as exc:
            return _failed(exc)
        return self._append_txn_now(txn, data)

    async def delete_snapshot(self) -> None:
        """Remove this topic's snapshot records (when the topic is deleted).

        Raises:
            Exception: from the store.
        """
        await self._writer.delete_all()

    # ================================================================== recovery

    async def recover(self) -> None:
        """Rebuild the state from the snapshot and the topic, then become READY (or
        NO_SNAPSHOT when the topic never had a snapshot).

        Until it finishes, ``max_read_position`` is ``EARLIEST``, transactional
        appends are refused and ends wait. Plain entries appended meanwhile become
        readable when it finishes, and listeners are told.

        Raises:
            CorruptRecordError: a snapshot record is damaged or a segment is missing.
            ServiceNotReady: the buffer was closed meanwhile.
            Exception: from the store or the ledger. The buffer is then CLOSED; the
                broker should close the topic so a later load retries.
        """
        self._enter(TbState.INITIALIZING)
        self.recover_start_ms = self._clock.wall_ms()
        replayed_all = False
        try:
            try:
                loaded = await load_snapshot(self._store, self.topic, self._ledger_exists())
            except CorruptRecordError as exc:
                loaded = None
                replayed_all = True
                await self._replay_without_snapshot(exc)
            if loaded is not None:
                self._buf.install(loaded.aborted, loaded.index.low_watermarks)
                self._writer.restore(loaded)
                self._snapshots.last_snapshot_ms = loaded.index.taken_at_ms
                await replay(
                    self._ledger, loaded.index.max_read_position, self._buf,
                    self.config.replay_read_entries, self._check_open,
                )
            self._check_open()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(
                    ServiceNotReady(f"transaction buffer of {self.topic} failed to recover: {exc}")
                )
            await self.close()
            raise
        # After a full replay the topic may hold transactions: READY takes a new
        # snapshot on the usual schedule, which replaces the unreadable one.
        new_state = (
            TbState.READY if loaded is not None or replayed_all else TbState.NO_SNAPSHOT
        )
        self._enter(new_state)
        first = self._buf.first_ongoing_position()
        self._max_read = (
            self._ledger.last_confirmed_entry
            if first is None
            else self._ledger.previous_position(first)
        )
        self.recover_end_ms = self._clock.wall_ms()
        self._ready.set_result(None)
        self._trim_aborted()
        if new_state is TbState.READY:
            self._snapshots.start_timer()
            self._cleaner.trigger()
        self._notify()

    async def _replay_without_snapshot(self, exc: CorruptRecordError) -> None:
        """The snapshot cannot be read: rebuild the state from the whole topic.

        Safe because a snapshot is only a shortcut: every transaction's data and
        marker are in the topic, and an aborted transaction whose marker was trimmed
        had its data (written before the marker) trimmed too. The next snapshot
        replaces the unreadable one.
        """
        log.error("%s: transaction-buffer snapshot unreadable, replaying the topic: %s",
                  self.topic, exc)
        if self._on_corrupt_snapshot is not None:
            self._on_corrupt_snapshot(exc)
        await replay(
            self._ledger, self._ledger.first_position, self._buf,
            self.config.replay_read_entries, self._check_open,
        )

    def _check_open(self) -> None:
        if self._state is TbState.CLOSED:
            raise ServiceNotReady(f"transaction buffer of {self.topic} was closed")

    async def _wait_ready(self) -> None:
        await asyncio.shield(self._ready)

    def _ledger_exists(self) -> Callable[[int], bool]:
        alive = {info.ledger_id for info in self._ledger.ledgers()}
        return alive.__contains__

    def _on_ledger_deleted(self, ledger_id: int) -> None:
        if self._state in (TbState.READY, TbState.NO_SNAPSHOT):
            self._trim_aborted()

    def _trim_aborted(self) -> None:
        dropped = self._buf.trim_aborted(self._ledger_exists())
        if dropped:
            self._writer.on_trimmed(dropped)
            if self._state is TbState.READY:
                self._snapshots.changed()

    # ================================================================== close

    async def close(self) -> None:
        """Stop: timers, cleanup and snapshot tasks end; waiters fail with
        ``ServiceNotReady``. Writes already in the ledger stay; nothing is lost,
        since recovery rebuilds everything from the snapshot and the topic."""
        if self._state is TbState.CLOSED:
            return
        self._enter(TbState.CLOSED)
        closed = ServiceNotReady(f"transaction buffer of {self.topic} is closed")
        if not self._ready.done():
            self._ready.set_exception(closed)
        self._watch.close(closed)
        await self._cleaner.close()
        await self._snapshots.close()
