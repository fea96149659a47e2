"""Stored-entry helpers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quasar.errors import LocalProtocolError, RemoteProtocolError
from quasar.protocol import (
    crc32c,
    make_entry,
    parse_entry,
    payload_of,
    pb,
    verify_entry,
)

from ._helpers import metadata


def test_layout_with_checksum() -> None:
    meta = metadata()
    entry = make_entry(meta, b"payload")
    raw = meta.SerializeToString()
    covered = struct.pack(">I", len(raw)) + raw + b"payload"
    assert entry == b"\x0e\x01" + struct.pack(">I", crc32c(covered)) + covered


def test_layout_without_checksum() -> None:
    meta = metadata()
    raw = meta.SerializeToString()
    assert (
        make_entry(meta, b"p", checksum=False)
        == struct.pack(">I", len(raw)) + raw + b"p"
    )


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300), st.booleans(), st.integers(0, (1 << 64) - 1))
def test_roundtrip(payload: bytes, checksum: bool, seq: int) -> None:
    meta = metadata(
        seq, partition_key="k", properties=[pb.KeyValue(key="a", value="b")]
    )
    entry = make_entry(meta, memoryview(payload), checksum)
    parsed = parse_entry(entry)
    assert parsed.metadata == meta
    assert parsed.has_checksum is checksum
    assert parsed.checksum_ok is (True if checksum else None)
    assert entry[parsed.payload_offset :] == payload
    assert payload_of(entry) == payload
    assert verify_entry(entry)


def test_checksum_mismatch_is_reported() -> None:
    entry = bytearray(make_entry(metadata(), b"abc"))
    entry[-1] ^= 1
    parsed = parse_entry(bytes(entry))
    assert parsed.checksum_ok is False
    assert not verify_entry(bytes(entry))
    assert parse_entry(bytes(entry), verify_checksum=False).checksum_ok is None


def test_marker_entry() -> None:
    # What the transaction buffer writes on commit: marker metadata, empty payload.
    from quasar.protocol import markers_pb

    meta = pb.MessageMetadata(
        producer_name="pulsar.txn.marker",
        sequence_id=0,
        publish_time=1,
        marker_type=markers_pb.TXN_COMMIT,
        txnid_most_bits=1,
        txnid_least_bits=42,
    )
    parsed = parse_entry(make_entry(meta, b""))
    assert parsed.metadata.marker_type == markers_pb.TXN_COMMIT
    assert parsed.checksum_ok is True
    assert payload_of(make_entry(meta, b"")) == b""


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x00",
        b"\x0e\x01\x00\x00\x00\x00\x00",
        struct.pack(">I", 100) + b"short",
        struct.pack(">I", 3) + b"\xff\xff\xff",
        struct.pack(">I", 2) + b"\x08\x01",  # lacks producer_name etc.
    ],
)
def test_malformed_entries(data: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_entry(data)


def test_payload_of_malformed() -> None:
    with pytest.raises(RemoteProtocolError):
        payload_of(struct.pack(">I", 10) + b"abc")


def test_verify_entry_edge_cases() -> None:
    assert verify_entry(b"\x00\x00\x00\x00")  # no checksum: nothing contradicts it
    assert not verify_entry(b"\x0e\x01\x00")


def test_make_entry_requires_complete_metadata() -> None:
    with pytest.raises(LocalProtocolError):
        make_entry(pb.MessageMetadata(sequence_id=1), b"")
