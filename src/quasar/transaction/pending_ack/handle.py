"""``PendingAckHandle``: acknowledgements made inside transactions on one subscription.

Every request follows one pattern: check against the current state, build a record,
append it to the pending-ack log, and once it is durable apply it to
``PendingAckState`` (in log order, from the append future's callback) before
answering. Recovery replays the log through the same apply, so the state after a
restart is the state before it.

* ACK: recorded as pending; nothing touches the cursor. The dispatcher must not
  redeliver pending entries (``is_pending``, ``pending_ack_set``).
* COMMIT: the record is written first, then the transaction's acks are applied to the
  subscription cursor, and the cursor is flushed (durable) before the answer. A crash
  in between is repaired by recovery, which re-applies every COMMIT it replays
  (deleting an acknowledged entry again is a no-op).
* ABORT: the record is written, the pending acks are dropped, and the entries are
  returned for redelivery.
* Ends are idempotent: a transaction that has nothing pending here, or ended already,
  is answered at once. After each end the coordinator's low watermark is merged in,
  and transactions of that coordinator at or below it that are still pending here are
  aborted locally: the coordinator has finished them, so their end never reaches us
  (Pulsar's rule; Pulsar aborts only the oldest per trigger, quasar all of them).
* A log append that fails, or a cursor write refused because another owner took the
  cursor, fences the handle (state Error): what the log holds is then unknown, and
  only a fresh handle's replay can tell. ``on_fenced`` tells the broker to drop it.

Crash points (``quasar.transaction.crash_points``): ``pa.after_ack_before_commit``
(an ACK is durable and applied) and ``pa.after_commit_record_before_cursor`` (a
COMMIT record is durable, the cursor is untouched).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from quasar.clock import Clock
from quasar.errors import (
    NotAllowedError,
    TooManyRequests,
    TransactionConflict,
)
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import ManagedCursor, ManagedLedger, Position

from ..crash_points import crash_point
from ..scheduler import Scheduler
from ..txn_status import TxnAction
from . import views
from .config import PendingAckConfig
from .handle_state import HandleEvent, PendingAckHandleState
from .lifecycle import HandleLifecycle
from .log import PendingAckLog, PendingAckLogWriter
from .low_watermark import LowWatermarks
from .records import AckedPosition, AckType, PendingAckOp, PendingAckRecord
from .results import AbortResult, CommitResult, NormalAck
from .state import PendingAckState, normalize
from .stats import PendingAckCounters, PositionInPendingAckState
from .store import PendingAckStore, abort_result, commit_result

log = logging.getLogger(__name__)

EndResult = CommitResult | AbortResult
LowWatermarkAbortListener = Callable[[TxnID, AbortResult], None]


@dataclass
class _End:
    action: TxnAction
    task: asyncio.Task[EndResult]


class PendingAckHandle:
    """The pending acks of one subscription; see the module docstring."""

    def __init__(
        self,
        cursor: ManagedCursor,
        log_ledger: ManagedLedger,
        topic: str,
        subscription: str,
        clock: Clock,
        scheduler: Scheduler,
        config: PendingAckConfig | None = None,
        *,
        on_low_watermark_abort: LowWatermarkAbortListener | None = None,
        on_fenced: Callable[[PendingAckHandle], None] | None = None,
        writer: PendingAckLogWriter | None = None,
        batch_size_max: int | None = None,
    ) -> None:
        """``batch_size_max``: the most members of a batch the broker accepts;
        replay treats a record claiming more as corrupt."""
        self._config = config if config is not None else PendingAckConfig()
        self._cursor = cursor
        self._log = PendingAckLog(
            log_ledger, read_entries=self._config.replay_read_entries, writer=writer,
            batch_size_max=batch_size_max,
        )
        self.topic = topic
        self.subscription = subscription
        self._describe = f"[{topic}][{subscription}]"
        self._clock = clock
        self._scheduler = scheduler
        self._life = HandleLifecycle(
            self._describe,
            self._config.max_waiting_requests,
            lambda: on_fenced(self) if on_fenced is not None else None,
        )
        self._state = PendingAckState(self._describe)
        self.counters = PendingAckCounters()
        # Wall-clock times of the log replay (Pulsar's recoverStartTime and
        # recoverEndTime in the pending-ack stats; 0 until it ran).
        self.recover_start_ms = 0
        self.recover_end_ms = 0
        self._store = PendingAckStore(
            describe=self._describe, cursor=cursor, log=self._log, state=self._state,
            life=self._life, scheduler=scheduler, config=self._config,
            counters=self.counters,
        )
        self._ending: dict[TxnID, _End] = {}
        self._lwm = LowWatermarks(
            self._describe,
            candidates=lambda: [t for t, _ in self._state.txns() if t not in self._ending],
            abort=self._low_watermark_abort,
            serving=lambda: self._life.serving,
            on_abort=on_low_watermark_abort or (lambda txn_id, result: None),
        )

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> PendingAckHandleState:
        return self._life.status

    @property
    def log(self) -> PendingAckLog:
        return self._log

    @property
    def pending_state(self) -> PendingAckState:
        """The in-memory state (read it, never change it: tests, admin views)."""
        return self._state

    @property
    def waiting_requests(self) -> int:
        return self._life.waiting

    # ------------------------------------------------------------------ lifecycle

    async def recover(self) -> None:
        """Replay the log, re-apply replayed commits to the cursor, flush it, serve.

        Requests that arrive meanwhile wait (up to ``max_waiting_requests``).

        Raises:
            CorruptRecordError: the log cannot be read (state Error: a log that
                cannot be read is never "recovered" by skipping records).
            ManagedLedgerClosed, MetadataError, BadVersion: from storage (Error).
            ServiceNotReady: the handle was closed during recovery.
            IllegalHandleTransition: called twice.
        """
        life = self._life
        life.transition(HandleEvent.RECOVER)
        self.recover_start_ms = self._clock.wall_ms()
        try:
            await self._store.replay()
        except BaseException:
            if life.status is PendingAckHandleState.INITIALIZING:
                life.transition(HandleEvent.REPLAY_FAILED)
            raise
        if life.status is not PendingAckHandleState.INITIALIZING:
            raise life.not_ready("recover")  # closed while replaying
        life.transition(HandleEvent.REPLAY_DONE)
        self.recover_end_ms = self._clock.wall_ms()
        self._store.release_log()
        log.info("%s: pending ack ready, %d transactions pending",
                 self._describe, self._state.txn_count)

    async def close(self) -> None:
        """Stop serving: refuse waiting and new requests, stop background work,
        persist the log cursor. Owns neither the ledgers nor the cursor."""
        if self._life.status is PendingAckHandleState.CLOSED:
            return
        self._life.transition(HandleEvent.CLOSE)
        self._store.stop()
        await self._lwm.stop()
        # An end cut short here is safe: without a durable record nothing happened,
        # with one the next handle's replay finishes it (re-applying a COMMIT).
        tasks = [end.task for end in self._ending.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            await self._log.close()
        except Exception:
            log.warning("%s: persisting the pending-ack log cursor failed",
                        self._describe, exc_info=True)

    # ------------------------------------------------------------------ acks

    async def individual_ack(
        self,
        txn_id: TxnID,
        acks: Sequence[tuple[Position, int | None, Sequence[int] | None]],
    ) -> None:
        """Acknowledge ``(position, batch_size, ack_set)`` entries inside ``txn_id``.

        ``ack_set`` (wire words, 1 = not acked) makes it a batch-index ack; ``None`` or
        ``[]`` acknowledges the whole entry. Returns once the ACK record is durable and
        applied. A retry of an ack this transaction already holds succeeds.

        Raises:
            TransactionConflict: see ``state`` for the rules.
            NotAllowedError: the transaction has ended here (or is at or below its
                coordinator's low watermark), or a position is negative.
            TooManyRequests: ``max_ongoing_transactions``/``max_pending_positions`` reached.
            ServiceNotReady: not Ready (Error, Closed, too many waiting), or the log
                append failed (the handle fenced itself).
        """
        await self._life.admit("ack")
        self._check_open_txn(txn_id)
        items = tuple(
            AckedPosition(_valid(p), tuple(s) if s else None, n if n else None)
            for p, n, s in acks
        )
        normalized = normalize(items)
        if not normalized:
            return  # nothing acknowledged (no positions, or ack sets that take nothing)
        self._check_bounds(txn_id, self._state.new_positions(normalized))
        try:
            self._state.check_individual(txn_id, normalized, self._cursor)
        except TransactionConflict:
            self.counters.conflicts += 1
            raise
        txn = self._state.get(txn_id)
        if txn is not None and all(
            p in txn.individual and txn.individual[p][0] | m == txn.individual[p][0]
            for p, (m, _) in normalized.items()
        ):
            return  # a retry: all of it is pending in this transaction already
        await self._store.write(PendingAckRecord(PendingAckOp.ACK, AckType.INDIVIDUAL, txn_id, items))
        crash_point("pa.after_ack_before_commit")

    async def cumulative_ack(self, txn_id: TxnID, position: Position) -> None:
        """Acknowledge every entry up to ``position`` inside ``txn_id`` (Exclusive and
        Failover subscriptions only: the broker checks the type).

        Raises:
            TransactionConflict: at/below mark-delete, another transaction holds the
                cumulative slot, lower than this transaction's, or covering another
                transaction's individual pending ack.
            NotAllowedError, TooManyRequests, ServiceNotReady: as ``individual_ack``.
        """
        await self._life.admit("cumulative ack")
        self._check_open_txn(txn_id)
        _valid(position)
        self._check_bounds(txn_id, 0)
        try:
            self._state.check_cumulative(txn_id, position, self._cursor)
        except TransactionConflict:
            self.counters.conflicts += 1
            raise
        if self._state.cumulative == (txn_id, position):
            return  # a retry
        await self._store.write(PendingAckRecord(
            PendingAckOp.ACK, AckType.CUMULATIVE, txn_id, (AckedPosition(position),)
        ))
        crash_point("pa.after_ack_before_commit")

    def _check_bounds(self, txn_id: TxnID, new_positions: int) -> None:
        """Raises ``TooManyRequests`` past ``max_ongoing_transactions`` or
        ``max_pending_positions`` (a soft bound: acks in flight are not counted)."""
        config, state = self._config, self._state
        limit = config.max_ongoing_transactions
        if limit and txn_id not in state and state.txn_count >= limit:
            raise TooManyRequests(
                f"{self._describe} {state.txn_count} transactions hold pending acks "
                f"(max_ongoing_transactions)"
            )
        limit = config.max_pending_positions
        if limit and new_positions and state.position_count + new_positions > limit:
            raise TooManyRequests(
                f"{self._describe} {state.position_count} entries are pending "
                f"(max_pending_positions)"
            )

    def _check_open_txn(self, txn_id: TxnID) -> None:
        ended = (
            txn_id in self._ending
            or self._store.ended(txn_id) is not None
            or self._lwm.covers(txn_id)
        )
        if ended:
            raise NotAllowedError(
                f"Transaction {txn_id} has been ended. Please use a new transaction "
                "to ack message."
            )

    # ------------------------------------------------------------------ ends

    async def commit(self, txn_id: TxnID, low_watermark: int) -> CommitResult:
        """Commit: COMMIT record, acks applied to the cursor, cursor flushed; then
        answer. Idempotent. ``low_watermark``: the coordinator's (inclusive; -1 when
        nothing has ended).

        Raises:
            ServiceNotReady: not Ready, or the log append failed (fenced).
            MetadataError: the cursor flush failed (retryable; the acks are applied in
                memory and a retry only flushes).
        """
        await self._life.admit("commit")
        result = await self._end_and_clean(txn_id, TxnAction.COMMIT, low_watermark)
        assert isinstance(result, CommitResult)
        return result

    async def abort(self, txn_id: TxnID, low_watermark: int) -> AbortResult:
        """Abort: ABORT record, pending acks dropped; returns what to redeliver.
        Idempotent (a repeated abort returns an empty result).

        Raises:
            ServiceNotReady: not Ready, or the log append failed (fenced).
        """
        await self._life.admit("abort")
        result = await self._end_and_clean(txn_id, TxnAction.ABORT, low_watermark)
        assert isinstance(result, AbortResult)
        return result

    async def end_txn(self, txn_id: TxnID, action: TxnAction, low_watermark: int) -> EndResult:
        """``commit`` or ``abort`` by ``action`` (what END_TXN_ON_SUBSCRIPTION does)."""
        if TxnAction(action) is TxnAction.COMMIT:
            return await self.commit(txn_id, low_watermark)
        return await self.abort(txn_id, low_watermark)

    async def _end_and_clean(
        self, txn_id: TxnID, action: TxnAction, low_watermark: int
    ) -> EndResult:
        self._lwm.merge(txn_id.most_bits, low_watermark)
        try:
            return await self._end(txn_id, action)
        finally:
            self._lwm.schedule()

    async def _end(self, txn_id: TxnID, action: TxnAction) -> EndResult:
        empty: EndResult = CommitResult() if action is TxnAction.COMMIT else AbortResult()
        running = self._ending.get(txn_id)
        if running is not None:
            if running.action is not action:
                return self._contradiction(txn_id, action, running.action, empty)
            return await asyncio.shield(running.task)
        unflushed = self._store.unflushed(txn_id)
        if unflushed is not None and action is TxnAction.COMMIT:
            await self._store.flush_cursor()  # an earlier commit's flush failed
            return unflushed
        done = self._store.ended(txn_id)
        if done is not None:
            return empty if done is action else self._contradiction(txn_id, action, done, empty)
        if txn_id not in self._state and not self._store.has_inflight(txn_id):
            self._store.remember_ended(txn_id, action)  # nothing here: no record needed
            return empty
        # The end runs as its own task: a caller that goes away (its connection
        # closed) must not leave a COMMIT applied but never flushed, and repeats join.
        task = asyncio.get_running_loop().create_task(self._drive_end(txn_id, action))
        end = _End(action, task)
        self._ending[txn_id] = end

        def finished(t: asyncio.Task[EndResult]) -> None:
            if self._ending.get(txn_id) is end:
                del self._ending[txn_id]
            if not t.cancelled():
                t.exception()  # retrieved: the callers re-raise it

        task.add_done_callback(finished)
        return await asyncio.shield(task)

    async def _drive_end(self, txn_id: TxnID, action: TxnAction) -> EndResult:
        cumulative = self._state.cumulative
        ack_type = (
            AckType.CUMULATIVE if cumulative is not None and cumulative[0] == txn_id
            else AckType.INDIVIDUAL
        )
        started = self._clock.monotonic_ms()
        if action is TxnAction.ABORT:
            try:
                applied = await self._store.write(
                    PendingAckRecord(PendingAckOp.ABORT, ack_type, txn_id)
                )
            except Exception:
                self.counters.abort_failed += 1
                raise
            self.counters.aborted += 1
            return abort_result(applied)
        record = PendingAckRecord(PendingAckOp.COMMIT, ack_type, txn_id)
        try:
            if not self._config.commit_flush_beside_record or self._store.has_inflight(txn_id):
                # (With an ACK of it still being written, its acks are not in the state
                # yet: the update can only be computed once the COMMIT is applied.)
                applied = await self._store.write(record)
                await self._store.flush_cursor()
            else:
                applied = await self._store.commit_beside_flush(record)
        except Exception:
            self.counters.commit_failed += 1
            raise
        self.counters.committed += 1
        self.counters.observe_commit_latency(self._clock.monotonic_ms() - started)
        return commit_result(applied)

    def _contradiction(
        self, txn_id: TxnID, asked: TxnAction, did: TxnAction, empty: EndResult
    ) -> EndResult:
        # The coordinator's decision is durable and final, so it never asks both; this
        # happens only when a low-watermark abort raced a late end. Pulsar answers
        # success (the transaction is simply unknown to it); so does quasar, loudly.
        self.counters.contradicting_ends += 1
        log.error("%s: asked to %s transaction %s, which was %s here",
                  self._describe, asked.name, txn_id, did.name)
        return empty

    # ------------------------------------------------------------------ low watermark

    async def _low_watermark_abort(self, txn_id: TxnID) -> AbortResult:
        result = await self._end(txn_id, TxnAction.ABORT)
        assert isinstance(result, AbortResult)
        self.counters.low_watermark_aborted += 1
        return result

    async def wait_for_low_watermark_check(self) -> None:
        """Wait for a low-watermark cleanup in progress (tests, shutdown)."""
        await self._lwm.wait()

    # ------------------------------------------------------------------ broker queries

    def is_pending(self, position: Position) -> bool:
        """True if every member of the entry is pending-acked by some transaction: the
        dispatcher must not deliver it. One dict lookup when nothing is pending there."""
        return views.is_pending(self._state, position)

    def pending_ack_set(self, position: Position) -> list[int] | None:
        """Members not pending in any transaction, as a wire ack set to AND with the
        cursor's (``[]``: none; ``None``: nothing pending at this entry)."""
        return views.pending_ack_set(self._state, position)

    def pending_positions(self) -> list[Position]:
        """Entries with any pending ack, sorted."""
        return self._state.positions()

    def filter_normal_ack(self, position: Position, ack_set: Sequence[int] | None) -> NormalAck:
        """How to apply a non-transactional individual ack (see ``NormalAck``)."""
        return views.filter_normal_ack(self._state, position, ack_set)

    # ------------------------------------------------------------------ stats

    def stats(self) -> dict[str, object]:
        """Pulsar's ``TransactionPendingAckStats`` plus quasar's counters."""
        return views.handle_stats(
            self.state, self._state, self.counters, self.low_watermarks(), self.waiting_requests
        )

    def transaction_stats(self, txn_id: TxnID) -> dict[str, object]:
        """Pulsar's ``TransactionInPendingAckStats``: ``{cumulativeAckPosition}``."""
        txn = self._state.get(txn_id)
        position = txn.cumulative if txn is not None else None
        return {"cumulativeAckPosition": str(position) if position is not None else None}

    def position_stats(
        self, position: Position, batch_index: int | None = None
    ) -> dict[str, object]:
        """Pulsar's ``PositionInPendingAckStats``: ``{state}``."""
        if self._life.status is not PendingAckHandleState.READY:
            state = PositionInPendingAckState.PENDING_ACK_NOT_READY
        else:
            state = views.position_state(self._state, self._cursor, position, batch_index)
        return {"state": state.value}

    def low_watermarks(self) -> dict[int, int]:
        return self._lwm.view()

    def internal_stats(self) -> dict[str, object]:
        """The pending-ack log's managed-ledger view (Pulsar's pending-ack internal
        stats)."""
        return views.internal_stats(self._log)

    def __repr__(self) -> str:
        return f"PendingAckHandle({self._describe}, {self._life.status.value})"


def _valid(position: Position) -> Position:
    if position.ledger_id < 0 or position.entry_id < 0:
        raise NotAllowedError(f"invalid message position {position}")
    return Position(position.ledger_id, position.entry_id)
