"""The value stored per client name in ``__terminated_txn_state_{tcId}``.

The preserver of coordinator ``tcId`` keeps one message per client name in the
compacted system topic ``persistent://pulsar/system/__terminated_txn_state_{tcId}``:
the message key is the client name, the payload is this record, and compaction keeps
only the latest one per name. A tombstone (null value) means the name has nothing
preserved any more (every entry expired).

Layout (big-endian)::

    offset  size
    0       2     magic 0x5054 ("PT")
    2       1     version (1)
    3       1     reserved, 0
    4       4     count n
    8       25*n  n entries, oldest first:
                    u64 txnid_most_bits
                    u64 txnid_least_bits
                    u8  status (TxnStatus: 2 COMMITTED, 4 ABORTED)
                    i64 end time, wall-clock ms since the epoch (when the decision
                        was recorded)

Only terminal statuses are stored: the preserver records a transaction as COMMITTED
(ABORTED) as soon as COMMITTING (ABORTING) is durable, because that decision can no
longer change. Bump ``VERSION`` on any change; a reader refuses versions it does not
know.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Iterable
from typing import NamedTuple

from quasar.errors import CorruptRecordError
from quasar.protocol.txn_id import TxnID

from ..txn_status import TxnStatus

MAGIC = 0x5054
VERSION = 1
_HEADER = struct.Struct(">HBBI")
_ENTRY = struct.Struct(">QQBq")
_STATUSES = frozenset({TxnStatus.COMMITTED, TxnStatus.ABORTED})
_STATUS_VALUES = frozenset(int(s) for s in _STATUSES)


class TerminatedTxn(NamedTuple):
    """One preserved transaction: how it ended and when the decision was recorded."""

    txn_id: TxnID
    status: TxnStatus  # COMMITTED or ABORTED
    end_time_ms: int


def encode_terminated(entries: Iterable[TerminatedTxn]) -> bytes:
    """One client name's entries (oldest first) as a record."""
    items = list(entries)
    parts = [_HEADER.pack(MAGIC, VERSION, 0, len(items))]
    for e in items:
        assert e.status in _STATUSES, f"only terminal statuses are preserved, not {e.status}"
        parts.append(_ENTRY.pack(e.txn_id.most_bits, e.txn_id.least_bits, int(e.status), e.end_time_ms))
    return b"".join(parts)


# The preserver keeps each entry in its encoded form (``_ENTRY``: most, least, status,
# end time), so that a flush joins bytes instead of packing every entry again: a busy
# client name's 64 entries are rewritten on every flush.
_END_MS = struct.Struct(">q")
_STATUS_AT = 16  # offset of the status byte in an encoded entry
_END_AT = 17


def encode_entry(most: int, least: int, status: int, end_ms: int) -> bytes:
    """One entry, encoded as in a record."""
    assert status in _STATUS_VALUES, f"only terminal statuses are preserved, not {status}"
    return _ENTRY.pack(most, least, status, end_ms)


def entry_status(entry: bytes) -> int:
    return entry[_STATUS_AT]


def entry_end_ms(entry: bytes) -> int:
    end_ms: int = _END_MS.unpack_from(entry, _END_AT)[0]
    return end_ms


def encode_entries(entries: Collection[bytes]) -> bytes:
    """A record of entries already encoded by ``encode_entry`` (oldest first)."""
    return _HEADER.pack(MAGIC, VERSION, 0, len(entries)) + b"".join(entries)


def decode_terminated(data: bytes) -> list[TerminatedTxn]:
    """The entries of a record, oldest first.

    Raises:
        CorruptRecordError: wrong magic, unknown version, wrong length or a status
            that is not terminal.
    """
    return [
        TerminatedTxn(TxnID(most, least), TxnStatus(status), end_ms)
        for most, least, status, end_ms in decode_terminated_fields(data)
    ]


def decode_terminated_fields(data: bytes) -> list[tuple[int, int, int, int]]:
    """``decode_terminated`` as plain ``(most, least, status, end_ms)`` tuples (the
    preserver's load path: no objects per entry beyond what it keeps).

    Raises:
        CorruptRecordError: as ``decode_terminated``.
    """
    if len(data) < _HEADER.size:
        raise CorruptRecordError(f"terminated-transaction record of {len(data)} bytes")
    magic, version, _, count = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptRecordError(f"terminated-transaction record with magic {magic:#06x}")
    if version != VERSION:
        raise CorruptRecordError(f"unknown terminated-transaction record version {version}")
    if len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptRecordError(
            f"terminated-transaction record of {len(data)} bytes for {count} entries"
        )
    out = list(_ENTRY.iter_unpack(memoryview(data)[_HEADER.size :]))
    for entry in out:
        if entry[2] not in _STATUS_VALUES:
            raise CorruptRecordError(f"terminated-transaction record with status {entry[2]}")
    return out
