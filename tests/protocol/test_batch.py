"""Batch payloads."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quasar.errors import LocalProtocolError, RemoteProtocolError
from quasar.protocol import build_batch, parse_batch, pb


def items(n: int) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    return [
        (
            pb.SingleMessageMetadata(
                payload_size=i * 3,
                sequence_id=100 + i,
                partition_key=f"k{i}",
                properties=[pb.KeyValue(key="i", value=str(i))],
            ),
            b"abc" * i,
        )
        for i in range(n)
    ]


def test_layout() -> None:
    meta = pb.SingleMessageMetadata(payload_size=2, sequence_id=5)
    raw = meta.SerializeToString()
    assert build_batch([(meta, b"hi")]) == struct.pack(">I", len(raw)) + raw + b"hi"


def test_roundtrip() -> None:
    batch = items(5)
    assert parse_batch(build_batch(batch), 5) == batch


def test_payload_size_is_filled_in_without_touching_the_argument() -> None:
    meta = pb.SingleMessageMetadata(sequence_id=1)
    [(parsed, body)] = parse_batch(build_batch([(meta, b"xyz")]), 1)
    assert parsed.payload_size == 3 and body == b"xyz"
    assert not meta.HasField("payload_size")


def test_inconsistent_payload_size_is_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        build_batch([(pb.SingleMessageMetadata(payload_size=9), b"xyz")])


def test_empty_batch() -> None:
    assert parse_batch(b"", 0) == []
    assert build_batch([]) == b""


def test_every_truncation_raises() -> None:
    data = build_batch(items(4))
    for cut in range(len(data)):
        with pytest.raises(RemoteProtocolError):
            parse_batch(data[:cut], 4)


@pytest.mark.parametrize(
    ("data", "count"),
    [
        (b"", 1),
        (build_batch(items(2)), 3),  # fewer messages than announced
        (build_batch(items(2)), 1),  # stray bytes left over
        (build_batch(items(1)), -1),
        (struct.pack(">I", 0), 1),  # metadata without payload_size
        (struct.pack(">I", 3) + b"\xff\xff\xff", 1),
        (struct.pack(">I", 0xFFFFFFFF) + b"x", 1),
        (struct.pack(">I", 2) + b"\x18\x7f", 1),  # payload_size 127 > what is left
    ],
)
def test_malformed(data: bytes, count: int) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_batch(data, count)


def test_negative_payload_size() -> None:
    meta = pb.SingleMessageMetadata(payload_size=-1).SerializeToString()
    with pytest.raises(RemoteProtocolError):
        parse_batch(struct.pack(">I", len(meta)) + meta, 1)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(-2, 20))
def test_garbage_only_raises_remote_protocol_error(data: bytes, count: int) -> None:
    try:
        result = parse_batch(data, count)
    except RemoteProtocolError:
        return
    assert len(result) == count
