"""The pending-ack side of a subscription: acks made inside transactions.

A subscription gets a ``PendingAckHandle`` (``quasar.transaction.pending_ack``) the
first time a transaction acknowledges on it, or at load when its pending-ack log
``{topic}-{sub}__transaction_pending_ack`` already exists (so acks pending before a
restart stay pending and are not redelivered). Subscriptions never used in a
transaction have no handle and pay nothing.

What a transaction ends with goes back to the subscription through two callbacks given
at construction (``on_released`` for an abort, ``on_committed`` for a commit); the
broker's transaction service builds the handle (``api.TransactionComponents``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from quasar.errors import (
    BrokerError,
    CorruptRecordError,
    NotAllowedError,
    PreconditionFailedError,
    ServiceNotReady,
)
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import ManagedCursor, ManagedLedger, Position
from quasar.transaction.batched_log.set_aside import set_aside
from quasar.transaction.corrupt_records import CorruptLog
from quasar.transaction.pending_ack import PendingAckHandle, pending_ack_ledger_name
from quasar.transaction.pending_ack.log import CURSOR_NAME as PENDING_ACK_CURSOR
from quasar.transaction.pending_ack.records import decode_entry
from quasar.transaction.pending_ack.results import AbortResult, CommitResult
from quasar.transaction.txn_status import TxnAction

from .api import BrokerContext
from .entry_info import entry_info

log = logging.getLogger(__name__)


class SubscriptionTransactions:
    """The pending acks of one subscription (``topic``/``subscription``)."""

    def __init__(
        self,
        broker: BrokerContext,
        topic: str,
        topic_ledger: ManagedLedger,
        subscription: str,
        cursor: ManagedCursor,
        *,
        on_released: Callable[[AbortResult], None],
        on_committed: Callable[[CommitResult], None],
    ) -> None:
        self._broker = broker
        self._topic = topic
        self._topic_ledger = topic_ledger
        self._subscription = subscription
        self._cursor = cursor
        self._on_released = on_released
        self._on_committed = on_committed
        self.handle: PendingAckHandle | None = None
        self._ledger: ManagedLedger | None = None
        self._loading: asyncio.Task[PendingAckHandle] | None = None
        # An unreadable record in the log: the subscription refuses consumers and
        # transactional acks until the operator sets the record aside (``set_aside``)
        # or the topic is loaded again. Nothing retries the load meanwhile: the same
        # bytes would fail the same way.
        self.failure: CorruptRecordError | None = None
        self._failure_time_ms = 0

    @property
    def ledger_name(self) -> str:
        return pending_ack_ledger_name(self._topic, self._subscription)

    def _describe(self) -> str:
        return f"{self._topic}/{self._subscription}"

    async def load_if_exists(self) -> None:
        """At topic load: recover a pending-ack log that is already there.

        An unreadable record fails this subscription only (``failure``), never the
        topic's load: producers and other subscriptions keep working.
        """
        if self._broker.ledgers.exists(self.ledger_name):
            try:
                await self.ensure()
            except ServiceNotReady:
                if self.failure is None:
                    raise

    def not_ready(self, what: str) -> BrokerError:
        """The error of a request refused because the log has an unreadable record.

        ``ServiceNotReady``, as Pulsar answers for a pending-ack handle in Error: the
        client may retry, and the coordinator's end fan-out keeps retrying (a
        decision is never given up) until the operator has set the record aside.
        """
        f = self.failure
        return ServiceNotReady(
            f"Subscription {self._describe()} cannot {what}: its pending-ack log has an "
            f"unreadable record ({f}); an operator can set it aside with "
            "skipCorruptRecord (docs/operations.md)"
        )

    def status(self) -> dict[str, object]:
        """The pending-ack state for the subscription's stats (empty while the
        subscription has no pending-ack log open and nothing failed)."""
        f = self.failure
        if f is not None:
            return {
                "pendingAckState": "Error",
                "pendingAckError": {
                    "message": str(f), "log": f.log_name, "position": f.position,
                    "timestamp": self._failure_time_ms,
                },
            }
        if self.handle is not None:
            return {"pendingAckState": self.handle.state.value}
        return {}

    async def set_aside(self, position: Position) -> bytes:
        """Set the unreadable log entry at ``position`` aside (``batched_log.set_aside``)
        and load the pending acks again; returns the entry's bytes. A further
        unreadable entry fails the load again (``failure`` names it).

        Raises:
            PreconditionFailedError: the log was read (nothing failed), or the entry
                is readable or already set aside.
            ResourceNotFoundError: the log has no such entry.
        """
        if self.failure is None:
            raise PreconditionFailedError(
                f"The pending-ack log of {self._describe()} has no unreadable record"
            )
        ledger = await self._broker.ledgers.open(self.ledger_name)
        try:
            # Readable means readable by replay, which holds records to the bounds.
            batch_size_max = self._broker.input_bounds.max_batch_records
            data = await set_aside(
                ledger, PENDING_ACK_CURSOR, position,
                lambda entry: decode_entry(entry, batch_size_max),
            )
        finally:
            await ledger.close()
        self.failure = None
        await self.load_if_exists()
        return data

    async def ensure(self) -> PendingAckHandle:
        """The handle, opening and recovering it on first use.

        Raises:
            NotAllowedError: transactions are disabled on this broker.
            ServiceNotReady: the log has an unreadable record (``failure``; found now
                or by an earlier load).
        """
        if self.handle is not None:
            return self.handle
        if self.failure is not None:
            raise self.not_ready("recover its pending acks")
        if self._loading is None or self._loading.done():
            self._loading = asyncio.get_running_loop().create_task(self._open())
        return await asyncio.shield(self._loading)

    async def _open(self) -> PendingAckHandle:
        txns = self._broker.transactions
        if txns is None:
            raise NotAllowedError("Transactions are not enabled on this broker")
        ledger = await self._broker.ledgers.open(self.ledger_name)
        try:
            handle = txns.new_pending_ack_handle(
                self._cursor,
                ledger,
                self._topic,
                self._subscription,
                on_low_watermark_abort=self._on_low_watermark_abort,
                on_fenced=self._on_fenced,
            )
        except BaseException:
            await ledger.close()
            raise
        try:
            await handle.recover()
        except CorruptRecordError as exc:
            await ledger.close()
            self.failure, self._failure_time_ms = exc, int(time.time() * 1000)
            txns.corrupt_records.found(CorruptLog.PENDING_ACK_LOG, exc)
            raise self.not_ready("recover its pending acks") from exc
        except BaseException:
            await ledger.close()
            raise
        self.handle, self._ledger = handle, ledger
        return handle

    # -- acks inside a transaction ------------------------------------------------------
    async def individual_ack(
        self,
        txn: TxnID,
        acks: Sequence[tuple[Position, Sequence[int] | None]],
        dispatched: Mapping[Position, int] | None = None,
    ) -> None:
        """Record ``acks`` of ``txn``. ``dispatched``: messages per entry the acking
        consumer was sent and has not acked (its pending map), so a batch member's
        ack needs no read of its entry to learn the batch size.

        Raises: TransactionConflict, NotAllowedError, TooManyRequests, ServiceNotReady;
        NotAllowedError also for an ack set longer than its entry's batch needs.
        """
        handle = await self.ensure()
        ledger = self._topic_ledger
        last = ledger.last_confirmed_entry
        items: list[tuple[Position, int | None, Sequence[int] | None]] = []
        for pos, ack_set in acks:
            if pos > last or pos.entry_id < 0:
                raise NotAllowedError(f"Cannot acknowledge {pos}: no such entry")
            batch_size = None
            if ack_set:
                known = dispatched.get(pos) if dispatched is not None else None
                # A pending count of 1 may be a one-message batch or a plain entry:
                # only the entry tells, so read it then (rare: ack sets come with
                # batches).
                batch_size = known if known is not None and known > 1 else None
                if batch_size is None:
                    batch_size = await self._batch_size_of(ledger, pos)
                # Masks are sized by the batch: never beyond what an accepted batch
                # holds, and the ack set no longer than the entry's batch needs.
                bounds = self._broker.input_bounds
                if batch_size is not None:
                    batch_size = bounds.batch_size_bound(batch_size)
                bounds.check_ack_set(pos, ack_set, batch_size)
            items.append((pos, batch_size, ack_set))
        await handle.individual_ack(txn, items)

    @staticmethod
    async def _batch_size_of(ledger: ManagedLedger, pos: Position) -> int | None:
        entry = await ledger.read_entry(pos)
        if entry is None:
            raise NotAllowedError(f"Cannot acknowledge {pos}: entry is gone")
        info = entry_info(entry.data)
        return info.num_messages if info.is_batch else None

    async def cumulative_ack(self, txn: TxnID, position: Position) -> None:
        handle = await self.ensure()
        await handle.cumulative_ack(txn, position)

    async def end_txn(self, txn: TxnID, action: TxnAction, low_watermark: int) -> None:
        if self.handle is None and not self._broker.ledgers.exists(self.ledger_name):
            return  # nothing of this transaction was ever acknowledged here
        handle = await self.ensure()
        result = await handle.end_txn(txn, action, low_watermark)
        if isinstance(result, AbortResult):
            self._on_released(result)
        else:
            self._on_committed(result)

    def _on_low_watermark_abort(self, txn: TxnID, result: AbortResult) -> None:
        self._on_released(result)

    def _on_fenced(self, handle: PendingAckHandle) -> None:
        log.error("pending acks of %s fenced; reloading on next use", self._describe())
        if self.handle is handle:
            self.handle = None
            ledger, self._ledger = self._ledger, None
            if ledger is not None:
                asyncio.get_running_loop().create_task(ledger.close())

    # -- dispatch filters ---------------------------------------------------------------
    def is_pending(self, position: Position) -> bool:
        return self.handle is not None and self.handle.is_pending(position)

    def pending_ack_set(self, position: Position) -> list[int] | None:
        return self.handle.pending_ack_set(position) if self.handle is not None else None

    async def close(self) -> None:
        if self.handle is not None:
            await self.handle.close()
            self.handle = None
        if self._ledger is not None:
            await self._ledger.close()
            self._ledger = None

    async def delete(self) -> None:
        await self.close()
        if self._broker.ledgers.exists(self.ledger_name):
            await self._broker.ledgers.delete(self.ledger_name)
