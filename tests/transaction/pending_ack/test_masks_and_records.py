"""Batch-index masks and the pending-ack log format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quasar.errors import CorruptRecordError
from quasar.protocol import ack_set as wire
from quasar.protocol import pb, pending_ack_pb
from quasar.protocol.ack_set import bits_to_words, words_to_bits
from quasar.storage.api import Position
from quasar.transaction import TxnID
from quasar.transaction.pending_ack import (
    AckedPosition,
    AckType,
    PendingAckOp,
    PendingAckRecord,
    decode_entry,
    masks,
    pending_ack_ledger_name,
    pending_ack_topic,
)
from quasar.transaction.pending_ack.records import encode_batch, encode_record

from .helpers import batch_ack_set

# ---------------------------------------------------------------------------- masks


@given(st.integers(1, 200), st.data())
def test_acked_mask_inverts_the_wire_ack_set(n: int, data: st.DataObject) -> None:
    acked = data.draw(st.sets(st.integers(0, n - 1)))
    mask = masks.acked_mask(batch_ack_set(n, acked), n)
    if len(acked) == n:
        assert mask == masks.WHOLE
    else:
        assert mask == sum(1 << i for i in acked)
        assert masks.unacked_words(mask, n) == batch_ack_set(n, acked)
        # The same words the protocol helpers build.
        expected = wire.full_ack_set(n)
        for i in acked:
            expected = wire.clear_index(expected, i)
        assert masks.unacked_words(mask, n) == expected


def test_bits_past_the_batch_size_never_count() -> None:
    # A client ack set for a batch of 3 taking member 0 leaves bits 3..63 clear.
    assert masks.acked_mask([0b110], 3) == 0b001
    # Without the batch size every clear bit of the word would look acked.
    assert masks.acked_mask([0b110], None) == ((1 << 64) - 1) & ~0b110


def test_whole_and_empty_acks() -> None:
    assert masks.acked_mask(None, 5) == masks.WHOLE
    assert masks.acked_mask([], 5) == masks.WHOLE
    assert masks.acked_mask([0b11111], 5) == 0  # takes nothing
    assert masks.covers_all(masks.WHOLE, None)
    assert masks.covers_all(0b111, 3) and not masks.covers_all(0b011, 3)
    assert masks.unacked_words(masks.WHOLE, 7) == []


@given(st.integers(0, 2**130))
def test_words_roundtrip(bits: int) -> None:
    assert words_to_bits(bits_to_words(bits)) == bits
    assert all(-(2**63) <= w < 2**63 for w in bits_to_words(bits))


# ---------------------------------------------------------------------------- records

positions = st.builds(Position, st.integers(0, 2**40), st.integers(0, 2**40))
txn_ids = st.builds(TxnID, st.integers(0, 2**16), st.integers(0, 2**63))
acked_positions = st.builds(
    AckedPosition,
    positions,
    st.none() | st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=3).map(tuple),
    st.none() | st.integers(1, 1000),
)


@st.composite
def records(draw: st.DrawFn) -> PendingAckRecord:
    op = draw(st.sampled_from(PendingAckOp))
    ack_type = draw(st.sampled_from(AckType))
    if op is not PendingAckOp.ACK:
        return PendingAckRecord(op, ack_type, draw(txn_ids))
    n = 1 if ack_type is AckType.CUMULATIVE else draw(st.integers(1, 4))
    acked = tuple(draw(st.lists(acked_positions, min_size=n, max_size=n)))
    return PendingAckRecord(op, ack_type, draw(txn_ids), acked)


@given(records())
def test_record_roundtrip(record: PendingAckRecord) -> None:
    assert decode_entry(encode_record(record)) == [record]


@given(st.lists(records(), min_size=1, max_size=5))
def test_batched_entries_are_read_too(batch: list[PendingAckRecord]) -> None:
    data = encode_batch(batch)
    assert data[:4] == bytes([0x0E, 0x01, 0x00, 0x01])
    assert decode_entry(data) == batch


def test_record_fields_are_pulsars() -> None:
    record = PendingAckRecord(
        PendingAckOp.ACK, AckType.INDIVIDUAL, TxnID(3, 9),
        (AckedPosition(Position(5, 6), (0b101,), 3),),
    )
    entry = pending_ack_pb.PendingAckMetadataEntry()
    entry.ParseFromString(encode_record(record))
    assert entry.pending_ack_op == pending_ack_pb.ACK
    assert entry.ack_type == pb.CommandAck.Individual
    assert (entry.txnid_most_bits, entry.txnid_least_bits) == (3, 9)
    meta = entry.pending_ack_metadata[0]
    assert (meta.ledgerId, meta.entryId, list(meta.ack_set), meta.batch_size) == (5, 6, [5], 3)


@pytest.mark.parametrize(
    "entry",
    [
        pending_ack_pb.PendingAckMetadataEntry(ack_type=pb.CommandAck.Individual, txnid_most_bits=0, txnid_least_bits=1),
        pending_ack_pb.PendingAckMetadataEntry(
            pending_ack_op=pending_ack_pb.ACK, ack_type=pb.CommandAck.Individual, txnid_most_bits=0, txnid_least_bits=1
        ),
        pending_ack_pb.PendingAckMetadataEntry(
            pending_ack_op=pending_ack_pb.COMMIT, ack_type=pb.CommandAck.Individual, txnid_least_bits=1
        ),
        pending_ack_pb.PendingAckMetadataEntry(
            pending_ack_op=pending_ack_pb.ABORT, ack_type=pb.CommandAck.Individual, txnid_most_bits=0,
            txnid_least_bits=1,
            pending_ack_metadata=[pending_ack_pb.PendingAckMetadata(ledgerId=1, entryId=1)],
        ),
        pending_ack_pb.PendingAckMetadataEntry(
            pending_ack_op=pending_ack_pb.ACK, ack_type=pb.CommandAck.Cumulative, txnid_most_bits=0,
            txnid_least_bits=1,
            pending_ack_metadata=[
                pending_ack_pb.PendingAckMetadata(ledgerId=1, entryId=1),
                pending_ack_pb.PendingAckMetadata(ledgerId=1, entryId=2),
            ],
        ),
    ],
    ids=["no-op", "ack-without-positions", "no-txn-id", "abort-with-positions",
         "cumulative-with-two"],
)
def test_records_never_written_are_corrupt(
    entry: pending_ack_pb.PendingAckMetadataEntry,
) -> None:
    with pytest.raises(CorruptRecordError):
        decode_entry(entry.SerializeToString())


def test_garbage_and_unknown_batch_versions_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decode_entry(b"\xff\xff\xff")
    with pytest.raises(CorruptRecordError, match="version 2"):
        decode_entry(bytes([0x0E, 0x01, 0x00, 0x02]))


def _ack(batch_size: int | None, ack_set: tuple[int, ...] | None) -> bytes:
    record = PendingAckRecord(
        PendingAckOp.ACK, AckType.INDIVIDUAL, TxnID(1, 2),
        (AckedPosition(Position(3, 4), ack_set, batch_size),),
    )
    return encode_record(record)


def test_replay_refuses_batch_claims_beyond_the_brokers_bounds() -> None:
    # A batch of at most 1,000 members needs at most 16 ack-set words.
    assert len(decode_entry(_ack(1_000, (1,) * 16), batch_size_max=1_000)) == 1
    with pytest.raises(CorruptRecordError, match="batch of 2147483647 messages"):
        decode_entry(_ack(2**31 - 1, (-2,)), batch_size_max=1_000)
    with pytest.raises(CorruptRecordError, match="ack set of 17 words"):
        decode_entry(_ack(None, (1,) * 17), batch_size_max=1_000)
    # Without a bound (tools reading a log) the record decodes as written.
    assert decode_entry(_ack(2**31 - 1, (-2,)))[0].positions[0].batch_size == 2**31 - 1


# ---------------------------------------------------------------------------- naming


def test_store_naming() -> None:
    topic = "persistent://public/default/orders"
    assert pending_ack_topic(topic, "sub") == (
        "persistent://public/default/orders-sub__transaction_pending_ack"
    )
    assert pending_ack_ledger_name(topic, "sub") == (
        "public/default/persistent/orders-sub__transaction_pending_ack"
    )
    # A subscription name never adds a path component.
    assert pending_ack_ledger_name(topic, "a/b c").count("/") == 3


def test_masks_of_a_100000_word_ack_set_are_exact() -> None:
    """A peer's longest ack sets convert in one pass each way (no per-word copy of a
    growing integer), and exactly."""
    words = [-1] * 100_000
    words[0] = -2  # member 0 acked, every other member of 6,400,000 unacked
    n = 64 * len(words)
    acked = masks.acked_mask(words, n)
    assert acked == 1
    assert masks.unacked_words(acked, n) == words
    assert masks.cursor_acked_mask(words, n) == 1
    assert not masks.covers_all(acked, n)
