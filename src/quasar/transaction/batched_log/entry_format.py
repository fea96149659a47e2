"""The PIP-160 batched entry: several log records in one managed-ledger entry.

Layout of a batched entry (big-endian)::

    0         2         4
    +---------+---------+------------------------------------------------+
    |  magic  | version |  batched records (protobuf)                    |
    | 0x0E01  |  0x0001 |  field 1, repeated: one record per occurrence  |
    +---------+---------+------------------------------------------------+
      u16       u16       [0x0A][varint len][record 0 bytes]
                          [0x0A][varint len][record 1 bytes] ...

The records part is exactly the serialisation of ``BatchedTransactionMetadataEntry``
(coordinator log, ``transaction_logs = 1``) or ``BatchedPendingAckMetadataEntry``
(pending-ack log, ``pending_ack_logs = 1``): a repeated message field is each element's
bytes behind the tag ``0x0A`` (field 1, wire type 2) and a varint length. The writer
therefore serialises each record once, when it is appended, and joins the bytes at
flush time instead of serialising the whole batch again.

An un-batched entry is one serialised record. It starts with a protobuf tag, and no
record of either log can start with ``0x0E`` (field 1 with the invalid wire type 6),
so the first two bytes tell the two layouts apart and both can be mixed in one log.
A change of the records part gets a new version; readers refuse versions they do not
know (``CorruptRecordError``) rather than guess.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from quasar.errors import CorruptRecordError
from quasar.protocol import varint

BATCHED_ENTRY_MAGIC = 0x0E01
BATCHED_ENTRY_VERSION = 1
HEADER = struct.Struct(">HH")
HEADER_SIZE = HEADER.size
_PREFIX = HEADER.pack(BATCHED_ENTRY_MAGIC, BATCHED_ENTRY_VERSION)
_FIELD_1_LEN = b"\x0a"  # tag of field 1, wire type 2 (length-delimited)



def record_overhead(record_size: int) -> int:
    """Bytes a record of ``record_size`` adds to a batch besides its own."""
    return 1 + len(varint(record_size))


def encode_batched_entry(records: Sequence[bytes]) -> bytes:
    """One batched entry holding ``records`` (each one serialised record), in order."""
    parts = [_PREFIX]
    for data in records:
        parts.append(_FIELD_1_LEN)
        parts.append(varint(len(data)))
        parts.append(data)
    return b"".join(parts)


def is_batched_entry(data: bytes) -> bool:
    """True if ``data`` starts with the batched-entry magic number."""
    return len(data) >= HEADER_SIZE and data[0] == 0x0E and data[1] == 0x01


def batched_payload(data: bytes) -> bytes:
    """The protobuf part of a batched entry (after magic and version).

    Raises:
        CorruptRecordError: not a batched entry, or a version this reader does not know.
    """
    if not is_batched_entry(data):
        raise CorruptRecordError("not a batched log entry (no 0x0E01 magic number)")
    _, version = HEADER.unpack_from(data)
    if version != BATCHED_ENTRY_VERSION:
        raise CorruptRecordError(f"unknown batched log entry version {version}")
    return data[HEADER_SIZE:]
