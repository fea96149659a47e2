"""The compacted ledger: what a compaction keeps, readable by original position.

A compaction writes the messages it retains to a managed ledger of its own, named
``<topic persistence name>/__compaction/<generation>``. Each entry of that ledger is
one *record*: a retained topic entry together with its original position, so it can
be delivered with its original message id. Records are written in original-position
order, which is what makes "the first record at or after position P" a search.

Record layout (big-endian), version 1::

    0        2     3     4                 12                20       22
    +--------+-----+-----+-----------------+-----------------+--------+-------------+-------------+
    | 0x0c01 | ver |flags| original ledger | original entry  | nwords | mask words  | topic entry |
    |  u16   | u8  | u8  |      i64        |      i64        |  u16   | i64 x nwords| to the end  |
    +--------+-----+-----+-----------------+-----------------+--------+-------------+-------------+

* ``topic entry`` is a stored entry as ``quasar.protocol.entry`` defines it
  (``[0x0e01][crc32c][metadataSize][MessageMetadata][payload]``): either the topic's
  bytes unchanged, or, for a batch some of whose messages were dropped, a rebuilt
  batch (see ``compactor.py``).
* ``mask`` says which messages of a batch entry are retained, in the ack-set layout
  of ``quasar.protocol.ack_set`` (bit i set = message i retained). ``nwords = 0``
  means "every message" (a single message, or a batch kept whole). The dispatcher
  sends the mask as the MESSAGE ``ack_set``, so clients skip the dropped messages
  while the retained ones keep their original batch index.
* ``flags`` is reserved (0). A reader rejects other magics and versions.

Lookups use a sparse in-memory index: every ``INDEX_INTERVAL_RECORDS``-th record's
original position and its position in the compacted ledger. A search bisects the
index, then reads forward at most one interval. The index is filled while the
compaction writes; after a restart it is rebuilt by one scan on first use.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import AsyncIterator, Callable, Iterable
from typing import NamedTuple

from quasar.errors import CorruptRecordError
from quasar.protocol import unacked_indexes
from quasar.storage.api import Entry, ManagedLedger, Position

__all__ = [
    "CompactedLedger",
    "CompactedRecord",
    "INDEX_INTERVAL_RECORDS",
    "decode_record",
    "encode_record",
]

RECORD_MAGIC = 0x0C01
RECORD_VERSION = 1
_HEADER = struct.Struct(">HBBqqH")
_WORD = struct.Struct(">q")
MASK_WORDS_MAX = 0xFFFF

INDEX_INTERVAL_RECORDS = 256  # one sparse-index point per this many records
_READ_CHUNK_ENTRIES = 64  # entries per storage read while scanning forward


class CompactedRecord(NamedTuple):
    """A retained topic entry: its original position, bytes and retained messages.

    ``retained`` is ``None`` when every message of the entry is retained.
    """

    position: Position
    data: bytes
    retained: list[int] | None

    @property
    def entry(self) -> Entry:
        return Entry(self.position, self.data)

    def last_batch_index(self, num_messages: int) -> int:
        """The highest retained batch index of a batch of ``num_messages``."""
        if self.retained is None:
            return num_messages - 1
        indexes = unacked_indexes(self.retained, num_messages)
        return indexes[-1] if indexes else -1


def encode_record(position: Position, data: bytes, retained: list[int] | None) -> bytes:
    """Serialize one record (see the module docstring).

    Raises:
        ValueError: the mask has more than ``MASK_WORDS_MAX`` words.
    """
    words = retained or []
    if len(words) > MASK_WORDS_MAX:
        raise ValueError(f"retained mask of {len(words)} words is too long")
    head = _HEADER.pack(
        RECORD_MAGIC, RECORD_VERSION, 0, position.ledger_id, position.entry_id, len(words)
    )
    return b"".join([head, *(_WORD.pack(w) for w in words), data])


def decode_record(raw: bytes) -> CompactedRecord:
    """Parse one record.

    Raises:
        CorruptRecordError: wrong magic or version, or the record is truncated.
    """
    if len(raw) < _HEADER.size:
        raise CorruptRecordError(f"compacted record of {len(raw)} bytes is truncated")
    magic, version, _flags, ledger_id, entry_id, nwords = _HEADER.unpack_from(raw, 0)
    if magic != RECORD_MAGIC or version != RECORD_VERSION:
        raise CorruptRecordError(
            f"not a compacted record (magic {magic:#06x}, version {version})"
        )
    data_start = _HEADER.size + nwords * _WORD.size
    if data_start > len(raw):
        raise CorruptRecordError("compacted record: retained mask overruns the record")
    retained = (
        [_WORD.unpack_from(raw, _HEADER.size + i * _WORD.size)[0] for i in range(nwords)]
        if nwords
        else None
    )
    return CompactedRecord(Position(ledger_id, entry_id), raw[data_start:], retained)


class CompactedLedger:
    """Read access to one compacted ledger, by original position."""

    def __init__(
        self,
        ledger: ManagedLedger,
        index: Iterable[tuple[Position, Position]] | None = None,
    ) -> None:
        """``index``: (original, compacted) position pairs of every
        ``INDEX_INTERVAL_RECORDS``-th record, in order, when the writer knows them;
        ``None`` to rebuild them by a scan on first use."""
        self.ledger = ledger
        self._index_original: list[Position] = []
        self._index_compacted: list[Position] = []
        self._indexed = index is not None
        for original, compacted in index or ():
            self._index_original.append(original)
            self._index_compacted.append(compacted)

    @property
    def name(self) -> str:
        return self.ledger.name

    async def _ensure_index(self) -> None:
        if self._indexed:
            return
        originals: list[Position] = []
        compacted: list[Position] = []
        count = 0
        index_at = 0
        position = self.ledger.first_position
        while True:
            entries = await self.ledger.read_entries(position, _READ_CHUNK_ENTRIES)
            if not entries:
                break
            for e in entries:
                if count >= index_at:
                    # The index is only where to start scanning: an unreadable record
                    # is not indexed (the next readable one is), and the read that
                    # reaches it decides what to do about it.
                    try:
                        originals.append(decode_record(e.data).position)
                    except CorruptRecordError:
                        pass
                    else:
                        compacted.append(e.position)
                        index_at = count + INDEX_INTERVAL_RECORDS
                count += 1
            position = self.ledger.next_position(entries[-1].position)
        self._index_original, self._index_compacted = originals, compacted
        self._indexed = True

    async def read(
        self,
        start: Position,
        max_records: int,
        on_unreadable: Callable[[CorruptRecordError], None] | None = None,
    ) -> list[CompactedRecord]:
        """Up to ``max_records`` records whose original position is ``>= start``.

        ``on_unreadable``: called with the error of each record that cannot be parsed
        (its ``position`` the compacted ledger's), which is then skipped; without it
        such a record raises.

        Raises:
            CorruptRecordError: a stored record cannot be parsed (no ``on_unreadable``).
            ManagedLedgerClosed: the compacted ledger was closed (replaced).
        """
        if max_records <= 0:
            return []
        await self._ensure_index()
        i = bisect.bisect_right(self._index_original, start) - 1
        position = self._index_compacted[i] if i >= 0 else self.ledger.first_position
        out: list[CompactedRecord] = []
        while len(out) < max_records:
            entries = await self.ledger.read_entries(position, _READ_CHUNK_ENTRIES)
            if not entries:
                break
            for e in entries:
                try:
                    record = decode_record(e.data)
                except CorruptRecordError as exc:
                    if on_unreadable is None:
                        raise
                    on_unreadable(CorruptRecordError(
                        f"{self.name}: the compacted record at {e.position} cannot be "
                        f"read: {exc}", log_name=self.name, position=str(e.position),
                    ))
                    continue
                if record.position >= start:
                    out.append(record)
                    if len(out) == max_records:
                        break
            position = self.ledger.next_position(entries[-1].position)
        return out

    async def records(self) -> AsyncIterator[CompactedRecord]:
        """Every record, in order (the input of the next compaction).

        Raises:
            CorruptRecordError: a stored record cannot be parsed.
        """
        position = self.ledger.first_position
        while True:
            entries = await self.ledger.read_entries(position, _READ_CHUNK_ENTRIES)
            if not entries:
                return
            for e in entries:
                yield decode_record(e.data)
            position = self.ledger.next_position(entries[-1].position)

    async def last_record(self) -> CompactedRecord | None:
        """The record with the highest original position, or ``None`` if empty.

        Raises:
            CorruptRecordError: the stored record cannot be parsed.
        """
        ml = self.ledger
        last = ml.last_confirmed_entry
        if last.entry_id < 0:
            # The managed ledger opened a fresh ledger for appends (after a restart):
            # the last record is the one before it, if any.
            last = ml.previous_position(last)
        if last.entry_id < 0:
            return None
        entry = await ml.read_entry(last)
        return decode_record(entry.data) if entry is not None else None

    async def close(self) -> None:
        await self.ledger.close()
