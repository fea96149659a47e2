"""The batched entry layout: byte-exact against protobuf, both logs, bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quasar.errors import CorruptRecordError
from quasar.protocol import pending_ack_pb, txnlog_pb
from quasar.transaction.batched_log import (
    BATCHED_ENTRY_MAGIC,
    BATCHED_ENTRY_VERSION,
    batched_payload,
    encode_batched_entry,
    is_batched_entry,
)
from quasar.transaction.batched_log.writer import batched_entry_size

u64 = st.integers(0, 2**64 - 1)


@st.composite
def tc_records(draw: st.DrawFn) -> txnlog_pb.TransactionMetadataEntry:
    r = txnlog_pb.TransactionMetadataEntry(
        txnid_least_bits=draw(u64), txnid_most_bits=draw(u64),
        metadata_op=draw(st.sampled_from(list(
            txnlog_pb.TransactionMetadataEntry.TransactionMetadataOp.values()))),
    )
    r.partitions.extend(draw(st.lists(st.text(max_size=300), max_size=3)))
    return r


@settings(deadline=None)
@given(st.lists(tc_records(), max_size=20))
def test_coordinator_batch_is_the_protobuf_message(records: list) -> None:  # type: ignore[type-arg]
    data = encode_batched_entry([r.SerializeToString() for r in records])
    expected = txnlog_pb.BatchedTransactionMetadataEntry(transaction_logs=records)
    assert data[:4] == b"\x0e\x01\x00\x01"
    assert batched_payload(data) == expected.SerializeToString()
    assert len(data) == batched_entry_size([len(r.SerializeToString()) for r in records])
    assert is_batched_entry(data)


@settings(deadline=None)
@given(st.lists(st.tuples(u64, u64), min_size=1, max_size=20))
def test_pending_ack_batch_is_the_protobuf_message(ids: list[tuple[int, int]]) -> None:
    records = [
        pending_ack_pb.PendingAckMetadataEntry(
            pending_ack_op=pending_ack_pb.COMMIT, ack_type=0,
            txnid_most_bits=most, txnid_least_bits=least,
        )
        for most, least in ids
    ]
    data = encode_batched_entry([r.SerializeToString() for r in records])
    parsed = pending_ack_pb.BatchedPendingAckMetadataEntry()
    parsed.ParseFromString(batched_payload(data))
    assert list(parsed.pending_ack_logs) == records


@settings(deadline=None)
@given(tc_records())
def test_a_single_record_is_never_taken_for_a_batch(record: object) -> None:
    assert not is_batched_entry(record.SerializeToString())  # type: ignore[attr-defined]


def test_constants_and_unknown_version() -> None:
    assert (BATCHED_ENTRY_MAGIC, BATCHED_ENTRY_VERSION) == (0x0E01, 1)
    with pytest.raises(CorruptRecordError, match="version 2"):
        batched_payload(b"\x0e\x01\x00\x02")
    with pytest.raises(CorruptRecordError):
        batched_payload(b"\x08\x01")
    assert encode_batched_entry([]) == b"\x0e\x01\x00\x01"
