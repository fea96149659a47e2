"""Payload codecs: round trips, known vectors, hostile input."""

from __future__ import annotations

import zlib

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from quasar.errors import LocalProtocolError, RemoteProtocolError
from quasar.protocol import compress, decompress, pb
from quasar.protocol.compression import UncompressedSizeTooLarge

CODECS = [pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY]
TEXT = b"The quick brown fox jumps over the lazy dog. " * 40


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"x", TEXT, bytes(range(256)) * 20])
def test_roundtrip(codec: int, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed, len(data)) == data


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=2000))
def test_roundtrip_property(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data), len(data)) == data


def test_compression_actually_compresses() -> None:
    for codec in CODECS[1:]:
        assert len(compress(codec, TEXT)) < len(TEXT) // 4


@pytest.mark.parametrize(
    ("codec", "packed", "plain"),
    [
        # A raw LZ4 block: token 0x50 = five literals, no match, no size prefix.
        (pb.LZ4, b"\x50hello", b"hello"),
        # Raw snappy: varint length 5, literal tag (5-1)<<2.
        (pb.SNAPPY, b"\x05\x10hello", b"hello"),
        # zlib-wrapped deflate (RFC 1950), stored block.
        (pb.ZLIB, bytes.fromhex("78010105 00faff68656c6c6f062c0215"), b"hello"),
        # A zstd frame (magic 28 b5 2f fd) with a raw block.
        (pb.ZSTD, bytes.fromhex("28b52ffd2005290000 68656c6c6f"), b"hello"),
    ],
)
def test_known_vectors(codec: int, packed: bytes, plain: bytes) -> None:
    assert decompress(codec, packed, len(plain)) == plain


def test_formats_are_raw_not_framed() -> None:
    assert compress(pb.LZ4, b"hello") == b"\x50hello"
    assert compress(pb.SNAPPY, b"hello") == b"\x05\x10hello"
    assert zlib.decompress(compress(pb.ZLIB, TEXT)) == TEXT
    assert compress(pb.ZSTD, TEXT)[:4] == b"\x28\xb5\x2f\xfd"


@pytest.mark.parametrize("codec", CODECS[1:])
def test_wrong_size_is_rejected(codec: int) -> None:
    packed = compress(codec, TEXT)
    with pytest.raises(RemoteProtocolError):
        decompress(codec, packed, len(TEXT) - 1)
    with pytest.raises(RemoteProtocolError):
        decompress(codec, packed, len(TEXT) + 1)


@pytest.mark.parametrize("codec", CODECS[1:])
@pytest.mark.parametrize("garbage", [b"", b"\xff" * 7, b"\x00\x01\x02\x03garbage"])
def test_garbage_is_rejected(codec: int, garbage: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        decompress(codec, garbage, 100)


def test_zstd_declared_size_bomb_is_refused_before_allocating() -> None:
    import zstandard

    frame = zstandard.ZstdCompressor().compress(b"\x00" * 10_000_000)
    with pytest.raises(RemoteProtocolError):
        decompress(pb.ZSTD, frame, 10)


def test_unknown_codec() -> None:
    with pytest.raises(LocalProtocolError):
        compress(9, b"x")
    with pytest.raises(RemoteProtocolError):
        decompress(9, b"x", 1)
    with pytest.raises(LocalProtocolError):
        decompress(pb.NONE, b"x", -1)


@pytest.mark.parametrize("codec", CODECS)
def test_a_claim_over_the_bound_is_refused_before_decompressing(codec: int) -> None:
    packed = compress(codec, TEXT)
    with pytest.raises(UncompressedSizeTooLarge):
        decompress(codec, packed, 2**31, max_uncompressed_size=len(TEXT))
    assert decompress(codec, packed, len(TEXT), max_uncompressed_size=len(TEXT)) == TEXT


@pytest.mark.parametrize("codec", [pb.LZ4, pb.ZLIB, pb.ZSTD])
def test_output_stops_at_the_claimed_size_when_the_body_holds_more(codec: int) -> None:
    bomb = bytes(64 * 1024 * 1024)
    packed = (
        zstandard.ZstdCompressor(write_content_size=False).compress(bomb)
        if codec == pb.ZSTD
        else compress(codec, bomb)
    )
    with pytest.raises(RemoteProtocolError):
        decompress(codec, packed, 1024, max_uncompressed_size=4096)
