"""Byte-level constants and helpers shared by the frame and entry codecs."""

from __future__ import annotations

import struct
from typing import TypeVar

from crc32c import crc32c as _crc32c_c
from google.protobuf.message import Message

from quasar.errors import RemoteProtocolError

# Magic numbers that may precede the metadata of a payload command.
MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
MAGIC_CRC32C_BYTES = b"\x0e\x01"

U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
U32X2 = struct.Struct(">II")
MAX_U32 = 0xFFFFFFFF
MASK64 = (1 << 64) - 1

# The hot paths call the C function directly: the Python-level wrapper in
# quasar.protocol.crc32c would add a call per frame for nothing.
crc32c_c = _crc32c_c

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
