"""``PendingAckStore``: the write side of a pending-ack handle.

It appends records, applies them in log order (live requests from the append
future's callback, recovery from ``replay``: the same ``apply``), performs a commit's
update on the subscription cursor, flushes the cursor, and lets the log records no
transaction needs any more go (``PendingAckLog.release_before``).

A record is needed while its transaction is pending here, and for a committed
transaction until the cursor flush that made its acks durable: until then a crash
must find the COMMIT record again so recovery can re-apply it. Each transaction's
first record is kept as a ``LogPosition`` (entry and batch index) in log order, so
with PIP-160 batching the log is released record by record, not entry by entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NoReturn

from quasar.errors import (
    BadVersion,
    FatalStorageError,
    ManagedLedgerClosed,
    TransactionConflict,
)
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import ManagedCursor, Position
from quasar.transaction.batched_log import LogPosition

from ..crash_points import crash_point
from ..scheduler import Scheduler, TimerHandle
from ..txn_status import TxnAction
from .config import PendingAckConfig
from .lifecycle import HandleLifecycle
from .log import PendingAckLog, as_log_position
from .records import PendingAckOp, PendingAckRecord
from .results import AbortResult, CommitResult
from .state import ApplyResult, CursorUpdate, PendingAckState
from .stats import PendingAckCounters

log = logging.getLogger(__name__)

# Failures after which the handle cannot know its own state any more.
_FENCING_CURSOR_ERRORS = (BadVersion, ManagedLedgerClosed, FatalStorageError)


@dataclass
class _Unflushed:
    first_log: LogPosition
    result: CommitResult


class PendingAckStore:
    """Write path, apply, cursor updates and log release of one handle."""

    def __init__(
        self,
        *,
        describe: str,
        cursor: ManagedCursor,
        log: PendingAckLog,
        state: PendingAckState,
        life: HandleLifecycle,
        scheduler: Scheduler,
        config: PendingAckConfig,
        counters: PendingAckCounters,
    ) -> None:
        self._describe = describe
        self._cursor = cursor
        self._log = log
        self._state = state
        self._life = life
        self._scheduler = scheduler
        self._config = config
        self._counters = counters
        self._inflight: dict[TxnID, int] = {}  # records appended, not yet applied
        self._ended: OrderedDict[TxnID, TxnAction] = OrderedDict()
        self._unflushed: dict[TxnID, _Unflushed] = {}
        # First record of each transaction pending in the state, in log order (an
        # ended transaction's moves to ``_unflushed`` until its cursor flush).
        self._first: dict[TxnID, LogPosition] = {}
        self._last_applied = LogPosition(Position(-1, -1))
        self._replaying = False
        self._flush_timer: TimerHandle | None = None

    # ------------------------------------------------------------------ queries

    def has_inflight(self, txn_id: TxnID) -> bool:
        """A record of the transaction is appended and not yet applied."""
        return bool(self._inflight.get(txn_id))

    def ended(self, txn_id: TxnID) -> TxnAction | None:
        """How the transaction ended here, if it did recently (bounded memory)."""
        return self._ended.get(txn_id)

    def unflushed(self, txn_id: TxnID) -> CommitResult | None:
        """The result of a commit applied to the cursor but not yet flushed."""
        pending = self._unflushed.get(txn_id)
        return pending.result if pending is not None else None

    def remember_ended(self, txn_id: TxnID, action: TxnAction) -> None:
        self._ended[txn_id] = action
        self._ended.move_to_end(txn_id)
        while len(self._ended) > self._config.max_ended_transactions:
            self._ended.popitem(last=False)

    # ------------------------------------------------------------------ recovery

    async def replay(self) -> None:
        """Apply every record after the log cursor's mark-delete, then flush the
        cursor so re-applied commits are durable before anything relies on them.

        Raises:
            CorruptRecordError: an entry cannot be decoded.
            ServiceNotReady: the handle stopped initializing meanwhile (closed).
            ManagedLedgerClosed, MetadataError, BadVersion: from storage.
        """
        self._replaying = True
        try:
            self._log.open()
            self._last_applied = LogPosition(self._log.cursor.mark_delete_position)
            async with contextlib.aclosing(self._log.replay()) as records:
                async for position, record in records:
                    if self._life.stopped:
                        raise self._life.not_ready("recover")
                    try:
                        self.apply(record, position)
                    except TransactionConflict as exc:
                        log.debug("%s: replay refuses the record at %s: %s",
                                  self._describe, position, exc)
            await self._cursor.flush()
        finally:
            self._replaying = False
        self._unflushed.clear()
        for txn_id in [t for t in self._first if self._state.get(t) is None]:
            del self._first[txn_id]

    # ------------------------------------------------------------------ write + apply

    def write(
        self, record: PendingAckRecord, pre_applied: CursorUpdate | None = None
    ) -> asyncio.Future[ApplyResult]:
        """Append ``record``; once durable, apply it (in log order) and resolve.

        ``pre_applied``: a COMMIT's cursor update the caller already made (see
        ``commit_beside_flush``).

        Raises (through the future):
            TransactionConflict: an ACK lost a race on apply; the record stays in the
                log and replay refuses it the same way.
            ServiceNotReady: the append failed (fenced), or the handle stopped
                serving before the record was durable.
        """
        txn_id = record.txn_id
        try:
            appended = self._log.append(record)
        except Exception as exc:
            self._life.fence(exc)
            raise self._life.not_ready("write the pending-ack log") from exc
        self._inflight[txn_id] = self._inflight.get(txn_id, 0) + 1
        result: asyncio.Future[ApplyResult] = asyncio.get_running_loop().create_future()

        def on_durable(f: asyncio.Future[Any]) -> None:
            left = self._inflight.pop(txn_id) - 1
            if left:
                self._inflight[txn_id] = left
            # The record is applied whether or not anyone still waits for the answer
            # (a cancelled waiter cancels ``result``, never the log).
            failure = asyncio.CancelledError() if f.cancelled() else f.exception()
            if failure is not None:
                self._life.fence(failure)
                err = self._life.not_ready("write the pending-ack log")
                err.__cause__ = failure
                _resolve(result, error=err)
                return
            if record.op is PendingAckOp.COMMIT:
                crash_point("pa.after_commit_record_before_cursor")
            if not self._life.serving:
                # Closed or fenced meanwhile: the record is durable, and the next
                # handle's replay applies it; this one no longer changes anything.
                _resolve(result, error=self._life.not_ready("apply the pending-ack log"))
                return
            try:
                applied = self.apply(record, as_log_position(f.result()), pre_applied)
            except TransactionConflict as exc:
                self._counters.conflicts += 1
                _resolve(result, error=exc)
                return
            except Exception as exc:  # the cursor refused a commit's update
                self._life.fence(exc)
                _resolve(result, error=exc)
                return
            _resolve(result, applied)

        appended.add_done_callback(on_durable)
        return result

    def apply(
        self,
        record: PendingAckRecord,
        position: LogPosition,
        pre_applied: CursorUpdate | None = None,
    ) -> ApplyResult:
        """The only mutator, shared by live requests and replay.

        ``pre_applied``: the COMMIT's cursor update is on the cursor already; it is
        the result, and the cursor is not changed again.

        Raises:
            TransactionConflict: the record is refused (nothing changed).
            ManagedLedgerClosed, BadVersion: the cursor refused a commit's update.
        """
        if position > self._last_applied:
            self._last_applied = position
        before = self._state.get(record.txn_id)
        applied = self._state.apply(record, position.position, self._cursor, pre_applied)
        if record.op is PendingAckOp.ACK:
            if record.txn_id not in self._first:
                self._first[record.txn_id] = position
            return applied
        self.remember_ended(record.txn_id, TxnAction.COMMIT
                             if record.op is PendingAckOp.COMMIT else TxnAction.ABORT)
        first = self._first.pop(record.txn_id, None)
        if applied.cursor_update is not None and before is not None:
            if pre_applied is None:
                self._update_cursor(applied.cursor_update)
            if first is None:
                first = LogPosition(before.first_log)
            self._unflushed[record.txn_id] = _Unflushed(first, commit_result(applied))
        if not self._replaying:
            self.release_log()
        return applied

    async def commit_beside_flush(self, record: PendingAckRecord) -> ApplyResult:
        """A COMMIT whose cursor flush runs beside the record's append, not after it
        (one storage round trip per commit instead of two).

        The commit's update is computed from the state (which still holds the
        transaction's acks) and made on the cursor first; the flush starts at once and
        the record, when durable, is applied without touching the cursor again. The
        log keeps the transaction's records until both are done. Either order
        survives a crash: a durable cursor without the COMMIT record replays the acks
        as pending, and the coordinator, still COMMITTING, ends them again (they are
        acknowledged already); a COMMIT record without the flush is re-applied by
        replay, as for ``write`` + ``flush_cursor``.

        Only for a transaction with no record in flight (all its acks applied, none
        can be added once its end started): the caller checks ``has_inflight``.

        Raises:
            As ``write`` and ``flush_cursor``. A failed flush is raised once the record
            is applied, so a repeated commit finds it unflushed and flushes again.
        """
        txn_id = record.txn_id
        update = self._state.preview_commit(txn_id, self._cursor)
        if update is not None:
            try:
                self._update_cursor(update)
            except Exception as exc:  # the cursor is closed: as a refused apply
                self._life.fence(exc)
                raise
        written = self.write(record, pre_applied=update)
        crash_point("pa.commit_beside_flush_started")
        flush_failure: Exception | None = None
        try:
            await self._cursor.flush()
        except Exception as exc:  # raised below, once the record is applied
            flush_failure = exc
        applied = await written
        if flush_failure is not None:
            self._flush_failed(flush_failure)
        if self._unflushed.pop(txn_id, None) is not None:
            self.release_log()
        return applied

    def _update_cursor(self, update: CursorUpdate) -> None:
        cursor = self._cursor
        if update.deletes:
            cursor.delete(update.deletes)
        for position, ack_set in update.batch_ack_sets:
            cursor.set_batch_ack(position, list(ack_set))
        if update.mark_delete is not None:
            cursor.mark_delete(update.mark_delete)  # ignored below the current one

    async def flush_cursor(self) -> None:
        """Make every commit applied so far durable on the cursor, then let its log
        records go.

        Raises:
            ServiceNotReady: the cursor belongs to someone else now (fenced).
            MetadataError: the write failed; retried by a timer and by the next commit.
        """
        covered = list(self._unflushed)
        try:
            await self._cursor.flush()
        except Exception as exc:
            self._flush_failed(exc)
        for txn_id in covered:
            self._unflushed.pop(txn_id, None)
        self.release_log()

    def _flush_failed(self, exc: BaseException) -> NoReturn:
        """Raise a failed cursor flush: fenced for good, or retried by a timer."""
        if isinstance(exc, _FENCING_CURSOR_ERRORS):
            self._life.fence(exc)
            raise self._life.not_ready("flush the subscription cursor") from exc
        self._arm_flush_retry()
        raise exc

    def _arm_flush_retry(self) -> None:
        if self._flush_timer is not None:
            return

        def fire() -> None:
            self._flush_timer = None
            if self._life.serving and self._unflushed:
                task = asyncio.get_running_loop().create_task(self.flush_cursor())
                task.add_done_callback(_consume)

        self._flush_timer = self._scheduler.call_later(
            self._config.cursor_flush_retry_interval_ms, fire
        )

    def release_log(self) -> None:
        """Mark-delete the log up to the oldest record still needed (module docstring)."""
        if self._life.stopped:
            return  # only a fresh handle's replay may decide what is needed now
        needed = [u.first_log for u in self._unflushed.values()]
        first = self._first_pending()
        if first is not None:
            needed.append(first)
        self._log.release_before(min(needed) if needed else None, self._last_applied)

    def _first_pending(self) -> LogPosition | None:
        """The first record of the oldest transaction pending in the state."""
        oldest = self._state.first_log()
        if oldest is None:
            self._first.clear()
            return None
        while self._first:
            txn_id, first = next(iter(self._first.items()))
            if self._state.get(txn_id) is not None:
                # The state's own order is authoritative: never release past it.
                return first if first.position <= oldest else LogPosition(oldest)
            del self._first[txn_id]  # left the state without an end record here
        return LogPosition(oldest)

    def stop(self) -> None:
        """Cancel the flush retry (the handle is closing)."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None


def commit_result(applied: ApplyResult) -> CommitResult:
    """What an applied COMMIT did, for the broker."""
    update = applied.cursor_update
    if update is None:
        return CommitResult()
    return CommitResult(
        update.deletes, tuple(p for p, _ in update.batch_ack_sets), update.mark_delete
    )


def abort_result(applied: ApplyResult) -> AbortResult:
    """What an applied ABORT released, for the broker."""
    return AbortResult(
        applied.released, applied.released_cumulative, applied.released_members
    )


def _resolve(
    future: asyncio.Future[ApplyResult],
    value: ApplyResult | None = None,
    *,
    error: BaseException | None = None,
) -> None:
    if future.done():
        return  # the waiter was cancelled
    if error is not None:
        future.set_exception(error)
    else:
        assert value is not None
        future.set_result(value)


def _consume(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("background cursor flush failed: %r", task.exception())
