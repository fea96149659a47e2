"""A client transaction (asyncio core) and its asyncio handle.

:class:`TransactionImpl` holds what the client knows about one transaction:

* its state (see :mod:`quasar.client.txn_state`) and a timer that moves an OPEN
  transaction to TIME_OUT after ``timeout_ms``. Sends and acks are then refused
  locally; the coordinator aborts the transaction on its own timer;
* the partitions and subscriptions registered with the coordinator. Each is registered
  once; concurrent sends to the same partition wait for the same registration;
* the operations (sends, acks) in flight and the ones that failed. ``commit()`` first
  waits for every operation; if one failed, it aborts instead (as Pulsar's client
  does) and raises :class:`TransactionHasOperationFailed`;
* the END_TXN exchange, described below. The data of the transaction is never re-sent.

Idempotent commit and abort (PIP-255). Every NEW_TXN and END_TXN carries the client's
name (``Client(client_name=...)``, by default a random ``quasar-<hex>`` per client
instance). The coordinator keeps the outcome of each name's recent transactions after
they end (its *preserver*), so a repeated END_TXN is answered with the real outcome:

* the same action again (commit after commit, abort after abort, also after the
  coordinator moved or restarted) -> success;
* the opposite action -> ``InvalidTxnStatus`` naming the real status.

``commit()`` / ``abort()`` therefore ask until they get a definite answer: an END_TXN
whose answer was lost (connection closed, request timed out) or that was refused with
a retryable error (``TransactionCoordinatorNotFound``: the coordinator is moving or
loading; ``TransactionPreserverClosed``: the coordinator is closing) is sent again,
with backoff, for at most ``transaction_end_timeout_ms`` per call (default 60 s; None:
no bound; ``transaction_end_retry_timeout_ms`` is its deprecated alias). A retried
END_TXN answered with success *is* success. Without a definite answer in time the call
raises :class:`TransactionOutcomeUnknown` carrying ``txn_id``; ``state()`` stays
COMMITTING/ABORTING and calling the same method again keeps asking.

One answer stays ambiguous: TransactionNotFound to a *retry* (or to a resumed
transaction). The coordinator forgot the transaction and its preserver does not have
it (preservation off, trimmed by count or expired, a broker without PIP-255, another
client name); the lost attempt may have ended it either way, so that is
:class:`TransactionOutcomeUnknown` too (state ERROR). TransactionNotFound to a first
attempt is definite (the transaction timed out and was removed).

Ending twice on one handle: the same action again succeeds once it is done (and joins
it while in progress); the opposite action raises ``InvalidTxnStatus`` locally.

Resuming (``client.resume_transaction(txn_id)``): a handle for a transaction this
handle did not open (another process, or an earlier life of this one; the seed's
"reconstruct the transaction to commit again"). It has no sends or acks of its own,
refuses new ones, and has no client-side timer; ``commit()`` / ``abort()`` send
END_TXN with the given client name and report the coordinator's answer as above. Its
state is OPEN until one of them is called.

Journal (``Client(transaction_journal_dir=...)``): before the first END_TXN of a
``commit()`` / ``abort()`` call the transaction is recorded durably in that
directory, and the record is removed once the answer is definite (success or a
definite refusal); an unknown outcome keeps it. The format is drawn in
:mod:`quasar.client.txn_journal`. ``client.unfinished_transactions()`` lists the
records a crashed process left.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from quasar.client.backoff import Backoff
from quasar.client.config import ClientConfig
from quasar.client.exceptions import (
    InvalidConfiguration,
    TransactionHasOperationFailed,
    TransactionOutcomeUnknown,
)
from quasar.client.receipts import SendCallback
from quasar.client.txn_coordinator import TransactionCoordinatorClient
from quasar.client.txn_journal import TransactionJournal
from quasar.client.txn_state import TransactionState, check_transition
from quasar.client.waiters import park, wake_all
from quasar.errors import (
    AlreadyClosed,
    BrokerError,
    InvalidTxnStatus,
    QuasarError,
    Timeout,
    TransactionNotFound,
)
from quasar.protocol import pb
from quasar.protocol.txn_id import TxnID

log = logging.getLogger(__name__)
S = TransactionState


class AbortListener(Protocol):
    """A consumer that acked cumulatively in a transaction; told when it aborts."""

    def on_transaction_aborted(self) -> None: ...


class TxnOp:
    """One send or ack counted as in flight in a transaction until ``finish``.

    It is also the send callback of its message: calling it settles the operation
    and then calls the callback it was begun with. One object per message, and no
    closure: a transaction's sends cost about what plain sends cost.
    """

    __slots__ = ("_txn", "_callback", "_done")

    def __init__(self, txn: TransactionImpl, callback: SendCallback | None) -> None:
        self._txn = txn
        self._callback = callback
        self._done = False

    def finish(self, error: BaseException | None) -> None:
        """Mark the operation settled (``error`` None: it succeeded). Idempotent."""
        if self._done:
            return
        self._done = True
        self._txn._op_finished(error)

    def __call__(self, error: BaseException | None, message_id: Any) -> None:
        # ``finish`` and ``_op_finished`` written out for a success: this runs once
        # per message sent in a transaction, on the client's hottest path.
        if not self._done:
            self._done = True
            txn = self._txn
            if error is None:
                txn._in_flight -= 1
                if txn._in_flight == 0 and txn._idle_waiters:
                    wake_all(txn._idle_waiters)
            else:
                txn._op_finished(error)
        callback = self._callback
        if callback is not None:
            callback(error, message_id)


class TransactionImpl:
    """The client's state of one transaction. Lives on the client's event loop."""

    def __init__(
        self,
        txn_id: TxnID,
        timeout_ms: int,
        coordinator: TransactionCoordinatorClient,
        config: ClientConfig,
        client_name: str | None = None,
        journal: TransactionJournal | None = None,
        resumed: bool = False,
    ) -> None:
        self.txn_id = txn_id
        self.timeout_ms = timeout_ms
        self.client_name = config.client_name if client_name is None else client_name
        self.resumed = resumed
        self._coordinator = coordinator
        self._config = config
        self._journal = journal
        self._loop = asyncio.get_running_loop()
        self._state = S.OPEN
        self._partitions: dict[str, asyncio.Task[None]] = {}
        # Partitions whose registration succeeded: a send to one skips the await.
        self._registered: set[str] = set()
        self._subscriptions: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._in_flight = 0
        # Woken when no operation is in flight (commit and abort wait for that).
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._failures: list[BaseException] = []
        self._abort_listeners: list[AbortListener] = []
        # The commit or abort driving the transaction to its end, and which one it is.
        self._end_task: asyncio.Task[None] | None = None
        self._end_kind = ""
        # An END_TXN went out and its answer was lost: the coordinator may have acted.
        # A resumed transaction starts so: someone else may have asked before.
        self._end_ambiguous = resumed
        self._closed = False
        # A resumed transaction's timeout runs on its coordinator only.
        self._timer: asyncio.TimerHandle | None = (
            None
            if resumed
            else self._loop.call_later(timeout_ms / 1000.0, self._on_timeout)
        )

    def __repr__(self) -> str:
        return f"<Transaction {self.txn_id} {self._state.value}>"

    # --- state ---------------------------------------------------------------------------

    @property
    def state(self) -> TransactionState:
        return self._state

    def _move(self, new: TransactionState) -> None:
        check_transition(self.txn_id, self._state, new)
        log.debug("transaction %s: %s -> %s", self.txn_id, self._state.value, new.value)
        self._state = new

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_timeout(self) -> None:
        self._timer = None
        if self._state is S.OPEN:
            log.info(
                "transaction %s timed out after %d ms", self.txn_id, self.timeout_ms
            )
            self._move(S.TIME_OUT)

    def check_open(self) -> None:
        """Raise unless the transaction still takes sends and acks.

        Raises:
            InvalidTxnStatus: it timed out, a commit or abort has begun, or it is a
                resumed handle (it can only commit or abort).
        """
        if self._state is S.OPEN:
            if self.resumed:
                raise InvalidTxnStatus(
                    f"transaction {self.txn_id} was resumed: the handle can only "
                    "commit or abort it, not send or acknowledge in it"
                )
            return
        if self._state is S.TIME_OUT:
            raise InvalidTxnStatus(
                f"transaction {self.txn_id} timed out after {self.timeout_ms} ms"
            )
        raise InvalidTxnStatus(
            f"transaction {self.txn_id} is {self._state.value}: only an OPEN "
            "transaction takes sends and acks"
        )

    # --- operations ----------------------------------------------------------------------

    def begin_op(
        self, loop: asyncio.AbstractEventLoop, callback: SendCallback | None = None
    ) -> TxnOp:
        """Count a send or ack as in flight; ``commit()`` waits for it.

        ``loop``: the event loop of the producer or consumer asking (compared with the
        transaction's; asking asyncio instead costs a ``getpid()`` system call per
        message on Python 3.11).
        ``callback``: for a send, the caller's callback; the returned op is then the
        message's callback (it settles the operation and calls ``callback``).

        Raises:
            InvalidTxnStatus: the transaction is not OPEN.
            InvalidConfiguration: the transaction belongs to another client.
        """
        if loop is not self._loop:
            # Its state lives on its own client's loop (thread, in the blocking API).
            raise InvalidConfiguration(
                f"transaction {self.txn_id} belongs to another client"
            )
        if self._state is not S.OPEN or self.resumed:
            self.check_open()
        self._in_flight += 1
        return TxnOp(self, callback)

    def _op_finished(self, error: BaseException | None) -> None:
        if error is not None:
            log.debug("operation of transaction %s failed: %s", self.txn_id, error)
            self._failures.append(error)
        self._in_flight -= 1
        if self._in_flight == 0 and self._idle_waiters:
            wake_all(self._idle_waiters)

    async def _wait_idle(self) -> None:
        """Return once no send or ack of this transaction is in flight."""
        while self._in_flight:
            await park(self._idle_waiters)

    @property
    def ops_in_flight(self) -> int:
        return self._in_flight

    async def register_partition(self, partition: str) -> None:
        """ADD_PARTITION_TO_TXN once per partition; later callers share the first.

        A failed registration stays failed: every send to that partition in this
        transaction fails with the same error (the transaction cannot commit anyway).

        Raises:
            TransactionNotFound, InvalidTxnStatus, TransactionCoordinatorNotFound,
            ConnectError, Timeout, ...: the coordinator did not record the partition.
        """
        task = self._partitions.get(partition)
        if task is None:
            task = self._background(self._add_partition(partition))
            self._partitions[partition] = task
        await asyncio.shield(task)

    async def _add_partition(self, partition: str) -> None:
        await self._coordinator.add_partition(self.txn_id, partition)
        self._registered.add(partition)

    def partition_registered(self, partition: str) -> bool:
        """True once ``partition``'s ADD_PARTITION_TO_TXN succeeded (a send may then
        skip :meth:`register_partition`)."""
        return partition in self._registered

    async def register_subscription(self, topic: str, subscription: str) -> None:
        """ADD_SUBSCRIPTION_TO_TXN once per (topic partition, subscription).

        Raises:
            As :meth:`register_partition`.
        """
        key = (topic, subscription)
        task = self._subscriptions.get(key)
        if task is None:
            task = self._background(
                self._coordinator.add_subscription(self.txn_id, topic, subscription)
            )
            self._subscriptions[key] = task
        await asyncio.shield(task)

    @property
    def registered_partitions(self) -> list[str]:
        return list(self._partitions)

    @property
    def registered_subscriptions(self) -> list[tuple[str, str]]:
        return list(self._subscriptions)

    def _background(self, coro: Any) -> asyncio.Task[None]:
        # A task, so that one waiter being cancelled does not cancel the registration
        # the others wait for.
        task: asyncio.Task[None] = self._loop.create_task(coro)
        task.add_done_callback(_retrieve)
        return task

    def add_abort_listener(self, listener: AbortListener) -> None:
        """Tell ``listener`` when this transaction is aborted (cumulative acks: the
        broker rewinds the subscription, so the consumer's queued messages are stale)."""
        if all(existing is not listener for existing in self._abort_listeners):
            self._abort_listeners.append(listener)

    # --- commit / abort ------------------------------------------------------------------

    def _running(self, kind: str) -> asyncio.Task[None] | None:
        task = self._end_task
        if task is not None and not task.done() and self._end_kind == kind:
            return task
        return None

    def _start_end(self, kind: str, run: Callable[[], Any]) -> asyncio.Task[None]:
        self._cancel_timer()
        task: asyncio.Task[None] = self._loop.create_task(run())
        task.add_done_callback(_retrieve)
        self._end_task, self._end_kind = task, kind
        return task

    async def commit(self) -> None:
        """Commit: wait for every send and ack, then END_TXN(COMMIT) until answered.

        Raises:
            InvalidTxnStatus: the transaction is aborting, aborted, timed out or in
                ERROR (refused locally, state unchanged), or the coordinator refused
                (it is being aborted; state ERROR).
            TransactionNotFound: the coordinator does not know it (timed out and
                removed) and no earlier END_TXN may have ended it; state ERROR.
            TransactionHasOperationFailed: a send or ack failed; the transaction was
                aborted instead (state ABORTED).
            TransactionOutcomeUnknown: no definite answer (see the module docstring);
                ``exc.txn_id`` says which transaction to resume.
            AlreadyClosed: the client closed before the outcome was known.
            OSError: the journal could not record it (END_TXN was not sent).
        """
        task = self._running("commit")
        if task is None:
            if self._state is S.COMMITTED:
                return
            if self._state is S.OPEN:
                self._move(S.COMMITTING)
            elif not (self._state is S.COMMITTING and self._end_task_done()):
                raise self._cannot("commit")
            task = self._start_end("commit", self._run_commit)
        await self._join(task)

    async def abort(self) -> None:
        """Abort: wait for every send and ack, then END_TXN(ABORT) until answered.

        Returns at once when already aborted, or when the transaction timed out on
        the client (the coordinator aborts it on its own timer).

        Raises:
            InvalidTxnStatus: the transaction is committing, committed or in ERROR
                (refused locally, state unchanged), or the coordinator refused
                (state ERROR).
            TransactionNotFound: the coordinator does not know it; state ERROR.
            TransactionOutcomeUnknown: no definite answer (see the module docstring);
                ``exc.txn_id`` says which transaction to resume.
            AlreadyClosed: the client closed before the outcome was known.
            OSError: the journal could not record it (END_TXN was not sent).
        """
        task = self._running("abort")
        if task is None and self._state is S.ABORTING and self._running("commit"):
            # The commit found a failed operation and is aborting: that abort is ours.
            await asyncio.wait([self._end_task])  # type: ignore[list-item]
            if self._state is S.ABORTED:
                return
            raise self._cannot("abort")
        if task is None:
            if self._state in (S.ABORTED, S.TIME_OUT):
                return
            if self._state is S.OPEN:
                self._move(S.ABORTING)
            elif not (self._state is S.ABORTING and self._end_task_done()):
                raise self._cannot("abort")
            task = self._start_end("abort", self._run_abort)
        await self._join(task)

    async def _join(self, task: asyncio.Task[None]) -> None:
        # shield: a caller that gives up (cancels) does not stop the end; a later
        # commit()/abort() joins it, and state() shows the outcome once known.
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled() and self._closed:
                raise AlreadyClosed(
                    f"client closed before transaction {self.txn_id} ended "
                    f"(state {self._state.value})"
                ) from None
            raise

    def _end_task_done(self) -> bool:
        return self._end_task is None or self._end_task.done()

    def _cannot(self, what: str) -> InvalidTxnStatus:
        return InvalidTxnStatus(
            f"cannot {what} transaction {self.txn_id}: it is {self._state.value}"
        )

    async def _run_commit(self) -> None:
        await self._wait_idle()
        if self._failures:
            failures = list(self._failures)
            # Part of the transaction did not happen: committing the rest would publish
            # a partial result, so abort it (Pulsar's client does the same).
            self._move(S.ABORTING)
            try:
                await self._end(pb.ABORT)
            except QuasarError as exc:
                raise TransactionHasOperationFailed(
                    f"transaction {self.txn_id}: {len(failures)} operation(s) failed "
                    f"(first: {failures[0]!r}) and the abort failed too: {exc}",
                    failures,
                ) from exc
            raise TransactionHasOperationFailed(
                f"transaction {self.txn_id} was aborted: {len(failures)} operation(s) "
                f"failed (first: {failures[0]!r})",
                failures,
            )
        await self._end(pb.COMMIT)

    async def _run_abort(self) -> None:
        # Sends still in flight must reach their partition before the abort marker,
        # or they would land in the topic after the transaction ended.
        await self._wait_idle()
        await self._end(pb.ABORT)

    async def _end(self, action: int) -> None:
        """END_TXN until the coordinator answers definitely (or the budget runs out).

        The journal record (if any) is written before the first END_TXN and removed
        after a definite answer.
        """
        name = "commit" if action == pb.COMMIT else "abort"
        bound_ms = self._config.end_timeout_ms
        deadline = None if bound_ms is None else self._loop.time() + bound_ms / 1000.0
        backoff = Backoff(self._config.initial_backoff_ms, self._config.max_backoff_ms)
        await self._journal_call("record", name)
        while True:
            sent = _Flag()
            try:
                await self._end_once(action, sent, deadline, bound_ms)
            except TransactionNotFound as exc:
                self._move(S.ERROR)
                if self._end_ambiguous:
                    raise TransactionOutcomeUnknown(
                        f"{name} of transaction {self.txn_id}: "
                        + (
                            "it was resumed"
                            if self.resumed
                            else "an earlier attempt's answer was lost"
                        )
                        + " and the coordinator neither knows the transaction nor "
                        f"preserved its outcome for client {self.client_name!r}, so "
                        f"it may or may not have ended ({exc})",
                        self.txn_id,
                    ) from exc
                await self._journal_call("remove")
                raise
            except AlreadyClosed:
                raise
            except QuasarError as exc:
                if not exc.retryable:
                    if isinstance(exc, BrokerError):
                        self._move(S.ERROR)  # the coordinator's definite refusal
                        await self._journal_call("remove")
                    raise
                if sent.value:
                    # Sent, but no definite answer (lost connection, timeout, or a
                    # coordinator that closed while ending): it may have acted.
                    self._end_ambiguous = True
                delay = backoff.next_delay_ms() / 1000.0
                if deadline is not None and self._loop.time() + delay >= deadline:
                    raise TransactionOutcomeUnknown(
                        f"{name} of transaction {self.txn_id}: no definite answer "
                        f"within {bound_ms:.0f} ms (last: {type(exc).__name__}: "
                        f"{exc}); call {name}() again, or "
                        f"client.resume_transaction(txn_id).{name}() later, to keep "
                        "asking",
                        self.txn_id,
                    ) from exc
                log.info(
                    "%s of transaction %s: %s; asking again in %.3fs",
                    name,
                    self.txn_id,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
            else:
                if action == pb.COMMIT:
                    self._move(S.COMMITTED)
                else:
                    self._move(S.ABORTED)
                    self._notify_aborted()
                await self._journal_call("remove")
                return

    async def _end_once(
        self, action: int, sent: _Flag, deadline: float | None, bound_ms: float | None
    ) -> None:
        """One END_TXN, cut short when the call's budget runs out.

        Raises:
            Timeout: the budget ran out first (retryable, like a lost answer).
            Whatever :meth:`TransactionCoordinatorClient.end_txn_once` raises.
        """
        attempt = self._coordinator.end_txn_once(
            self.txn_id, action, on_sent=sent.set, client_name=self.client_name
        )
        if deadline is None:
            await attempt
            return
        try:
            async with asyncio.timeout_at(deadline):
                await attempt
        except TimeoutError:
            raise Timeout(
                f"END_TXN of transaction {self.txn_id} unanswered after {bound_ms:.0f} ms"
            ) from None

    async def _journal_call(self, what: str, action: str = "") -> None:
        journal = self._journal
        if journal is None:
            return
        if what == "record":
            # Before END_TXN: a failure to record means not asking (raise OSError).
            await self._loop.run_in_executor(
                None, journal.record, self.txn_id, action, self.client_name
            )
            return
        try:
            await self._loop.run_in_executor(None, journal.remove, self.txn_id)
        except OSError as exc:  # a stale record costs only one more END_TXN later
            log.warning("transaction %s: journal remove failed: %s", self.txn_id, exc)

    def _notify_aborted(self) -> None:
        listeners, self._abort_listeners = self._abort_listeners, []
        for listener in listeners:
            try:
                listener.on_transaction_aborted()
            except Exception:  # one consumer's failure must not hide the abort
                log.exception("abort listener of transaction %s failed", self.txn_id)

    def close(self) -> None:
        """The client is closing: stop the timer and any end still being retried."""
        self._closed = True
        self._cancel_timer()
        if self._end_task is not None and not self._end_task.done():
            self._end_task.cancel()


class _Flag:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = False

    def set(self) -> None:
        self.value = True


def _retrieve(task: asyncio.Task[None]) -> None:
    # Every waiter sees the error through shield(); this keeps asyncio from logging
    # "exception was never retrieved" when nobody waits any more.
    if not task.cancelled():
        task.exception()


class Transaction:
    """Asyncio handle of a transaction (``await client.new_transaction()``).

    ``txn.id`` (or ``txn.id()``) is the :class:`TxnID` ``(most_bits, least_bits)``;
    ``txn.state()`` the :class:`TransactionState`. Pass the handle as ``txn=`` to
    ``producer.send`` / ``send_async`` and ``consumer.acknowledge`` /
    ``acknowledge_cumulative``, then ``await txn.commit()`` or ``await txn.abort()``.
    """

    def __init__(self, impl: TransactionImpl) -> None:
        self._impl = impl

    def __repr__(self) -> str:
        return repr(self._impl)

    @property
    def core(self) -> TransactionImpl:
        """The transaction's state machine, which quasar's producers, consumers and
        blocking client act on (see :func:`transaction_impl`)."""
        return self._impl

    @property
    def id(self) -> TxnID:
        """The transaction id; also callable: ``txn.id()``."""
        return self._impl.txn_id

    def state(self) -> TransactionState:
        return self._impl.state

    def timeout_ms(self) -> int:
        return self._impl.timeout_ms

    @property
    def client_name(self) -> str:
        """The client name its END_TXN carries (PIP-255)."""
        return self._impl.client_name

    async def commit(self) -> None:
        """See :meth:`TransactionImpl.commit` (raises the same errors)."""
        await self._impl.commit()

    async def abort(self) -> None:
        """See :meth:`TransactionImpl.abort` (raises the same errors)."""
        await self._impl.abort()


class TransactionHandle(Protocol):
    """What ``txn=`` takes: a transaction handle of the asyncio or the blocking client."""

    @property
    def core(self) -> TransactionImpl: ...


def transaction_impl(txn: Any) -> TransactionImpl:
    """The core of a transaction handle (asyncio or blocking) passed as ``txn=``.

    Raises:
        TypeError: ``txn`` is not a transaction of quasar's client.
    """
    if type(txn) is Transaction:
        # The asyncio handle, once per message sent in a transaction: no property call.
        return txn._impl
    # Every transaction handle (this module's and the blocking client's) exposes its
    # core as ``core``; the core itself is accepted too.
    impl = txn if isinstance(txn, TransactionImpl) else getattr(txn, "core", None)
    if not isinstance(impl, TransactionImpl):
        raise TypeError(f"txn must be a Transaction, got {type(txn).__name__}")
    return impl


class TransactionRegistry:
    """The client's live transactions, so that closing the client stops their timers
    and END_TXN retries (held weakly: a forgotten transaction is not kept alive)."""

    def __init__(self) -> None:
        self._live: weakref.WeakSet[TransactionImpl] = weakref.WeakSet()

    def add(self, txn: TransactionImpl) -> None:
        self._live.add(txn)

    def close(self) -> None:
        for txn in list(self._live):
            txn.close()
        self._live.clear()


__all__ = [
    "Transaction",
    "TransactionImpl",
    "TransactionRegistry",
    "TransactionState",
    "TxnID",
    "TxnOp",
    "transaction_impl",
]
