"""The stored-entry format: what a producer sends after SEND, what the broker stores
verbatim as a ledger entry, and what it forwards unchanged after MESSAGE.

Layout (big-endian)::

    with checksum (protocol >= v6):
    +--------+--------+--------------+-----------------+------------------+
    | 0x0e01 | crc32c | metadataSize | MessageMetadata | payload ...      |
    |   u16  |  u32   |     u32      | metadataSize B  | to end of entry  |
    +--------+--------+--------------+-----------------+------------------+
                      |<------------ covered by crc32c --------------->|

    without checksum:
    +--------------+-----------------+------------------+
    | metadataSize | MessageMetadata | payload ...      |
    +--------------+-----------------+------------------+

A reader tells the two apart by the first two bytes: 0x0e01 is the magic (a
metadataSize starting with those bytes would be ~235 MB, beyond any frame limit).
The payload is the message body, or a batch (see ``batch.py``), possibly compressed
(``compression.py``).
"""

from __future__ import annotations

from typing import NamedTuple

from google.protobuf.message import EncodeError

from quasar.errors import LocalProtocolError, RemoteProtocolError

from ._generated import pulsar_api_pb2 as pb
from ._wire import (
    KEEP_GIL,
    MAGIC_CRC32C,
    MAGIC_CRC32C_BYTES,
    U16,
    U32,
    BytesLike,
    crc32c_c,
    parse_message,
)

__all__ = ["ParsedEntry", "make_entry", "parse_entry", "payload_of", "verify_entry"]


class ParsedEntry(NamedTuple):
    """The decoded header of a stored entry.

    ``payload_offset`` is where the payload starts in the entry bytes;
    ``checksum_ok`` is None when the entry carries no checksum (or it was not
    verified), else whether it matched.
    """

    # A NamedTuple rather than a frozen dataclass: this is built once per message on
    # the broker's publish path, and a frozen dataclass's __init__ costs ~1 us more.
    metadata: pb.MessageMetadata
    payload_offset: int
    has_checksum: bool
    checksum_ok: bool | None


def _metadata_bounds(data: BytesLike) -> tuple[int, int, bool]:
    """Return (metadata start, metadata end, has checksum) without parsing protobuf."""
    size = len(data)
    has_checksum = size >= 2 and U16.unpack_from(data, 0)[0] == MAGIC_CRC32C
    offset = 6 if has_checksum else 0
    if size - offset < 4:
        raise RemoteProtocolError(f"entry of {size} bytes is too short for its header")
    meta_size = U32.unpack_from(data, offset)[0]
    start = offset + 4
    end = start + meta_size
    if end > size:
        raise RemoteProtocolError(
            f"metadataSize {meta_size} exceeds the {size - start} bytes that follow"
        )
    return start, end, has_checksum


def parse_entry(data: BytesLike, verify_checksum: bool = True) -> ParsedEntry:
    """Decode the header of a stored entry (or of a SEND/MESSAGE payload section).

    The checksum is verified unless ``verify_checksum`` is False (for a caller that
    already knows the answer, such as the broker after ``FrameDecoder``). A mismatch
    does not raise: it is reported in ``checksum_ok`` so the broker can answer
    ``SEND_ERROR{ChecksumError}`` for that one message.

    Raises ``RemoteProtocolError`` if the entry is truncated, its metadataSize does
    not fit, or its ``MessageMetadata`` cannot be decoded or lacks required fields.
    """
    start, end, has_checksum = _metadata_bounds(data)
    view = memoryview(data)
    checksum_ok: bool | None = None
    if has_checksum and verify_checksum:
        checksum_ok = crc32c_c(view[6:], 0, KEEP_GIL) == U32.unpack_from(view, 2)[0]
    metadata = parse_message(pb.MessageMetadata, view[start:end], "MessageMetadata")
    return ParsedEntry(metadata, end, has_checksum, checksum_ok)


def payload_of(data: BytesLike) -> bytes:
    """Return the payload bytes of a stored entry, without decoding its metadata.

    Raises ``RemoteProtocolError`` if the header is truncated or inconsistent.
    """
    _, end, _ = _metadata_bounds(data)
    return bytes(memoryview(data)[end:])


def verify_entry(data: BytesLike) -> bool:
    """Tell whether an entry is intact as far as its checksum can tell.

    True if the checksum matches or the entry carries none; False if it carries one
    that does not match, or is too short to hold the checksum header.
    """
    view = memoryview(data)
    if view[:2] != MAGIC_CRC32C_BYTES:
        return True
    if len(view) < 6:
        return False
    return bool(crc32c_c(view[6:], 0, KEEP_GIL) == U32.unpack_from(view, 2)[0])


def make_entry(
    metadata: pb.MessageMetadata, payload: BytesLike, checksum: bool = True
) -> bytes:
    """Build a stored entry from metadata and payload.

    Used by clients for SEND and by the broker for the entries it writes itself
    (transaction markers). With ``checksum`` the entry gets the 0x0e01 magic and the
    CRC-32C of everything after it. Raises ``LocalProtocolError`` if ``metadata`` lacks
    a required field (producer_name, sequence_id, publish_time).
    """
    try:
        meta = metadata.SerializeToString()
    except EncodeError as exc:
        raise LocalProtocolError(f"cannot encode MessageMetadata: {exc}") from exc
    head = U32.pack(len(meta)) + meta
    if not checksum:
        return b"".join((head, payload))
    # Checksum the two pieces incrementally so the payload is copied only once.
    crc = crc32c_c(payload, crc32c_c(head, 0, KEEP_GIL), KEEP_GIL)
    return b"".join((MAGIC_CRC32C_BYTES, U32.pack(crc), head, payload))
