"""The pending-ack log: a subscription's ``{topic}-{sub}__transaction_pending_ack``
managed ledger, read and cleaned through one durable cursor, ``__pending_ack_state``.

Writing goes through ``PendingAckLogWriter``, the seam for batched writes (PIP-160):
today ``SingleRecordWriter`` appends one record per entry; a batching writer would
resolve several appends with the same entry position, which everything above already
handles, because cleanup works on entry positions (below).

Cleanup (the idea of PIP-153's log index, reshaped). Pulsar samples
``max acked topic position -> log position`` every ``transactionPendingAckLogIndexMinLag``
records and mark-deletes the log once the subscription's mark-delete passes a sample.
quasar instead knows exactly which records are still needed: those of transactions
still pending here, and of committed ones whose acks are not yet durably on the
subscription cursor. It keeps each such transaction's *first* log position in log
order, so "the oldest needed record" is the first item of an ordered map and cleanup
is one mark-delete of the log cursor just before it (``release_before``). Memory is one
position per live transaction, not one per record. A single mark-delete also means
cleanup state is persisted atomically: there are no partly persisted individual
deletions that could bring back an ACK without its ABORT after a crash.

Ledgers the log cursor has left behind are trimmed; the cursor is flushed first so a
replay never starts inside a deleted ledger.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Protocol
from urllib.parse import quote

from quasar.protocol import TopicName
from quasar.storage.api import InitialPosition, ManagedCursor, ManagedLedger, Position
from quasar.transaction.log_trimming import LogTrimmer

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
    """Appends records; the seam for PIP-160 batched writes."""

    def append(self, record: PendingAckRecord) -> asyncio.Future[Position]:
        """Append ``record``; the future resolves with its entry once durable.

        Futures must resolve in call order (records are applied in log order from
        their callbacks).

        Raises:
            ManagedLedgerClosed: at once, if the ledger is closed; I/O failures fail
                the future.
        """
        ...


class SingleRecordWriter:
    """One record per entry (PIP-160 batching off, Pulsar's default)."""

    def __init__(self, ledger: ManagedLedger) -> None:
        self._ledger = ledger

    def append(self, record: PendingAckRecord) -> asyncio.Future[Position]:
        return self._ledger.add_entry(encode_record(record))


class PendingAckLog:
    """Replays and cleans one pending-ack log. Does not own the managed ledger."""

    def __init__(
        self,
        ledger: ManagedLedger,
        *,
        read_entries: int = 100,
        writer: PendingAckLogWriter | None = None,
    ) -> None:
        self._ledger = ledger
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

    def append(self, record: PendingAckRecord) -> asyncio.Future[Position]:
        """Append through the writer (see ``PendingAckLogWriter.append``)."""
        return self._writer.append(record)

    async def replay(self) -> AsyncGenerator[tuple[Position, PendingAckRecord]]:
        """Every record after the log cursor's mark-delete, in log order.

        Records of one batched entry share its position.

        Raises:
            CorruptRecordError: an entry cannot be decoded; recovery must stop there
                (skipping it could forget an ACK or a COMMIT).
            ManagedLedgerClosed: the ledger was closed meanwhile.
        """
        cursor = self.cursor
        cursor.rewind()
        while True:
            entries = await cursor.read_entries(self._read_entries)
            if not entries:
                return
            for entry in entries:
                for record in decode_entry(entry.data):
                    yield entry.position, record

    def release_before(self, first_needed: Position | None, last_applied: Position) -> None:
        """Let every record before ``first_needed`` go (all up to ``last_applied``
        when nothing is needed): mark-delete the log cursor there, then trim.

        Never moves the cursor back, and never past ``last_applied``, so a record
        appended but not yet applied is never released.

        Raises:
            ManagedLedgerClosed: the cursor is closed.
        """
        cursor = self.cursor
        if first_needed is None:
            target = last_applied
        else:
            target = min(self._ledger.previous_position(first_needed), last_applied)
        if target <= cursor.mark_delete_position:
            return
        cursor.mark_delete(target)
        self._maybe_trim()

    def _maybe_trim(self) -> None:
        self._trimmer.maybe_trim()

    async def wait_for_trim(self) -> None:
        """Wait for a trim in progress, if any (tests, shutdown)."""
        await self._trimmer.wait()

    async def close(self) -> None:
        """Persist the log cursor and stop trimming.

        Raises:
            MetadataError, BadVersion: persisting the cursor failed.
        """
        await self.wait_for_trim()
        if self._cursor is not None:
            await self._cursor.flush()
