"""The coordinator log: ``TransactionMetadataEntry`` records in a managed ledger.

Entry layout (one managed-ledger entry)::

    single record   [TransactionMetadataEntry protobuf]
    batch (PIP-160) [u16 magic 0x0E01][u16 version 1][BatchedTransactionMetadataEntry]

A single record starts with the tag of a protobuf field, never 0x0E (field 1 with the
invalid wire type 6), so the first two bytes tell the two apart. This module writes
single records only; it reads both, so batched writing can be switched on later
without a format change. A record's place is a ``LogPosition``: the entry position,
plus its index and the batch size when the entry is a batch.

The log is read and cleaned through one durable cursor, ``transaction.subscription``
(Pulsar's name), opened at the earliest entry. When a transaction ends, all its
records are acknowledged on that cursor; ledgers the cursor has passed are trimmed.

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
import struct
from collections.abc import AsyncIterator, Iterable
from typing import NamedTuple

from google.protobuf.message import DecodeError

from quasar.errors import CorruptRecordError
from quasar.protocol import txnlog_pb
from quasar.protocol.ack_set import clear_index, full_ack_set, is_acked
from quasar.storage.api import InitialPosition, ManagedCursor, ManagedLedger, Position
from quasar.transaction.log_trimming import LogTrimmer

log = logging.getLogger(__name__)

Record = txnlog_pb.TransactionMetadataEntry

BATCH_MAGIC = 0x0E01
BATCH_VERSION = 1
_BATCH_HEADER = struct.Struct(">HH")

CURSOR_NAME = "transaction.subscription"
MAX_LOCAL_TXN_ID = "max_local_txn_id"


class LogPosition(NamedTuple):
    """Where one record is: its entry, and its index in a batch (``-1``: not a batch)."""

    position: Position
    batch_index: int = -1
    batch_size: int = 0

    def __str__(self) -> str:
        if self.batch_index < 0:
            return str(self.position)
        return f"{self.position}[{self.batch_index}/{self.batch_size}]"


def encode_record(record: Record) -> bytes:
    """One record as a single-record entry."""
    return record.SerializeToString()


def encode_batch(records: Iterable[Record]) -> bytes:
    """Several records as one batched entry (PIP-160 layout)."""
    batch = txnlog_pb.BatchedTransactionMetadataEntry(transaction_logs=list(records))
    return _BATCH_HEADER.pack(BATCH_MAGIC, BATCH_VERSION) + batch.SerializeToString()


def decode_entry(data: bytes) -> list[Record]:
    """The records of one entry, in order.

    Raises:
        CorruptRecordError: the bytes are not a record or a batch of this version.
    """
    try:
        if len(data) >= 4 and _BATCH_HEADER.unpack_from(data)[0] == BATCH_MAGIC:
            _, version = _BATCH_HEADER.unpack_from(data)
            if version != BATCH_VERSION:
                raise CorruptRecordError(f"unknown batched log entry version {version}")
            batch = txnlog_pb.BatchedTransactionMetadataEntry()
            batch.ParseFromString(data[_BATCH_HEADER.size :])
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

    def __init__(self, ledger: ManagedLedger, *, read_entries: int = 100) -> None:
        self._ledger = ledger
        self._read_entries = read_entries
        self._cursor: ManagedCursor | None = None
        self._trimmer = LogTrimmer(self._ledger, lambda: self.cursor, "transaction log")

    @property
    def ledger(self) -> ManagedLedger:
        return self._ledger

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

    # ------------------------------------------------------------------ writing

    def append(self, record: Record) -> asyncio.Future[LogPosition]:
        """Append one record; the future resolves once it is durable.

        Futures resolve in append order (the managed ledger's guarantee), so callbacks
        attached to them run in log order. This is the seam for batched writes: a
        batching writer would resolve several futures with one entry's positions.

        Raises:
            ManagedLedgerClosed: at once, if the ledger is closed. I/O failures fail
                the future (``PersistenceError``/``FatalStorageError``).
        """
        appended = self._ledger.add_entry(encode_record(record))
        out: asyncio.Future[LogPosition] = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future[Position]) -> None:
            if out.done():
                return
            if f.cancelled():
                out.cancel()
            elif (exc := f.exception()) is not None:
                out.set_exception(exc)
            else:
                out.set_result(LogPosition(f.result()))

        appended.add_done_callback(done)
        return out

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
                best = max_local_txn_id_of(decode_entry(entry.data), best)
        return best

    async def replay(self) -> AsyncIterator[tuple[LogPosition, Record]]:
        """Every record not yet deleted, in log order, from the cursor's mark-delete.

        Raises:
            CorruptRecordError: an entry cannot be decoded (recovery must stop: a log
                that cannot be read is never "recovered" by skipping records).
        """
        cursor = self.cursor
        cursor.rewind()
        while True:
            entries = await cursor.read_entries(self._read_entries)
            if not entries:
                return
            for entry in entries:
                records = decode_entry(entry.data)
                if len(records) == 1 and not _is_batch(entry.data):
                    yield LogPosition(entry.position), records[0]
                    continue
                acks = cursor.batch_ack_set(entry.position)
                for index, record in enumerate(records):
                    if acks is not None and is_acked(acks, index):
                        continue  # deleted by batch index earlier
                    yield LogPosition(entry.position, index, len(records)), record

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
        plain: list[Position] = []
        batched: dict[Position, tuple[int, list[int]]] = {}
        for lp in positions:
            if lp.batch_index < 0:
                plain.append(lp.position)
            else:
                size, indexes = batched.setdefault(lp.position, (lp.batch_size, []))
                indexes.append(lp.batch_index)
        if plain:
            cursor.delete(plain)
        for pos, (size, indexes) in batched.items():
            if cursor.is_acknowledged(pos):
                continue
            bits = cursor.batch_ack_set(pos) or full_ack_set(size)
            for index in indexes:
                bits = clear_index(bits, index)
            cursor.set_batch_ack(pos, bits)  # all clear: the entry is deleted
        self._maybe_trim()

    def _maybe_trim(self) -> None:
        self._trimmer.maybe_trim()

    async def wait_for_trim(self) -> None:
        """Wait for a trim in progress, if any (tests, shutdown)."""
        await self._trimmer.wait()

    async def close(self) -> None:
        """Persist the cursor (pending deletions and the counter) and stop trimming."""
        await self.wait_for_trim()
        if self._cursor is not None:
            await self._cursor.flush()


def _is_batch(data: bytes) -> bool:
    return len(data) >= 4 and _BATCH_HEADER.unpack_from(data)[0] == BATCH_MAGIC
