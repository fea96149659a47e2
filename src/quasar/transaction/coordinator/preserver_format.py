"""Key and value per owner role and client name in ``__terminated_txn_state_{tcId}``.

The preserver of coordinator ``tcId`` keeps one message per owner role and client name
in the compacted system topic
``persistent://pulsar/system/__terminated_txn_state_{tcId}``: the message key names
the pair (below), the payload is this record, and compaction keeps only the latest one
per key. A tombstone (null value) means the pair has nothing preserved any more (every
entry expired).

Key. Without authentication a transaction has no owner, and the key is the bare client
name (so a store written by a broker that kept no owners loads unchanged). With an owner, or for a client name that starts with NUL, the
key is NUL followed by the compact JSON array ``[owner, clientName]`` (owner a string
or null)::

    etl-7                       owner None, client name "etl-7"
    <NUL>["alice","etl-7"]      owner "alice", client name "etl-7"
    <NUL>[null,"<NUL>odd"]      owner None, client name "<NUL>odd"

A key that starts with NUL is always the JSON form, and no other key does, so two
different pairs never share a key and a key always says whose outcomes it holds: role
B sending role A's client name never reads A's entries. A stored key that starts with
NUL but is not such an array was written as a bare client name; it is read as that
name without owner (and rewritten under its proper key).

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
longer change. Bump ``VERSION`` on any change of the value; a reader refuses versions
it does not know. (The owner is in the key, not the value, so the value kept version
1 when keys gained owners: a broker that does not know owners reads a JSON key as an
odd client name that no client sends.)
"""

from __future__ import annotations

import json
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
    """One preserved transaction: how it ended, when the decision was recorded, and
    the role that owned it (``None``: opened without authentication; kept in the key,
    not in the record)."""

    txn_id: TxnID
    status: TxnStatus  # COMMITTED or ABORTED
    end_time_ms: int
    owner: str | None = None


_KEY_MARK = "\x00"


def preserver_key(owner: str | None, client_name: str) -> str:
    """The store key of ``owner``'s entries under ``client_name`` (layout above)."""
    if owner is None and not client_name.startswith(_KEY_MARK):
        return client_name
    return _KEY_MARK + json.dumps([owner, client_name], ensure_ascii=False, separators=(",", ":"))


def parse_preserver_key(key: str) -> tuple[str | None, str]:
    """``(owner, client name)`` of a store key; the inverse of ``preserver_key``.

    A key that starts with NUL but is not the JSON form is a bare client name (see the
    module docstring); ``preserver_key`` of the result is then not ``key``.
    """
    if key.startswith(_KEY_MARK):
        try:
            value = json.loads(key[1:])
        except ValueError:
            return None, key
        if (
            isinstance(value, list)
            and len(value) == 2
            and (value[0] is None or isinstance(value[0], str))
            and isinstance(value[1], str)
        ):
            return value[0], value[1]
    return None, key


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
