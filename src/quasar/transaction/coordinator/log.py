"""The coordinator log: ``TransactionMetadataEntry`` records in a managed ledger.

Entry layout (one managed-ledger entry)::

    single record   [TransactionMetadataEntry protobuf]
    batch (PIP-160) [u16 magic 0x0E01][u16 version 1][BatchedTransactionMetadataEntry]

(drawn in full in ``quasar.transaction.batched_log.entry_format``). A single record
starts with the tag of a protobuf field, never 0x0E (field 1 with the invalid wire
type 6), so the first two bytes tell the two apart, and a log may hold both: batching
can be switched on and off at any time and a broker with it off still reads batches.
Records are written through a ``TxnLogBufferedWriter`` (batching per
``transactionLogBatchedWrite*``). A record's place is a ``LogPosition``: the entry
position, plus its index and the batch size when the entry is a batch.

The log is read and cleaned through one durable cursor, ``transaction.subscription``
(Pulsar's name), opened at the earliest entry. When a transaction ends, all its
records are deleted on that cursor: a single-record entry is acknowledged, a record
of a batch has its bit cleared in the entry's batch ack set, and the entry is
acknowledged when its last record is deleted (``batched_log.deletion``). Replay skips
deleted records. Ledgers the cursor has passed are trimmed.

Sequence high-water mark. Every record carries ``max_local_txn_id``, but ended
transactions' records are deleted, so the log alone cannot say which ids were used.
Before deleting records, ``delete`` stores the counter in the cursor's properties
(key ``max_local_txn_id``) in the same cursor state as the deletions: whenever a
deletion is durable, a counter at least as high as every id it removed is durable
too. Trimming (the only physical removal) flushes the cursor first. Recovery takes the
maximum of that property, the last entry of the log, and every record replayed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable

from google.protobuf.message import DecodeError

from quasar.clock import Clock
from quasar.errors import CorruptRecordError
from quasar.protocol import txnlog_pb
from quasar.storage.api import InitialPosition, ManagedCursor, ManagedLedger, Position
from quasar.transaction.batched_log import (
    BATCHED_ENTRY_MAGIC,
    BatchedLogControl,
    BatchedWriteConfig,
    LogPosition,
    TxnLogBufferedWriter,
    batched_payload,
    encode_batched_entry,
    is_batched_entry,
)
from quasar.transaction.batched_log.deletion import (
    corrupt_at,
    delete_records,
    replay_live_records,
)
from quasar.transaction.batched_log.set_aside import decodable_entries, set_aside
from quasar.transaction.log_trimming import LogTrimmer
from quasar.transaction.scheduler import Scheduler

log = logging.getLogger(__name__)

Record = txnlog_pb.TransactionMetadataEntry

BATCH_MAGIC = BATCHED_ENTRY_MAGIC

CURSOR_NAME = "transaction.subscription"
MAX_LOCAL_TXN_ID = "max_local_txn_id"


def encode_record(record: Record) -> bytes:
    """One record as a single-record entry."""
    return bytes(record.SerializeToString())


def encode_batch(records: Iterable[Record]) -> bytes:
    """Several records as one batched entry (PIP-160 layout)."""
    return encode_batched_entry([r.SerializeToString() for r in records])


def decode_entry(data: bytes) -> list[Record]:
    """The records of one entry, in order.

    Raises:
        CorruptRecordError: the bytes are not a record or a batch of this version.
    """
    try:
        if is_batched_entry(data):
            batch = txnlog_pb.BatchedTransactionMetadataEntry()
            batch.ParseFromString(batched_payload(data))
            return list(batch.transaction_logs)
        record = Record()
        record.ParseFromString(data)
        return [record]
    except DecodeError as exc:
        raise CorruptRecordError(f"undecodable transaction log entry: {exc}") from exc


def max_local_txn_id_of(records: Iterable[Record], floor: int = -1) -> int:
    """The highest ``max_local_txn_id`` among ``records`` (``floor`` if none)."""
    best = floor
    for r in records:
        if r.HasField("max_local_txn_id"):
            best = max(best, r.max_local_txn_id)
    return best


class TransactionLog:
    """Appends, replays and deletes coordinator records on one managed ledger.

    Does not own the managed ledger (whoever opened it closes it).
    """

    def __init__(
        self,
        ledger: ManagedLedger,
        *,
        read_entries: int = 100,
        batched_log: BatchedLogControl | None = None,
        name: str = "",
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``batched_log``: the broker's switch and thresholds for coordinator logs
        (``None``: one record per entry); ``name`` labels this log's writer (the
        coordinator id)."""
        self._ledger = ledger
        self._read_entries = read_entries
        self._cursor: ManagedCursor | None = None
        self._writer: TxnLogBufferedWriter[Record]
        if batched_log is not None:
            self._writer = batched_log.new_writer(
                ledger, name, _serialize, scheduler=scheduler, clock=clock
            )
        else:
            self._writer = TxnLogBufferedWriter(
                ledger, _serialize, BatchedWriteConfig(enabled=False), name=name
            )
        self._trimmer = LogTrimmer(self._ledger, lambda: self.cursor, "transaction log")

    @property
    def ledger(self) -> ManagedLedger:
        return self._ledger

    @property
    def name(self) -> str:
        """The log's managed-ledger name (errors name it)."""
        return self._ledger.name

    @property
    def cursor(self) -> ManagedCursor:
        assert self._cursor is not None, "open() first"
        return self._cursor

    @property
    def writer(self) -> TxnLogBufferedWriter[Record]:
        return self._writer

    def open(self) -> None:
        """Open (or recover) the log cursor.

        Raises:
            ManagedLedgerClosed, MetadataError: from storage.
        """
        self._cursor = self._ledger.open_cursor(CURSOR_NAME, InitialPosition.EARLIEST)

    # ------------------------------------------------------------------ writing

    def append(self, record: Record) -> asyncio.Future[LogPosition]:
        """Append one record; the future resolves once it is durable.

        Futures resolve in append order, also when several records share a batched
        entry, so callbacks attached to them run in log order.

        Raises (through the future): ``ManagedLedgerClosed`` if the ledger or the
        writer is closed; ``PersistenceError``/``FatalStorageError`` on I/O failure
        (every record of the failed entry gets it).
        """
        return self._writer.append(record)

    # ------------------------------------------------------------------ reading

    async def recovered_max_local_txn_id(self) -> int:
        """The sequence high-water mark from the cursor property and the last entry.

        Raises:
            CorruptRecordError: the last entry cannot be decoded.
        """
        best = self.cursor.properties.get(MAX_LOCAL_TXN_ID, -1)
        lce = self._ledger.last_confirmed_entry
        last = lce if lce.entry_id >= 0 else self._ledger.previous_position(lce)
        if last.entry_id >= 0:
            entry = await self._ledger.read_entry(last)
            if entry is not None:
                try:
                    records = decode_entry(entry.data)
                except CorruptRecordError as exc:
                    # An entry the operator set aside raised the counter property
                    # past every id it could hold (``set_aside``), so it is not needed.
                    if self.cursor.is_acknowledged(last):
                        return best
                    raise corrupt_at(self.name, last, exc) from exc
                best = max_local_txn_id_of(records, best)
        return best

    async def replay(self) -> AsyncIterator[tuple[LogPosition, Record]]:
        """Every record not yet deleted, in log order, from the cursor's mark-delete.

        Raises:
            CorruptRecordError: an entry cannot be decoded (recovery must stop: a log
                that cannot be read is never "recovered" by skipping records).
        """
        async for live in replay_live_records(
            self.cursor, self._read_entries, decode_entry, self.name
        ):
            yield live

    # ------------------------------------------------------------------ deleting

    def delete(self, positions: Iterable[LogPosition], max_local_txn_id: int) -> None:
        """Acknowledge records on the log cursor so their ledgers can be trimmed.

        ``max_local_txn_id`` is the coordinator's counter now; it is attached to the
        cursor first (see the module docstring for why).

        Raises:
            ManagedLedgerClosed: the cursor is closed.
        """
        cursor = self.cursor
        props = cursor.properties
        if props.get(MAX_LOCAL_TXN_ID, -1) < max_local_txn_id:
            props[MAX_LOCAL_TXN_ID] = max_local_txn_id
            # A cumulative ack at the current mark-delete acknowledges nothing new;
            # it is how the cursor API attaches properties, and they are persisted in
            # the same cursor write as the deletions below.
            cursor.mark_delete(cursor.mark_delete_position, props)
        delete_records(cursor, positions)
        self._maybe_trim()

    def _maybe_trim(self) -> None:
        self._trimmer.maybe_trim()

    async def wait_for_trim(self) -> None:
        """Wait for a trim in progress, if any (tests, shutdown)."""
        await self._trimmer.wait()

    async def close(self) -> None:
        """Write what the writer buffers, refuse further appends, persist the cursor
        (pending deletions and the counter) and stop trimming."""
        await self._writer.close()
        await self.wait_for_trim()
        if self._cursor is not None:
            await self._cursor.flush()


_serialize = encode_record


# Transaction ids a set-aside entry may have used are unknown; the coordinator's
# sequence skips this many past the highest id the rest of the log shows, so it never
# hands out an id a participant may still hold state for. An entry holds at most
# ``transactionLogBatchedWriteMaxRecords`` records (512 by default), each of one id.
SET_ASIDE_ID_GAP = 1 << 16


async def set_aside_entry(ledger: ManagedLedger, position: Position) -> bytes:
    """Set the undecodable entry at ``position`` of a coordinator log aside
    (``batched_log.set_aside``) and raise the stored id high-water mark past every id
    it could hold; returns the entry's bytes.

    Raises:
        ResourceNotFoundError, PreconditionFailedError: see ``set_aside``.
        MetadataError, ManagedLedgerClosed: from storage.
    """
    records = await decodable_entries(ledger, decode_entry, position)
    cursor = ledger.open_cursor(CURSOR_NAME, InitialPosition.EARLIEST)
    floor = max_local_txn_id_of(records, cursor.properties.get(MAX_LOCAL_TXN_ID, -1))
    return await set_aside(
        ledger, CURSOR_NAME, position, decode_entry,
        {MAX_LOCAL_TXN_ID: floor + SET_ASIDE_ID_GAP},
    )
