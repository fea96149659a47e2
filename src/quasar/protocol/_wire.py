"""Byte-level constants and helpers shared by the frame and entry codecs."""

from __future__ import annotations

import struct
from typing import TypeVar

from crc32c import crc32c as _crc32c_c
from google.protobuf.message import Message

from quasar.errors import RemoteProtocolError

from .int64 import UINT64_MAX

# Magic numbers that may precede the metadata of a payload command.
MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
MAGIC_CRC32C_BYTES = b"\x0e\x01"

U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
U32X2 = struct.Struct(">II")
MAX_U32 = 0xFFFFFFFF
MASK64 = UINT64_MAX

# The hot paths call the C function directly: the Python-level wrapper in
# quasar.protocol.crc32c would add a call per frame for nothing. They pass
# ``(data, value, KEEP_GIL)``: by default the package gives the GIL up for inputs of
# 32 KiB and more, and a thread that gives it up while another thread runs Python
# waits up to the switch interval to get it back: 62 us instead of 2.6 us for a
# 50 KiB batch on the 2-core machine. In the broker that thread is the event loop,
# checking every batched SEND while the group-commit writer wants the GIL too.
crc32c_c = _crc32c_c
KEEP_GIL = 0  # crc32c's gil_release_mode: never release

# Anything the codecs accept as input bytes (Python 3.11 has no collections.abc.Buffer).
BytesLike = bytes | bytearray | memoryview

_M = TypeVar("_M", bound=Message)


def parse_message(cls: type[_M], data: BytesLike, what: str) -> _M:
    """Parse ``data`` as a ``cls`` message and check its required fields.

    Raises ``RemoteProtocolError`` naming ``what`` if the bytes are undecodable or a
    required field is missing (upb's ParseFromString does not check those).
    """
    try:
        # upb accepts any buffer here, which saves a copy; the stubs only say bytes.
        message = cls.FromString(data)  # type: ignore[arg-type]
    except Exception as exc:
        # upb signals malformed input with DecodeError, but nothing promises it never
        # raises anything else; any failure means the peer sent garbage.
        raise RemoteProtocolError(f"undecodable {what}: {exc}") from exc
    if not message.IsInitialized():
        # FindInitializationErrors exists at run time but not in the stubs.
        missing = ", ".join(message.FindInitializationErrors())  # type: ignore[attr-defined]
        raise RemoteProtocolError(f"{what} lacks required fields: {missing}")
    return message


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]
# Two-byte varints (128 .. 16383) prebuilt: ids, sizes and sequence numbers spend
# much of their time in this range.
_TWO_BYTES = [bytes(((i & 0x7F) | 0x80, i >> 7)) for i in range(0x4000)]


def varint(value: int) -> bytes:
    """Encode an integer in 0..2^64-1 as a protobuf varint (callers check the range)."""
    if value < 0x80:
        return _ONE_BYTE[value]
    if value < 0x4000:
        return _TWO_BYTES[value]
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if value < 0x10000000:
        return bytes(
            (
                (value & 0x7F) | 0x80,
                ((value >> 7) & 0x7F) | 0x80,
                ((value >> 14) & 0x7F) | 0x80,
                value >> 21,
            )
        )
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
