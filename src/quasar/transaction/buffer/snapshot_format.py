"""Binary format of transaction-buffer snapshots: one index record per topic plus
sealed segments.

A snapshot is ``{maxReadPosition, aborted: [(txn, first, abort marker)], low
watermarks}``. It lives in a key/value ``SnapshotStore`` (in the broker: the
namespace's compacted ``__transaction_buffer_snapshot`` topic). The record under the
topic's own name is the *index*; when the aborted ids outgrow one record, full runs of
them are sealed into immutable *segments* under ``segment_key(topic, seq)``, and the
index lists those segments and carries the ids not sealed yet. Because segments never
change, a snapshot rewrites only the index (plus any newly sealed segment).

All integers are big-endian; positions are two signed 64-bit ints (entry -1 means
"before the first entry of that ledger")::

    header (every record)
    +-----------+-------------+----------+
    | magic u32 | version u16 | kind u8  |   magic = 0x51544253 ("QTBS"), version = 1
    +-----------+-------------+----------+   kind 1 = index, 2 = segment

    index body
    +---------------+----------------+--------------------------------------------+
    | topic_len u16 | topic (UTF-8)  | taken_at_ms i64 (wall clock)               |
    +---------------+----------------+--------------------------------------------+
    | max_read: ledger i64, entry i64 | next_segment_seq u64                        |
    +---------------------------------+---------------------------------------------+
    | lwm_count u16  | lwm_count  × (tc_id u64, low_watermark i64)                  |
    | seg_count u32  | seg_count  × (seq u64, count u32,                             |
    |                |               last_marker: ledger i64, entry i64)            |
    | garbage u32    | garbage    × seq u64      (segments to delete; see below)    |
    | abort_count u32| abort_count × ABORTED     (ids not sealed in any segment)     |
    +----------------+----------------------------------------------------------------+

    segment body
    +---------------+----------------+---------+-----------------+--------------------+
    | topic_len u16 | topic (UTF-8)  | seq u64 | abort_count u32 | abort_count × ABORTED |
    +---------------+----------------+---------+-----------------+--------------------+

    ABORTED (48 bytes)
    +----------+-----------+----------------------+--------------------------+
    | most u64 | least u64 | first: ledger, entry | marker: ledger, entry    |
    +----------+-----------+----------------------+--------------------------+

``garbage`` lists segments the index no longer refers to. They are deleted only after
the index that dropped them is durable; a crash before the deletes finish leaves them
named in that index, and recovery deletes them again. A segment key reused after a
crash (sealed and written, index not updated) is simply overwritten.

The topic name is stored so a record found under the wrong key is detected. Bump
``VERSION`` on any change; decoders refuse versions they do not know.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from quasar.errors import CorruptRecordError
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import Position

from .txn_state import AbortedTxn

MAGIC = 0x51544253
VERSION = 1
KIND_INDEX = 1
KIND_SEGMENT = 2

_HEADER = struct.Struct(">IHB")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_INDEX_FIXED = struct.Struct(">qqqQ")  # taken_at, max_read (2), next_segment_seq
_LWM = struct.Struct(">Qq")
_SEGMENT_REF = struct.Struct(">QIqq")
_ABORTED = struct.Struct(">QQqqqq")

ABORTED_SIZE = _ABORTED.size  # 48


def segment_key(topic: str, seq: int) -> str:
    """Store key of segment ``seq`` of ``topic``.

    It never equals a topic name (those start with ``persistent://``), so segments
    and indexes share one keyed store without colliding.
    """
    return f"tb-segment/{seq}/{topic}"


def segment_capacity(segment_size_bytes: int, topic: str) -> int:
    """Aborted ids that fit in one segment record of at most ``segment_size_bytes``."""
    overhead = _HEADER.size + _U16.size + len(topic.encode()) + _U64.size + _U32.size
    return max(1, (segment_size_bytes - overhead) // ABORTED_SIZE)


@dataclass(frozen=True)
class SegmentRef:
    """A sealed segment as the index lists it."""

    seq: int
    count: int
    last_marker: Position  # highest abort-marker position in the segment


@dataclass(frozen=True)
class SnapshotIndex:
    topic: str
    taken_at_ms: int
    max_read_position: Position
    next_segment_seq: int = 0
    low_watermarks: list[tuple[int, int]] = field(default_factory=list)
    segments: list[SegmentRef] = field(default_factory=list)
    garbage: list[int] = field(default_factory=list)
    aborted: list[tuple[TxnID, AbortedTxn]] = field(default_factory=list)


@dataclass(frozen=True)
class SnapshotSegment:
    topic: str
    seq: int
    aborted: list[tuple[TxnID, AbortedTxn]]


# ---------------------------------------------------------------------- encoding


def _topic(topic: str) -> bytes:
    raw = topic.encode()
    if len(raw) > 0xFFFF:
        raise ValueError("topic name too long for a snapshot record")
    return _U16.pack(len(raw)) + raw


def _aborted(items: list[tuple[TxnID, AbortedTxn]]) -> list[bytes]:
    out = [_U32.pack(len(items))]
    for txn, (first, marker) in items:
        out.append(_ABORTED.pack(txn.most_bits, txn.least_bits, *first, *marker))
    return out


def encode_index(index: SnapshotIndex) -> bytes:
    parts = [
        _HEADER.pack(MAGIC, VERSION, KIND_INDEX),
        _topic(index.topic),
        _INDEX_FIXED.pack(index.taken_at_ms, *index.max_read_position, index.next_segment_seq),
        _U16.pack(len(index.low_watermarks)),
    ]
    parts.extend(_LWM.pack(tc, lwm) for tc, lwm in index.low_watermarks)
    parts.append(_U32.pack(len(index.segments)))
    parts.extend(
        _SEGMENT_REF.pack(s.seq, s.count, *s.last_marker) for s in index.segments
    )
    parts.append(_U32.pack(len(index.garbage)))
    parts.extend(_U64.pack(seq) for seq in index.garbage)
    parts.extend(_aborted(index.aborted))
    return b"".join(parts)


def encode_segment(segment: SnapshotSegment) -> bytes:
    parts = [
        _HEADER.pack(MAGIC, VERSION, KIND_SEGMENT),
        _topic(segment.topic),
        _U64.pack(segment.seq),
    ]
    parts.extend(_aborted(segment.aborted))
    return b"".join(parts)


# ---------------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._offset = 0
        self._what = what

    def unpack(self, s: struct.Struct) -> tuple[int, ...]:
        if self._offset + s.size > len(self._data):
            raise CorruptRecordError(f"{self._what} is truncated")
        values = s.unpack_from(self._data, self._offset)
        self._offset += s.size
        return values

    def one(self, s: struct.Struct) -> int:
        return self.unpack(s)[0]

    def text(self) -> str:
        n = self.one(_U16)
        if self._offset + n > len(self._data):
            raise CorruptRecordError(f"{self._what} is truncated")
        raw = self._data[self._offset : self._offset + n]
        self._offset += n
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"{self._what} has a bad topic name") from exc

    def aborted(self) -> list[tuple[TxnID, AbortedTxn]]:
        n = self.one(_U32)
        if self._offset + n * _ABORTED.size > len(self._data):
            raise CorruptRecordError(f"{self._what} is truncated")
        out = []
        for _ in range(n):
            most, least, fl, fe, ml, me = self.unpack(_ABORTED)
            out.append(
                (TxnID(most, least), AbortedTxn(Position(fl, fe), Position(ml, me)))
            )
        return out

    def end(self) -> None:
        if self._offset != len(self._data):
            raise CorruptRecordError(
                f"{self._what} has {len(self._data) - self._offset} trailing bytes"
            )


def _header(data: bytes, kind: int, what: str) -> _Reader:
    r = _Reader(data, what)
    magic, version, found = r.unpack(_HEADER)
    if magic != MAGIC:
        raise CorruptRecordError(f"{what} has bad magic {magic:#x}")
    if version != VERSION:
        raise CorruptRecordError(f"{what} has unknown version {version}")
    if found != kind:
        raise CorruptRecordError(f"{what} has record kind {found}, expected {kind}")
    return r


def decode_index(data: bytes) -> SnapshotIndex:
    """Decode an index record.

    Raises:
        CorruptRecordError: bad magic, unknown version, wrong kind, truncated or
            trailing bytes.
    """
    r = _header(data, KIND_INDEX, "transaction buffer snapshot index")
    topic = r.text()
    taken_at, mr_ledger, mr_entry, next_seq = r.unpack(_INDEX_FIXED)
    lwms = [(tc, lwm) for tc, lwm in (r.unpack(_LWM) for _ in range(r.one(_U16)))]
    segments = []
    for _ in range(r.one(_U32)):
        seq, count, ledger, entry = r.unpack(_SEGMENT_REF)
        segments.append(SegmentRef(seq, count, Position(ledger, entry)))
    garbage = [r.one(_U64) for _ in range(r.one(_U32))]
    aborted = r.aborted()
    r.end()
    return SnapshotIndex(
        topic, taken_at, Position(mr_ledger, mr_entry), next_seq, lwms, segments,
        garbage, aborted,
    )


def decode_segment(data: bytes) -> SnapshotSegment:
    """Decode a segment record.

    Raises:
        CorruptRecordError: as ``decode_index``.
    """
    r = _header(data, KIND_SEGMENT, "transaction buffer snapshot segment")
    topic = r.text()
    seq = r.one(_U64)
    aborted = r.aborted()
    r.end()
    return SnapshotSegment(topic, seq, aborted)
