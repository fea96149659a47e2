"""The snapshot record format: round trips and damage detection."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quasar.errors import CorruptRecordError
from quasar.storage import Position
from quasar.transaction import TxnID
from quasar.transaction.buffer.snapshot_format import (
    ABORTED_SIZE,
    SegmentRef,
    SnapshotIndex,
    SnapshotSegment,
    decode_index,
    decode_segment,
    encode_index,
    encode_segment,
    segment_capacity,
    segment_key,
)
from quasar.transaction.buffer.txn_state import AbortedTxn

u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
positions = st.builds(Position, i64, i64)
aborted = st.lists(
    st.tuples(st.builds(TxnID, u64, u64), st.builds(AbortedTxn, positions, positions)),
    max_size=20,
)
topics = st.text(max_size=50)
indexes = st.builds(
    SnapshotIndex,
    topic=topics,
    taken_at_ms=i64,
    max_read_position=positions,
    next_segment_seq=u64,
    low_watermarks=st.lists(st.tuples(u64, i64), max_size=5),
    segments=st.lists(st.builds(SegmentRef, u64, st.integers(0, 2**32 - 1), positions), max_size=5),
    garbage=st.lists(u64, max_size=5),
    aborted=aborted,
)


@given(indexes)
def test_index_round_trip(index: SnapshotIndex) -> None:
    assert decode_index(encode_index(index)) == index


@given(topics, u64, aborted)
def test_segment_round_trip(topic: str, seq: int, items: list[tuple[TxnID, AbortedTxn]]) -> None:
    seg = SnapshotSegment(topic, seq, items)
    assert decode_segment(encode_segment(seg)) == seg


@given(indexes, st.data())
def test_truncation_is_detected(index: SnapshotIndex, data: st.DataObject) -> None:
    raw = encode_index(index)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(CorruptRecordError):
        decode_index(raw[:cut])
    with pytest.raises(CorruptRecordError):
        decode_index(raw + b"\x00")


def test_header_checks() -> None:
    raw = encode_index(SnapshotIndex("t", 0, Position(1, -1)))
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_index(b"XXXX" + raw[4:])
    with pytest.raises(CorruptRecordError, match="version"):
        decode_index(raw[:4] + struct.pack(">H", 2) + raw[6:])
    with pytest.raises(CorruptRecordError, match="kind"):
        decode_segment(raw)


def test_segment_capacity_fits() -> None:
    topic = "persistent://tenant/namespace/some-topic-partition-3"
    cap = segment_capacity(4096, topic)
    seg = SnapshotSegment(topic, 1, [(TxnID(1, 1), AbortedTxn(Position(1, 1), Position(1, 2)))] * cap)
    assert len(encode_segment(seg)) <= 4096 < len(encode_segment(seg)) + ABORTED_SIZE
    assert segment_key(topic, 3) != topic and not segment_key(topic, 3).startswith("persistent://")
