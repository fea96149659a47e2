"""The pending-ack log: a subscription's ``{topic}-{sub}__transaction_pending_ack``
managed ledger, read and cleaned through one durable cursor, ``__pending_ack_state``.

Writing goes through a ``PendingAckLogWriter``; the broker gives each log a
``TxnLogBufferedWriter`` (``pending_ack_writer``), which puts several records in one
entry when PIP-160 batching is on (``transactionPendingAckBatchedWrite*``) and one
record per entry when it is off. Records are placed by ``LogPosition``: the entry,
and the record's index in it when the entry is a batch. Both layouts may be mixed in
one log (batching can be switched at run time), and replay reads both.

Cleanup (the idea of PIP-153's log index, reshaped). Pulsar samples
``max acked topic position -> log position`` every ``transactionPendingAckLogIndexMinLag``
records and mark-deletes the log once the subscription's mark-delete passes a sample.
quasar instead knows exactly which records are still needed: those of transactions
still pending here, and of committed ones whose acks are not yet durably on the
subscription cursor. The store keeps each such transaction's *first* record position
in log order, so "the oldest needed record" is the first one of an ordered map, and
cleanup is one cursor update that deletes every record before it
(``release_before``): a mark-delete just before its entry, plus, when that entry is
a batch, the batch-index bits of the records before it in the entry, so replay skips
them. An entry is acknowledged only when all its records are released. Memory is one
position per live transaction, not one per record. Releasing only a prefix also means
cleanup state is persisted atomically: there are no partly persisted individual
deletions that could bring back an ACK without its ABORT after a crash.

Ledgers the log cursor has left behind are trimmed; the cursor is flushed first so a
replay never starts inside a deleted ledger.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Any, Protocol
from urllib.parse import quote

from quasar.clock import Clock
from quasar.protocol import TopicName
from quasar.storage.api import InitialPosition, ManagedCursor, ManagedLedger, Position
from quasar.transaction.batched_log import (
    BatchedLogControl,
    BatchedWriteConfig,
    LogPosition,
    TxnLogBufferedWriter,
)
from quasar.transaction.batched_log.deletion import release_before, replay_live_records
from quasar.transaction.log_trimming import LogTrimmer
from quasar.transaction.scheduler import Scheduler

from .records import PendingAckRecord, decode_entry, encode_record

log = logging.getLogger(__name__)

PENDING_ACK_STORE_SUFFIX = "__transaction_pending_ack"
CURSOR_NAME = "__pending_ack_state"


def pending_ack_topic(topic: str, subscription: str) -> str:
    """The pending-ack store's topic name, ``{topic}-{sub}__transaction_pending_ack``."""
    return f"{topic}-{subscription}{PENDING_ACK_STORE_SUFFIX}"


def pending_ack_ledger_name(topic: str, subscription: str) -> str:
    """The managed-ledger name of that store: the topic's persistence name with the
    encoded ``-{sub}__transaction_pending_ack`` appended.

    Equal to ``TopicName.parse(pending_ack_topic(...)).persistence_name`` for every
    subscription name that parses, and safe for the rest (a ``/`` in a subscription
    name is percent-encoded instead of starting a new path component).

    Raises:
        ValueError: ``topic`` is not a valid topic name.
    """
    base = TopicName.parse(topic).persistence_name
    return base + quote(f"-{subscription}{PENDING_ACK_STORE_SUFFIX}", safe="")


class PendingAckLogWriter(Protocol):
    """Appends records (``TxnLogBufferedWriter`` is the broker's implementation)."""

    def append(self, record: PendingAckRecord) -> asyncio.Future[Any]:
        """Append ``record``; the future resolves once it is durable with its
        ``LogPosition`` (or a plain entry ``Position``: the record's whole entry).

        Futures must resolve in call order (records are applied in log order from
        their callbacks).

        Raises:
            ManagedLedgerClosed: at once or through the future, if the ledger is
                closed; I/O failures fail the future.
        """
        ...


def SingleRecordWriter(ledger: ManagedLedger) -> TxnLogBufferedWriter[PendingAckRecord]:  # noqa: N802
    """One record per entry (PIP-160 batching off, Pulsar's default)."""
    return TxnLogBufferedWriter(ledger, encode_record, BatchedWriteConfig(enabled=False))


def pending_ack_writer(
    control: BatchedLogControl,
    ledger: ManagedLedger,
    topic: str,
    subscription: str,
    scheduler: Scheduler | None = None,
    clock: Clock | None = None,
) -> TxnLogBufferedWriter[PendingAckRecord]:
    """The writer of one subscription's pending-ack log, following ``control``'s
    switch; it is listed in the status as ``{topic}-{subscription}``."""
    return control.new_writer(
        ledger, f"{topic}-{subscription}", encode_record, scheduler=scheduler, clock=clock
    )


def as_log_position(position: Position | LogPosition) -> LogPosition:
    """A writer's answer as a ``LogPosition`` (a plain ``Position`` is a whole entry)."""
    if isinstance(position, LogPosition):
        return position
    return LogPosition(position)


class PendingAckLog:
    """Replays and cleans one pending-ack log. Does not own the managed ledger."""

    def __init__(
        self,
        ledger: ManagedLedger,
        *,
        read_entries: int = 100,
        writer: PendingAckLogWriter | None = None,
        batch_size_max: int | None = None,
    ) -> None:
        """``batch_size_max``: records claiming larger batches are corrupt (see
        ``records.decode_entry``); None checks no bound."""
        self._ledger = ledger
        self._batch_size_max = batch_size_max
        self._read_entries = read_entries
        self._writer = writer if writer is not None else SingleRecordWriter(ledger)
        self._cursor: ManagedCursor | None = None
        self._trimmer = LogTrimmer(self._ledger, lambda: self.cursor, "pending-ack log")

    @property
    def ledger(self) -> ManagedLedger:
        return self._ledger

    @property
    def opened(self) -> bool:
        return self._cursor is not None

    @property
    def cursor(self) -> ManagedCursor:
        assert self._cursor is not None, "open() first"
        return self._cursor

    def open(self) -> None:
        """Open (or recover) the log cursor.

        Raises:
            ManagedLedgerClosed, MetadataError: from storage.
        """
        self._cursor = self._ledger.open_cursor(CURSOR_NAME, InitialPosition.EARLIEST)

    @property
    def writer(self) -> PendingAckLogWriter:
        return self._writer

    def append(self, record: PendingAckRecord) -> asyncio.Future[Any]:
        """Append through the writer (see ``PendingAckLogWriter.append``)."""
        return self._writer.append(record)

    async def replay(self) -> AsyncGenerator[tuple[LogPosition, PendingAckRecord]]:
        """Every record not yet released, in log order.

        Records of one batched entry share its position and differ by batch index;
        records released by batch index are skipped.

        Raises:
            CorruptRecordError: an entry cannot be decoded; recovery must stop there
                (skipping it could forget an ACK or a COMMIT).
            ManagedLedgerClosed: the ledger was closed meanwhile.
        """
        async for live in replay_live_records(
            self.cursor, self._read_entries, self._decode, self._ledger.name
        ):
            yield live

    def _decode(self, data: bytes) -> list[PendingAckRecord]:
        return decode_entry(data, self._batch_size_max)

    def release_before(
        self, first_needed: LogPosition | None, last_applied: LogPosition
    ) -> None:
        """Let every record before ``first_needed`` go (all up to ``last_applied``
        when nothing is needed), then trim (see the module docstring).

        Never brings a record back, and never releases one after ``last_applied``,
        so a record appended but not yet applied is never released.

        Raises:
            ManagedLedgerClosed: the cursor is closed.
        """
        if release_before(self.cursor, self._ledger, first_needed, last_applied):
            self._maybe_trim()

    def _maybe_trim(self) -> None:
        self._trimmer.maybe_trim()

    async def wait_for_trim(self) -> None:
        """Wait for a trim in progress, if any (tests, shutdown)."""
        await self._trimmer.wait()

    async def close(self) -> None:
        """Write what the writer buffers, refuse further appends, persist the log
        cursor and stop trimming.

        Raises:
            MetadataError, BadVersion: persisting the cursor failed.
        """
        close = getattr(self._writer, "close", None)
        if close is not None:
            await close()
        await self.wait_for_trim()
        if self._cursor is not None:
            await self._cursor.flush()
