"""``TransactionCoordinator``: one coordinator (TC ``tc_id``) over its log.

Every request follows one pattern: check against the current state, build a record,
append it to the log, and once it is durable apply it to ``CoordinatorState`` (in log
order, from the append future's callback) before answering. Recovery replays the log
through the same ``apply``.

Ending a transaction (commit, abort, or a timeout, which is an abort from OPEN) is
the PIP-255 chain; a crash point sits between every two steps (``crash_points.py``):

1. write COMMITTING/ABORTING (the durable decision) — unless already written — and
   apply it to memory;                                   [tc.after_ending_written]
2. append the decision to the terminated-transaction preserver under the
   transaction's client name (COMMITTING counts as COMMITTED);
                                                         [tc.after_preserver_append]
3. send the decision to every produced partition and acknowledged subscription,
   concurrently, each retried every ``transaction_end_retry_interval_ms`` while it
   fails with a retryable error (a participant that no longer exists counts as done);
   then drop the participant lists from memory;          [tc.after_some_ends,
                                                          tc.after_all_ends_before_terminal]
4. flush the preserver: the outcome is durable under the client name before the
   coordinator may forget the transaction (the write is started right after step 2
   so that it overlaps step 3; here it is waited for);   [tc.after_preserver_flush]
5. write COMMITTED/ABORTED and apply it: the transaction leaves the state, and all
   its records are acknowledged on the log cursor so the log can be trimmed.
                                                         [tc.after_terminal_written]

END_TXN is answered after step 5 is durable (Pulsar answers once the terminal status
is written; deleting the records is not waited for). One end runs per transaction: a
repeated END_TXN with the same action joins it, the opposite action gets
``InvalidTxnStatus``. A transaction that is no longer live is answered from the
preserver when the END_TXN names the client: the same action as its outcome succeeds,
the opposite one gets ``InvalidTxnStatus`` naming the outcome; anything else is
``TransactionNotFound``. A non-retryable participant failure fails the request and
leaves the transaction COMMITTING/ABORTING, as in Pulsar; a repeated END_TXN or the
next recovery resumes it. A preserver that cannot write (or a coordinator closing)
fails the request with ``TransactionPreserverClosed`` (retryable) and the end is
resumed in the background every ``transaction_end_retry_interval_ms``.

Ownership (``ownership.py``): NEW_TXN records the caller's role as the owner; adding
partitions or subscriptions, ending, and an END_TXN answered from the preserver are
refused with ``TransactionNotFound`` to a ``Caller`` that is neither the owner nor a
super-user (a transaction without owner is anyone's). Outcomes are preserved under
the owner and the client name together.

Lifecycle (Pulsar's TransactionMetadataStoreState): NONE → INITIALIZING (replay) →
READY → CLOSING → CLOSED. Requests outside READY get ``TransactionCoordinatorNotFound``
(retryable: the client looks the coordinator up again). A failed log append fences the
coordinator: it closes itself and tells ``on_fenced`` so its owner can reload it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from quasar.clock import Clock
from quasar.errors import (
    REFUSED_CLIENT_NAME,
    BrokerError,
    CorruptRecordError,
    InvalidTxnStatus,
    NotAllowedError,
    TransactionCoordinatorNotFound,
    TransactionNotFound,
    TransactionPreserverClosed,
    tag_refusal,
)
from quasar.protocol import pb, txnlog_pb
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import ManagedLedger
from quasar.storage.stats_buckets import StatsBuckets

from ..batched_log import BatchedLogControl, LogPosition
from ..batched_log.deletion import corrupt_at
from ..buffer_client import TransactionBufferClient, participants
from ..crash_points import crash_point
from ..errors import ReachMaxActiveTxn, TransactionTimeoutTooLong
from ..scheduler import AsyncioScheduler, Scheduler
from ..txn_status import (
    EndStep,
    TxnAction,
    TxnStatus,
    check_preserved_end,
    end_step,
    ended_status,
    ending_status,
    expect_status,
)
from .config import CoordinatorConfig
from .fanout import EndFanOut
from .log import Record, TransactionLog
from .meta import TxnMeta
from .ownership import BROKER, Caller, not_owner
from .preserver import PreserverStore, TerminatedTxnPreserver
from .preserver_format import TerminatedTxn
from .state import ApplyResult, CoordinatorState, Op
from .timeouts import TimeoutTracker

log = logging.getLogger(__name__)

#: Longest client name accepted on NEW_TXN/END_TXN (it is a log field and a key).
CLIENT_NAME_LENGTH_MAX = 1024

_PB_STATUS = {
    TxnStatus.OPEN: txnlog_pb.OPEN,
    TxnStatus.COMMITTING: txnlog_pb.COMMITTING,
    TxnStatus.COMMITTED: txnlog_pb.COMMITTED,
    TxnStatus.ABORTING: txnlog_pb.ABORTING,
    TxnStatus.ABORTED: txnlog_pb.ABORTED,
}


class CoordinatorStatus(Enum):
    NONE = "None"
    INITIALIZING = "Initializing"
    READY = "Ready"
    CLOSING = "Closing"
    CLOSED = "Closed"


#: Upper bounds (ms) of Pulsar's transaction execution-latency buckets
#: (``pulsar_txn_execution_latency_le_*``): from open to the terminal status.
EXECUTION_LATENCY_BUCKETS_MS: tuple[int, ...] = (
    10, 20, 50, 100, 500, 1_000, 5_000, 15_000, 30_000, 60_000, 300_000, 1_500_000, 3_000_000,
)


@dataclass
class CoordinatorStats:
    """Counters (Pulsar's created/committed/aborted/timeout/appendLog counts), the
    execution-latency buckets and when the last recovery ran (wall ms, 0: never)."""

    created: int = 0
    committed: int = 0
    aborted: int = 0
    timed_out: int = 0
    appended: int = 0
    execution_latency: StatsBuckets = field(
        default_factory=lambda: StatsBuckets(EXECUTION_LATENCY_BUCKETS_MS)
    )
    recover_start_ms: int = 0
    recover_end_ms: int = 0


@dataclass
class _EndDriver:
    action: TxnAction
    task: asyncio.Task[None]


class TransactionCoordinator:
    """One transaction coordinator; see the module docstring."""

    def __init__(
        self,
        tc_id: int,
        log: ManagedLedger,
        clock: Clock,
        config: CoordinatorConfig,
        buffer_client: TransactionBufferClient,
        *,
        scheduler: Scheduler | None = None,
        on_fenced: Callable[[TransactionCoordinator], None] | None = None,
        preserver_store: PreserverStore | None = None,
        batched_log: BatchedLogControl | None = None,
    ) -> None:
        self._tc_id = tc_id
        self._log = TransactionLog(
            log, read_entries=config.replay_read_entries, batched_log=batched_log,
            name=str(tc_id), scheduler=scheduler, clock=clock,
        )
        self._clock = clock
        self._config = config
        self._client = buffer_client
        self._scheduler: Scheduler = scheduler if scheduler is not None else AsyncioScheduler()
        self._on_fenced = on_fenced
        self._state = CoordinatorState(tc_id)
        self._status = CoordinatorStatus.NONE
        self._next_seq = 0
        self._pending_new: set[int] = set()
        self._ending: dict[int, _EndDriver] = {}
        self._timeouts = TimeoutTracker(clock, self._scheduler, self._on_timeout)
        self._fanout = EndFanOut(
            tc_id, buffer_client, self._scheduler, config.transaction_end_retry_interval_ms,
            self.low_watermark,
        )
        self._close_task: asyncio.Task[None] | None = None
        self.stats = CoordinatorStats()
        #: Terminated transactions per owner role and client name (PIP-255);
        #: disabled without a store or with ``transaction_meta_persist_count`` 0.
        self.preserver = TerminatedTxnPreserver(
            tc_id,
            preserver_store,
            clock,
            self._scheduler,
            persist_count=config.transaction_meta_persist_count,
            persist_time_ms=config.transaction_meta_persist_time_in_hour * 3_600_000,
            expire_check_interval_ms=(
                config.transaction_meta_expire_check_interval_in_second * 1000
            ),
            flush_timeout_ms=config.preserver_flush_timeout_ms,
        )

    # ------------------------------------------------------------------ properties

    @property
    def tc_id(self) -> int:
        return self._tc_id

    @property
    def status(self) -> CoordinatorStatus:
        return self._status

    @property
    def ledger(self) -> ManagedLedger:
        return self._log.ledger

    @property
    def transaction_log(self) -> TransactionLog:
        return self._log

    def low_watermark(self) -> int:
        """Every transaction of this coordinator with least bits ``<=`` this has
        ended (``-1``: none has). Sent with every end call."""
        return self._state.low_watermark()

    def active_transactions(self) -> int:
        """Live transactions (OPEN, COMMITTING, ABORTING)."""
        return len(self._state)

    def next_sequence(self) -> int:
        """The least bits the next new transaction will get."""
        return self._next_seq

    def transactions(self) -> list[TxnMeta]:
        """Copies of the live transactions, in sequence order."""
        return [m.snapshot() for m in self._state.txns()]

    def open_timestamps(self) -> dict[TxnID, int]:
        """When each live transaction was opened (wall ms), without copying metadata:
        what the metrics read on every scrape."""
        return {m.txn_id: m.open_timestamp_ms for m in self._state.txns()}

    def ending_transactions(self) -> list[TxnID]:
        """Transactions whose end is in progress in this process."""
        return [TxnID(self._tc_id, s) for s in self._ending]

    def get_txn_meta(self, txn_id: TxnID) -> TxnMeta:
        """A copy of a live transaction's metadata.

        Raises:
            TransactionNotFound: not live on this coordinator (never was, or ended).
        """
        return self._live(txn_id).snapshot()

    def require_live(self, txn_id: TxnID) -> None:
        """Check that ``txn_id`` is live here before a request validates what it
        adds, so an unknown transaction is answered as such first.

        Raises:
            TransactionNotFound: not live on this coordinator.
        """
        self._live(txn_id)

    def counts(self, txn_id: TxnID) -> bool:
        """Whether ``txn_id`` counts against ``max_active_transactions_per_coordinator``
        here: live, or its NEW_TXN record is still being written."""
        if txn_id.most_bits != self._tc_id:
            return False
        seq = txn_id.least_bits
        return seq in self._pending_new or self._state.get(seq) is not None

    def refuses(self, txn_id: TxnID, caller: Caller) -> bool:
        """Whether ``txn_id`` is live here and ``caller`` may not act on it (a
        transaction this coordinator does not know is not refused here: whoever uses
        it learns that where it is used)."""
        meta = self._state.get(txn_id.least_bits) if txn_id.most_bits == self._tc_id else None
        return meta is not None and not caller.may_act_on(meta.owner)

    def verify_txn_ownership(self, txn_id: TxnID, role: str) -> bool:
        """True if ``role`` may act on the transaction: no owner was recorded (auth
        off, or an old record) or it is the owner. Super-users are the caller's call.

        Raises:
            TransactionNotFound: not live on this coordinator.
        """
        owner = self._live(txn_id).owner
        return owner is None or owner == role

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Recover the preserver and the log, then serve.

        Loads the terminated-transaction preserver from its store, then replays every record still in the log through ``CoordinatorState.apply``
        (records that fail to apply are deleted, as Pulsar does), recovers the id
        sequence, re-arms timeouts from absolute deadlines, becomes READY and re-drives
        every COMMITTING/ABORTING transaction in the background.

        Raises:
            CorruptRecordError: the log cannot be read; the coordinator stays closed.
            TransactionPreserverClosed: the preserver's store cannot be read.
            ManagedLedgerClosed, MetadataError: from storage.
        """
        assert self._status is CoordinatorStatus.NONE, "start() once"
        self._status = CoordinatorStatus.INITIALIZING
        self.stats.recover_start_ms = self._clock.wall_ms()
        try:
            await self.preserver.load()
            self._log.open()
            self._state = CoordinatorState(
                self._tc_id, await self._log.recovered_max_local_txn_id()
            )
            async for position, record in self._log.replay():
                try:
                    result = self._state.apply(record, position)
                except (InvalidTxnStatus, TransactionNotFound) as exc:
                    log.info("tc %d: dropping log record at %s: %s", self._tc_id, position, exc)
                    self._log.delete([position], self._state.max_local_txn_id)
                    continue
                except CorruptRecordError as exc:
                    raise corrupt_at(self._log.name, position.position, exc) from exc
                self._after_apply(result)
        except BaseException:
            self._status = CoordinatorStatus.CLOSED
            raise
        self._next_seq = self._state.max_local_txn_id + 1
        self.stats.recover_end_ms = self._clock.wall_ms()
        self._status = CoordinatorStatus.READY
        self._timeouts.start()
        self.preserver.start()
        for meta in self._state.txns():
            if meta.status.is_ending:
                action = TxnAction.COMMIT if meta.status is TxnStatus.COMMITTING else TxnAction.ABORT
                self._start_end(meta.txn_id.least_bits, action, is_timeout=False)
        log.info(
            "tc %d ready: %d live transactions, next sequence %d",
            self._tc_id, len(self._state), self._next_seq,
        )

    async def close(self) -> None:
        """Stop serving: cancel timers and in-flight ends, let the preserver's write in
        flight land (bounded by ``preserver_flush_timeout_ms``), persist the log cursor.

        In-flight ends are not lost: their COMMITTING/ABORTING records are durable and
        the next ``start`` re-drives them. Does not close the managed ledger.
        """
        if self._close_task is None:
            self._close_task = asyncio.get_running_loop().create_task(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        self._status = CoordinatorStatus.CLOSING
        self._timeouts.stop()
        self.preserver.close()
        tasks = [d.task for d in self._ending.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.preserver.wait_idle()
        try:
            await self._log.close()
        except Exception:
            log.warning("tc %d: persisting the log cursor failed", self._tc_id, exc_info=True)
        self._status = CoordinatorStatus.CLOSED

    def _fence(self, exc: BaseException) -> None:
        if self._status is not CoordinatorStatus.READY:
            return
        log.error("tc %d: log append failed, closing: %s", self._tc_id, exc)
        self._status = CoordinatorStatus.CLOSING
        self._close_task = asyncio.get_running_loop().create_task(self._close())
        if self._on_fenced is not None:
            self._on_fenced(self)

    # ------------------------------------------------------------------ requests

    async def new_txn(
        self, timeout_ms: int, owner: str | None = None, client_name: str | None = None
    ) -> TxnID:
        """Open a transaction that aborts ``timeout_ms`` from now unless ended.

        ``client_name`` (NEW_TXN's, optional) is logged with the transaction; its
        outcome is preserved under that name so that a repeated END_TXN naming the
        client is answered after the transaction ended. A blank name counts as none.

        Raises:
            As ``new_txn_nowait``, and its future's errors.
        """
        txn_id, durable = self.new_txn_nowait(timeout_ms, owner, client_name)
        await durable
        return txn_id

    def new_txn_nowait(
        self, timeout_ms: int, owner: str | None = None, client_name: str | None = None
    ) -> tuple[TxnID, asyncio.Future[ApplyResult]]:
        """``new_txn`` for a caller that waits by callback (the broker's requests):
        the id, and the future that resolves once its record is durable and applied.

        Raises:
            TransactionCoordinatorNotFound: not ready (recovering, closing, fenced).
            ReachMaxActiveTxn: ``max_active_transactions_per_coordinator`` are live.
            TransactionTimeoutTooLong: ``timeout_ms`` is above
                ``transaction_max_timeout_millis``.
            NotAllowedError: ``client_name`` is longer than ``CLIENT_NAME_LENGTH_MAX``.
            ValueError: negative timeout, or a blank owner (Pulsar: "Owner can't be
                blank"; ``None`` means authentication is off).
        """
        self._check_ready("new transaction")
        client_name = _client_name(client_name)
        if timeout_ms < 0:
            raise ValueError(f"transaction timeout must be >= 0 ms, got {timeout_ms}")
        if owner is not None and not owner.strip():
            raise ValueError("Owner can't be blank")
        max_timeout_ms = self._config.transaction_max_timeout_millis
        if max_timeout_ms > 0 and timeout_ms > max_timeout_ms:
            raise TransactionTimeoutTooLong(
                f"Transaction timeout {timeout_ms} ms is more than "
                f"transactionMaxTimeoutMillis {max_timeout_ms} ms"
            )
        limit = self._config.max_active_transactions_per_coordinator
        if limit > 0 and len(self._state) + len(self._pending_new) >= limit:
            raise ReachMaxActiveTxn(f"New txn op reach max active txn! tcId : {self._tc_id}")
        seq = self._next_seq
        self._next_seq += 1
        record = self._record(Op.NEW, seq)
        record.start_time = record.last_modification_time
        record.timeout_ms = timeout_ms
        if owner is not None:
            record.owner = owner
        if client_name is not None:
            record.clientName = client_name
        self._pending_new.add(seq)
        return TxnID(self._tc_id, seq), self._write(record)

    async def add_partitions(
        self, txn_id: TxnID, partitions: Sequence[str], caller: Caller = BROKER
    ) -> None:
        """Register topic partitions the transaction produces to.

        Raises:
            As ``add_partitions_nowait``, and its future's errors.
        """
        await _when_durable(self.add_partitions_nowait(txn_id, partitions, caller))

    def add_partitions_nowait(
        self, txn_id: TxnID, partitions: Sequence[str], caller: Caller = BROKER
    ) -> asyncio.Future[ApplyResult] | None:
        """``add_partitions`` for a caller that waits by callback: the future of the
        record, or ``None`` when every partition was registered already.

        Raises:
            TransactionCoordinatorNotFound: not ready.
            TransactionNotFound: not live on this coordinator, or ``caller`` is
                neither its owner nor a super-user.
            InvalidTxnStatus: not OPEN (an end has started).
        """
        self._check_ready("add produced partition")
        meta = self._registrable(txn_id, caller)
        new = [p for p in dict.fromkeys(partitions) if p not in meta.produced_partitions]
        if not new:
            return None
        record = self._record(Op.ADD_PARTITION, txn_id.least_bits)
        record.partitions.extend(new)
        return self._write(record)

    async def add_subscriptions(
        self,
        txn_id: TxnID,
        subscriptions: Sequence[tuple[str, str]],
        caller: Caller = BROKER,
    ) -> None:
        """Register ``(topic, subscription)`` pairs the transaction acknowledges on.

        Raises:
            As ``add_subscriptions_nowait``, and its future's errors.
        """
        await _when_durable(self.add_subscriptions_nowait(txn_id, subscriptions, caller))

    def add_subscriptions_nowait(
        self,
        txn_id: TxnID,
        subscriptions: Sequence[tuple[str, str]],
        caller: Caller = BROKER,
    ) -> asyncio.Future[ApplyResult] | None:
        """``add_subscriptions`` for a caller that waits by callback (see
        ``add_partitions_nowait``).

        Raises:
            TransactionCoordinatorNotFound: not ready.
            TransactionNotFound: not live on this coordinator, or ``caller`` is
                neither its owner nor a super-user.
            InvalidTxnStatus: not OPEN (an end has started).
        """
        self._check_ready("add acked subscription")
        meta = self._registrable(txn_id, caller)
        new = [s for s in dict.fromkeys(subscriptions) if s not in meta.acked_subscriptions]
        if not new:
            return None
        record = self._record(Op.ADD_SUBSCRIPTION, txn_id.least_bits)
        record.subscriptions.extend(pb.Subscription(topic=t, subscription=s) for t, s in new)
        return self._write(record)

    async def end_txn(
        self,
        txn_id: TxnID,
        action: TxnAction,
        client_name: str | None = None,
        caller: Caller = BROKER,
    ) -> None:
        """Commit or abort; returns once COMMITTED/ABORTED is durable, or at once if
        the transaction already ended that way and ``client_name`` has it preserved.

        Raises:
            TransactionCoordinatorNotFound: not ready, or closed while ending without
                a preserver (the decision, if written, is re-driven on reload; retry).
            TransactionPreserverClosed: the preserver could not make the outcome
                durable (store failing or slow) or the coordinator closed while
                ending; retryable, the end is resumed in the background.
            TransactionNotFound: not live, and not preserved under ``client_name``
                (never existed, ended long ago, or no client name given); or
                ``caller`` is neither the owner nor a super-user (of the live
                transaction, or of the preserved outcome).
            InvalidTxnStatus: the opposite end is in progress or was the outcome.
            NotAllowedError: ``client_name`` is longer than ``CLIENT_NAME_LENGTH_MAX``.
            Exception: a participant's non-retryable failure (the transaction stays
                COMMITTING/ABORTING; repeating END_TXN resumes it).
            ValueError: ``action`` is not a ``TxnAction`` value (Pulsar: unsupported
                action).
        """
        driver = self.end_txn_nowait(txn_id, action, client_name, caller)
        if driver is None:
            return
        try:
            await asyncio.shield(driver)
        except asyncio.CancelledError:
            if driver.cancelled():
                raise self._closed_while_ending(txn_id) from None
            raise

    def end_txn_nowait(
        self,
        txn_id: TxnID,
        action: TxnAction,
        client_name: str | None = None,
        caller: Caller = BROKER,
    ) -> asyncio.Task[None] | None:
        """``end_txn`` for a caller that waits by callback: the task driving the end
        (shared with repeated requests: wait for it, never cancel it), or ``None`` when
        the request is answered already (from the preserver). Once the task is done,
        ``end_failure`` says what to answer.

        Raises:
            As ``end_txn``, for what is known before the end starts.
        """
        self._check_ready("end transaction")
        action = TxnAction(action)
        client_name = _client_name(client_name)
        meta = self._state.get(txn_id.least_bits) if txn_id.most_bits == self._tc_id else None
        if meta is None:
            self._answer_from_preserver(txn_id, action, client_name, caller)
            return None
        if meta.owner is not None and not caller.may_act_on(meta.owner):
            raise not_owner(txn_id, caller)
        driver = self._ending.get(txn_id.least_bits)
        if driver is None:
            end_step(meta.status, action, txn_id)  # raises on the opposite decision
            driver = self._start_end(txn_id.least_bits, action, is_timeout=False)
        elif driver.action is not action:
            expect_status(ending_status(driver.action), ending_status(action), txn_id)
        return driver.task

    def end_failure(self, txn_id: TxnID, driver: asyncio.Task[None]) -> BaseException | None:
        """The error to answer for a finished end of ``end_txn_nowait`` (``None``:
        it succeeded). A cancelled end means this coordinator closed while ending."""
        if driver.cancelled():
            return self._closed_while_ending(txn_id)
        return driver.exception()

    def _closed_while_ending(self, txn_id: TxnID) -> BrokerError:
        why = f"Transaction coordinator {self._tc_id} closed while ending {txn_id}"
        if self.preserver.enabled:
            return TransactionPreserverClosed(why)
        return TransactionCoordinatorNotFound(why)

    def _answer_from_preserver(
        self, txn_id: TxnID, action: TxnAction, client_name: str | None, caller: Caller
    ) -> None:
        # Only outcomes preserved under an owner the caller may act on: another
        # role's outcome under the same client name is "not found", as it would be
        # for a live transaction of that role.
        preserved = self.preserver.find(client_name, txn_id, caller)
        if preserved is None:
            raise TransactionNotFound(f"The transaction {txn_id} is not found")
        check_preserved_end(preserved.status, action, txn_id)

    # ------------------------------------------------------------------ discovery

    def ended_outcome(self, txn_id: TxnID) -> TerminatedTxn | None:
        """How a transaction that is no longer live ended, if the preserver still
        holds it under any client name and owner (admin lookups by id only)."""
        if txn_id.most_bits != self._tc_id or txn_id.least_bits in self._state:
            return None
        return self.preserver.find_by_id(txn_id)

    def client_transactions(
        self, client_name: str, caller: Caller = BROKER
    ) -> tuple[list[TxnMeta], list[TerminatedTxn]]:
        """``client_name``'s live transactions (copies, in sequence order) and its
        preserved terminated ones (oldest first) that are no longer live, of the
        owners ``caller`` may act on (its own role's; every role's for a super-user).

        Raises:
            TransactionCoordinatorNotFound: not ready.
        """
        self._check_ready("list client transactions")
        live = [
            m.snapshot()
            for m in self._state.txns()
            if m.client_name == client_name and caller.may_act_on(m.owner)
        ]
        terminated = [
            t
            for t in self.preserver.terminated(client_name, caller)
            if t.txn_id.least_bits not in self._state
        ]
        return live, terminated

    # ------------------------------------------------------------------ ending

    def _start_end(self, seq: int, action: TxnAction, *, is_timeout: bool) -> _EndDriver:
        task = asyncio.get_running_loop().create_task(self._drive_end(seq, action, is_timeout))
        driver = _EndDriver(action, task)
        self._ending[seq] = driver
        task.add_done_callback(lambda t: self._end_finished(seq, driver, t))
        return driver

    def _end_finished(self, seq: int, driver: _EndDriver, task: asyncio.Task[None]) -> None:
        if self._ending.get(seq) is driver:
            del self._ending[seq]
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("tc %d: ending (%d,%d) failed: %r", self._tc_id, self._tc_id, seq, exc)
            if isinstance(exc, TransactionPreserverClosed):
                # Nobody may ask again (a timeout abort, a client that gave up): keep
                # trying, so the transaction does not stay decided-but-live forever.
                self._scheduler.call_later(
                    self._config.transaction_end_retry_interval_ms, lambda: self._resume_end(seq)
                )

    def _resume_end(self, seq: int) -> None:
        if self._status is not CoordinatorStatus.READY or seq in self._ending:
            return
        meta = self._state.get(seq)
        if meta is not None and meta.status.is_ending:
            action = TxnAction.COMMIT if meta.status is TxnStatus.COMMITTING else TxnAction.ABORT
            self._start_end(seq, action, is_timeout=False)

    async def _drive_end(self, seq: int, action: TxnAction, is_timeout: bool) -> None:
        txn_id = TxnID(self._tc_id, seq)
        meta = self._live(txn_id)
        step = end_step(meta.status, action, txn_id)
        deciding = ending_status(action)
        if step is EndStep.START:
            await self._write(self._update(seq, TxnStatus.OPEN, deciding))
            if is_timeout:
                self.stats.timed_out += 1
            crash_point("tc.after_ending_written")
        meta = self._live(txn_id)
        change = self.preserver.append(
            txn_id, meta.status, meta.client_name, meta.last_modification_ms, meta.owner
        )
        crash_point("tc.after_preserver_append")
        if change:
            # Start writing the outcome now so that the write overlaps the ends (it
            # would otherwise add a storage round trip to every commit); it is only
            # waited for, and written again if this attempt failed, after them.
            self.preserver.start_flush(upto=change)
        await self._fanout.deliver(
            txn_id, action, participants(meta.partitions(), meta.subscriptions())
        )
        self._state.release_participants(seq)
        crash_point("tc.after_all_ends_before_terminal")
        if change:
            # Only this transaction's outcome must be durable before it is forgotten.
            await self.preserver.flush(upto=change)
        crash_point("tc.after_preserver_flush")
        final = ended_status(action)
        await self._write(self._update(seq, deciding, final))
        crash_point("tc.after_terminal_written")
        self.stats.execution_latency.add_value(self._clock.wall_ms() - meta.open_timestamp_ms)
        if final is TxnStatus.COMMITTED:
            self.stats.committed += 1
        else:
            self.stats.aborted += 1

    def _on_timeout(self, seq: int) -> None:
        if self._status is not CoordinatorStatus.READY:
            return
        meta = self._state.get(seq)
        if meta is None or meta.status is not TxnStatus.OPEN or seq in self._ending:
            return  # already ending or ended: a timeout never overrides a decision
        self._start_end(seq, TxnAction.ABORT, is_timeout=True)

    # ------------------------------------------------------------------ the write path

    def _write(self, record: Record) -> asyncio.Future[ApplyResult]:
        """Append ``record``; once durable, apply it (in log order) and resolve.

        Raises (through the future):
            TransactionCoordinatorNotFound: the append failed; the coordinator fenced.
            InvalidTxnStatus, TransactionNotFound: the record lost a race on apply;
                it was deleted from the log again.
        """
        seq = record.txnid_least_bits
        is_new = record.metadata_op == Op.NEW
        try:
            appended = self._log.append(record)
        except Exception as exc:
            self._pending_new.discard(seq)
            self._fence(exc)
            raise self._not_found("log append failed") from exc
        result: asyncio.Future[ApplyResult] = asyncio.get_running_loop().create_future()

        def on_durable(f: asyncio.Future[LogPosition]) -> None:
            if is_new:
                self._pending_new.discard(seq)
            failure = asyncio.CancelledError() if f.cancelled() else f.exception()
            if failure is not None:
                self._fence(failure)
                if not result.done():
                    err = self._not_found("log append failed")
                    err.__cause__ = failure
                    result.set_exception(err)
                return
            self.stats.appended += 1
            position = f.result()
            try:
                applied = self._state.apply(record, position)
            except (InvalidTxnStatus, TransactionNotFound) as exc:
                self._log.delete([position], self._state.max_local_txn_id)
                if not result.done():
                    result.set_exception(exc)
                return
            self._after_apply(applied)
            if not result.done():
                result.set_result(applied)

        appended.add_done_callback(on_durable)
        return result

    def _after_apply(self, result: ApplyResult) -> None:
        """Side effects of an applied record; shared by live requests and replay."""
        seq = result.txn.txn_id.least_bits
        if result.created:
            self.stats.created += 1
            self._timeouts.add(seq, result.txn.timeout_at_ms)
        elif result.ended:
            self._timeouts.remove(seq)
        elif result.txn.status is not TxnStatus.OPEN:
            self._timeouts.remove(seq)  # decided: the timeout no longer applies
        if result.garbage:
            self._log.delete(result.garbage, self._state.max_local_txn_id)

    def _record(self, op: Record.TransactionMetadataOp, seq: int) -> Record:
        record = Record(
            metadata_op=op,
            txnid_most_bits=self._tc_id,
            txnid_least_bits=seq,
            last_modification_time=self._clock.wall_ms(),
        )
        if self._next_seq > 0:  # always, for a record of an existing transaction
            record.max_local_txn_id = self._next_seq - 1
        return record

    def _update(self, seq: int, expected: TxnStatus, new: TxnStatus) -> Record:
        record = self._record(Op.UPDATE, seq)
        record.expected_status = _PB_STATUS[expected]
        record.new_status = _PB_STATUS[new]
        return record

    # ------------------------------------------------------------------ checks

    def _not_found(self, why: str) -> BrokerError:
        return TransactionCoordinatorNotFound(
            f"Transaction coordinator {self._tc_id} is not available "
            f"({self._status.value}): {why}"
        )

    def _check_ready(self, operation: str) -> None:
        if self._status is not CoordinatorStatus.READY:
            raise self._not_found(f"cannot {operation}")

    def _live(self, txn_id: TxnID) -> TxnMeta:
        meta = self._state.get(txn_id.least_bits) if txn_id.most_bits == self._tc_id else None
        if meta is None:
            raise TransactionNotFound(f"The transaction {txn_id} is not found")
        return meta

    def _registrable(self, txn_id: TxnID, caller: Caller) -> TxnMeta:
        meta = self._live(txn_id)
        if meta.owner is not None and not caller.may_act_on(meta.owner):
            raise not_owner(txn_id, caller)
        driver = self._ending.get(txn_id.least_bits)
        # An end already decided in this process may not have written its -ING record
        # yet; refuse now rather than let the registration race that record (if it
        # lost, its apply would fail the same way).
        current = ending_status(driver.action) if driver is not None else meta.status
        expect_status(current, TxnStatus.OPEN, txn_id)
        return meta


async def _when_durable(record: asyncio.Future[ApplyResult] | None) -> None:
    """Wait for a registration's record, if it needed one."""
    if record is not None:
        await record


def _client_name(name: str | None) -> str | None:
    """A request's client name: ``None`` if absent or blank.

    Raises:
        NotAllowedError: longer than ``CLIENT_NAME_LENGTH_MAX`` (tagged as a refusal
            of hostile input, counted where the request is answered).
    """
    if name is None or not name.strip():
        return None
    if len(name) > CLIENT_NAME_LENGTH_MAX:
        raise tag_refusal(
            NotAllowedError(
                f"client name of {len(name)} characters (at most {CLIENT_NAME_LENGTH_MAX})"
            ),
            REFUSED_CLIENT_NAME,
        )
    return name
