"""On-disk format of a ledger file, and the scans that read it back.

Each ledger is one append-only file ``ledgers/<ledger_id>.log``::

    offset 0                                                       16
    +----------+-------------+-----------+--------------------------+
    | "QLDG"   | version u16 | flags u16 | ledger_id u64            |   file header
    +----------+-------------+-----------+--------------------------+
    16
    +------------+------------+--------------------------+
    | length u32 | crc32c u32 | payload (length bytes)   |   entry 0
    +------------+------------+--------------------------+
    | length u32 | crc32c u32 | payload ...              |   entry 1, 2, ...
    +------------+------------+--------------------------+

Integers are big-endian. ``crc32c`` is CRC32C (Castagnoli) over the four length bytes
followed by the payload: covering the length means a zero-filled region (what a
crash can leave after a file was extended) never parses as an empty record. Entry
ids are implicit: the n-th record is entry n. ``flags`` is 0; ``version`` is bumped on
any change to this layout. The ledger id in the header catches a misplaced file.

Reading it back (recovery of a ledger that was being written):

* a record whose length runs past the end of the file, or whose CRC fails, with no
  valid record anywhere after it, is a torn tail: the last write was partial. It is
  truncated away; it was never acknowledged, because an append is acknowledged only
  after the write *and* its fdatasync completed.
* a bad record followed by a valid one is corruption in the middle of the ledger
  (a flipped bit, a misdirected write): acknowledged data would be lost by skipping
  it, so the scan stops with ``CorruptRecordError`` and the operator decides.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import crc32c

from quasar.errors import CorruptRecordError

MAGIC = b"QLDG"
FORMAT_VERSION = 1
FILE_HEADER = struct.Struct(">4sHHQ")
FILE_HEADER_SIZE = FILE_HEADER.size  # 16
RECORD_HEADER = struct.Struct(">II")
RECORD_HEADER_SIZE = RECORD_HEADER.size  # 8
# Upper bound on one entry. It bounds the work of deciding whether garbage hides a
# valid record, and is far above Pulsar's maxMessageSize (5 MiB by default).
MAX_RECORD_BYTES = 128 * 1024 * 1024

# The CRC field of a zero-length record: CRC32C of four zero bytes (never 0).
_EMPTY_RECORD_CRC = crc32c.crc32c(b"\x00" * 4)
assert array("I").itemsize == 4

# Reads `n` bytes at `offset` (fewer only at end of file).
ReadAt = Callable[[int, int], bytes]


def file_header(ledger_id: int) -> bytes:
    return FILE_HEADER.pack(MAGIC, FORMAT_VERSION, 0, ledger_id)


def check_file_header(data: bytes, ledger_id: int, path: str) -> None:
    """Raises ``CorruptRecordError`` unless ``data`` is this ledger's file header."""
    if len(data) < FILE_HEADER_SIZE:
        raise CorruptRecordError(
            f"{path}: file header is truncated ({len(data)} bytes)"
        )
    magic, version, _flags, stored_id = FILE_HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptRecordError(f"{path}: not a ledger file (magic {magic!r})")
    if version != FORMAT_VERSION:
        raise CorruptRecordError(f"{path}: unsupported ledger format version {version}")
    if stored_id != ledger_id:
        raise CorruptRecordError(
            f"{path}: holds ledger {stored_id}, expected {ledger_id}"
        )


# crc32c's gil_release_mode: never give the GIL up (the package does from 32 KiB).
# The group-commit writer checksums every record, and winning the GIL back from the
# busy event loop would cost more than the checksum (see quasar.protocol._wire).
_KEEP_GIL = 0


def _record_crc(length_bytes: bytes, payload: bytes | memoryview) -> int:
    return int(crc32c.crc32c(payload, crc32c.crc32c(length_bytes, 0, _KEEP_GIL), _KEEP_GIL))


def record_header(payload: bytes) -> bytes:
    """The 8-byte header that precedes ``payload`` on disk."""
    length_bytes = len(payload).to_bytes(4, "big")
    return length_bytes + _record_crc(length_bytes, payload).to_bytes(4, "big")


def payload_matches(header: bytes | memoryview, payload: bytes | memoryview) -> bool:
    """True if ``payload`` has the length and CRC recorded in ``header``."""
    length, crc = RECORD_HEADER.unpack_from(header)
    if length != len(payload):
        return False
    return bool(_record_crc(bytes(header[:4]), payload) == crc)


class _Window:
    """Buffered positional reads, so a scan issues a few large preads."""

    def __init__(self, read_at: ReadAt, chunk: int) -> None:
        self._read_at = read_at
        self._chunk = chunk
        self._start = 0
        self._buf = b""

    def get(self, offset: int, n: int) -> memoryview:
        end = self._start + len(self._buf)
        if not (self._start <= offset and offset + n <= end):
            self._buf = self._read_at(offset, max(n, self._chunk))
            self._start = offset
        rel = offset - self._start
        return memoryview(self._buf)[rel : rel + n]


@dataclass
class ScanResult:
    offsets: array[int]  # file offset of each good record, in entry order
    size: int  # payload bytes of the good records
    end: int  # offset just past the last good record
    bad_at: int | None  # offset of the first bad record, or None if the scan was clean


def scan(
    read_at: ReadAt,
    file_size: int,
    *,
    verify: bool,
    chunk: int = 1 << 20,
    limit: int | None = None,
) -> ScanResult:
    """Walk the records of a ledger file from just after its header.

    With ``verify`` every record's CRC is checked (recovery); without it only the
    lengths are followed (building the offset index of a closed ledger). ``limit``
    stops after that many records: a fenced ledger's length is the one recorded when
    it was closed, and anything a fenced writer added after it is not part of it.
    """
    window = _Window(read_at, chunk)
    offsets: array[int] = array("q")
    size = 0
    pos = FILE_HEADER_SIZE
    while pos < file_size:
        if limit is not None and len(offsets) >= limit:
            break
        if file_size - pos < RECORD_HEADER_SIZE:
            return ScanResult(offsets, size, pos, pos)
        header = window.get(pos, RECORD_HEADER_SIZE)
        length = int.from_bytes(header[:4], "big")
        if length > MAX_RECORD_BYTES or pos + RECORD_HEADER_SIZE + length > file_size:
            return ScanResult(offsets, size, pos, pos)
        if verify:
            record = window.get(pos, RECORD_HEADER_SIZE + length)
            if not payload_matches(
                record[:RECORD_HEADER_SIZE], record[RECORD_HEADER_SIZE:]
            ):
                return ScanResult(offsets, size, pos, pos)
        offsets.append(pos)
        size += length
        pos += RECORD_HEADER_SIZE + length
    return ScanResult(offsets, size, pos, None)


def find_valid_record(read_at: ReadAt, start: int, file_size: int) -> int | None:
    """The first offset at or after ``start`` where a record with a valid length and
    CRC begins, or ``None``.

    Used after a bad record to tell a torn tail (nothing valid follows) from
    corruption in the middle. A bad length hides where the next record starts, so
    every byte offset is a candidate. The length filter runs over whole chunks at
    C speed (``array`` of big-endian u32 at each of the four alignments); only
    offsets whose length fits in the file get a CRC check. A zero length is only a
    candidate if its CRC field holds the one valid value for an empty record, so a
    zero-filled tail is dismissed without any CRC work.
    """
    limit = min(MAX_RECORD_BYTES, file_size - start)
    chunk_size = 1 << 20
    window = _Window(read_at, chunk_size)
    pos = start
    while pos + RECORD_HEADER_SIZE <= file_size:
        chunk = read_at(pos, min(chunk_size, file_size - pos))
        # Offsets pos .. pos+span-1 have their whole 8-byte header inside `chunk`;
        # the next chunk starts at pos+span, so headers across the seam are covered.
        span = len(chunk) - RECORD_HEADER_SIZE + 1
        for candidate in sorted(_length_candidates(chunk, span, limit)):
            at = pos + candidate
            header = window.get(at, RECORD_HEADER_SIZE)
            length = int.from_bytes(header[:4], "big")
            if at + RECORD_HEADER_SIZE + length > file_size:
                continue
            record = window.get(at, RECORD_HEADER_SIZE + length)
            if payload_matches(
                record[:RECORD_HEADER_SIZE], record[RECORD_HEADER_SIZE:]
            ):
                return at
        pos += span
    return None


def _length_candidates(chunk: bytes, span: int, limit: int) -> list[int]:
    """Offsets ``< span`` in ``chunk`` whose u32 length is plausible (``<= limit``)."""
    out: list[int] = []
    for align in range(4):
        words = array("I")
        usable = (len(chunk) - align) // 4 * 4
        words.frombytes(chunk[align : align + usable])
        if sys.byteorder == "little":
            words.byteswap()
        # words[i] is the length at offset align+4i; words[i+1] is its CRC field.
        last = len(words) - 1
        out.extend(
            align + 4 * i
            for i, length in enumerate(words)
            if length <= limit
            and align + 4 * i < span
            and (length or (i < last and words[i + 1] == _EMPTY_RECORD_CRC))
        )
    return out
