"""Payload codecs of ``MessageMetadata.compression`` (``CompressionType``).

Each codec produces exactly what the C++ client does, so payloads round-trip with the
official client in both directions:

======  =====  =====================================================================
codec   value  bytes
======  =====  =====================================================================
NONE    0      the payload as is
LZ4     1      a raw LZ4 block (no frame header, no size prefix)
ZLIB    2      zlib-wrapped deflate (RFC 1950)
ZSTD    3      a standard zstd frame
SNAPPY  4      raw snappy (a varint length, then the block; not the framing format)
======  =====  =====================================================================

The broker decompresses only to compact (it stores and forwards the producer's bytes);
clients and tools decompress to read. Both know the expected size from
``MessageMetadata.uncompressed_size``, and decompression is bounded by that size, so a
hostile payload cannot make us allocate more than its metadata announced. That
announcement is the peer's word too: the broker passes ``max_uncompressed_size``
(its ``maxMessageSize``), and a larger claim is refused before any output buffer
exists (``UncompressedSizeTooLarge``).
"""

from __future__ import annotations

import zlib

import cramjam
import lz4.block
import zstandard

from quasar.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "CODEC_NAMES",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZLIB",
    "ZSTD",
    "UncompressedSizeTooLarge",
    "compress",
    "decompress",
]

NONE = 0
LZ4 = 1
ZLIB = 2
ZSTD = 3
SNAPPY = 4

CODEC_NAMES: dict[int, str] = {
    NONE: "NONE",
    LZ4: "LZ4",
    ZLIB: "ZLIB",
    ZSTD: "ZSTD",
    SNAPPY: "SNAPPY",
}

# The C++ client calls ZSTD_compress with level 3 (zstd's default).
_ZSTD_LEVEL = 3


def compress(codec: int, data: bytes) -> bytes:
    """Compress ``data`` with ``codec`` (a ``CompressionType`` value).

    Raises ``LocalProtocolError`` for an unknown codec.
    """
    if codec == NONE:
        return bytes(data)
    if codec == LZ4:
        return bytes(lz4.block.compress(data, store_size=False))
    if codec == ZLIB:
        return zlib.compress(data)
    if codec == ZSTD:
        return bytes(zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(data))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    raise LocalProtocolError(f"unknown compression codec {codec}")


class UncompressedSizeTooLarge(RemoteProtocolError):
    """A payload claims to decompress to more than the reader accepts."""


def decompress(
    codec: int,
    data: bytes,
    uncompressed_size: int,
    max_uncompressed_size: int | None = None,
) -> bytes:
    """Decompress ``data`` that ``codec`` produced from ``uncompressed_size`` bytes.

    Never produces more than ``uncompressed_size`` bytes, whatever the input holds.

    Raises ``UncompressedSizeTooLarge`` if ``uncompressed_size`` exceeds
    ``max_uncompressed_size`` (checked before anything is decompressed);
    ``RemoteProtocolError`` for an unknown codec, corrupt input, or output whose
    size differs from ``uncompressed_size`` (the client's ``DecompressionError`` and
    ``UncompressedSizeCorruption`` cases); ``LocalProtocolError`` for a negative size.
    """
    if uncompressed_size < 0:
        raise LocalProtocolError(f"negative uncompressed size {uncompressed_size}")
    if max_uncompressed_size is not None and uncompressed_size > max_uncompressed_size:
        raise UncompressedSizeTooLarge(
            f"payload claims {uncompressed_size} bytes uncompressed, "
            f"more than {max_uncompressed_size}"
        )
    name = CODEC_NAMES.get(codec, str(codec))
    try:
        out = _decompress(codec, data, uncompressed_size)
    except RemoteProtocolError:
        raise
    except Exception as exc:
        # Each library has its own error types (LZ4BlockError, ZstdError, zlib.error,
        # cramjam's DecompressionError); to the caller all of them mean one thing: the
        # peer sent bytes that are not a valid payload.
        raise RemoteProtocolError(f"cannot decompress {name} payload: {exc}") from exc
    if len(out) != uncompressed_size:
        raise RemoteProtocolError(
            f"{name} payload decompressed to {len(out)} bytes, "
            f"metadata says {uncompressed_size}"
        )
    return out


def _decompress(codec: int, data: bytes, size: int) -> bytes:
    if codec == NONE:
        return bytes(data)
    if codec == LZ4:
        # A raw block carries no length; the caller's size bounds the output buffer.
        return bytes(lz4.block.decompress(data, uncompressed_size=size))
    if codec == ZLIB:
        inflater = zlib.decompressobj()
        # One byte of headroom shows output longer than announced without inflating
        # an unbounded amount.
        out = inflater.decompress(data, size + 1)
        if not inflater.eof:
            raise RemoteProtocolError("truncated or oversized zlib payload")
        return out
    if codec == ZSTD:
        # A frame may declare its content size; zstandard then allocates that much
        # whatever max_output_size says, so compare it with the metadata first.
        declared = zstandard.frame_content_size(data)
        if declared >= 0 and declared != size:
            raise RemoteProtocolError(
                f"zstd payload declares {declared} bytes, metadata says {size}"
            )
        decompressor = zstandard.ZstdDecompressor()
        if declared < 0 and size == 0:
            # max_output_size=0 means "unbounded" to zstandard; read at most one byte
            # instead, which is enough to tell an empty payload from a longer one.
            with decompressor.stream_reader(data) as reader:
                return bytes(reader.read(1))
        return bytes(decompressor.decompress(data, max_output_size=size))
    if codec == SNAPPY:
        # Raw snappy starts with the uncompressed length; refuse a mismatch before
        # cramjam allocates it.
        declared = _snappy_length(data)
        if declared != size:
            raise RemoteProtocolError(
                f"snappy payload declares {declared} bytes, metadata says {size}"
            )
        return bytes(cramjam.snappy.decompress_raw(data))
    raise RemoteProtocolError(f"unknown compression codec {codec}")


def _snappy_length(data: bytes) -> int:
    result = 0
    for i in range(min(len(data), 5)):
        byte = data[i]
        result |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return result
    raise RemoteProtocolError("snappy payload has no valid length prefix")
