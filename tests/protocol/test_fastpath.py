"""The hand-written hot-path encoders equal protobuf's serialization byte for byte."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from quasar.protocol import (
    FrameDecoder,
    encode_command,
    encode_message_frame,
    encode_payload_command,
    encode_send_receipt,
    make_entry,
    pb,
)

from ._helpers import T, metadata

MASK = (1 << 64) - 1
u64 = st.one_of(st.integers(0, 300), st.integers(0, MASK), st.just(MASK))
signed_id = st.one_of(
    st.just(-1), st.integers(0, 1 << 40), st.integers(0, (1 << 63) - 1)
)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)
SETTINGS = settings(max_examples=300, deadline=None)


def reference_message_frame(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: list[int] | None,
    entry: bytes,
) -> bytes:
    mid = pb.MessageIdData(ledgerId=ledger_id & MASK, entryId=entry_id & MASK)
    if partition != -1:
        mid.partition = partition
    msg = pb.CommandMessage(consumer_id=consumer_id, message_id=mid)
    if redelivery_count:
        msg.redelivery_count = redelivery_count
    if ack_set:
        msg.ack_set.extend(ack_set)
    return encode_payload_command(pb.BaseCommand(type=T.MESSAGE, message=msg), entry)


@SETTINGS
@given(
    u64,
    signed_id,
    signed_id,
    st.one_of(
        st.just(-1), st.integers(0, 1000), st.integers(-(1 << 31), (1 << 31) - 1)
    ),
    st.one_of(st.just(0), st.integers(0, (1 << 32) - 1)),
    st.one_of(st.none(), st.lists(int64, max_size=4)),
    st.binary(max_size=64),
)
def test_message_frame_equals_protobuf(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: list[int] | None,
    entry: bytes,
) -> None:
    args = (
        consumer_id,
        ledger_id,
        entry_id,
        partition,
        redelivery_count,
        ack_set,
        entry,
    )
    assert encode_message_frame(*args) == reference_message_frame(*args)


@SETTINGS
@given(u64, u64, signed_id, signed_id, st.one_of(st.just(0), u64))
def test_send_receipt_equals_protobuf(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest: int
) -> None:
    receipt = pb.CommandSendReceipt(
        producer_id=producer_id,
        sequence_id=sequence_id,
        message_id=pb.MessageIdData(ledgerId=ledger_id & MASK, entryId=entry_id & MASK),
    )
    if highest:
        receipt.highest_sequence_id = highest
    expected = encode_command(pb.BaseCommand(type=T.SEND_RECEIPT, send_receipt=receipt))
    assert (
        encode_send_receipt(producer_id, sequence_id, ledger_id, entry_id, highest)
        == expected
    )


def test_message_frame_decodes() -> None:
    entry = make_entry(metadata(num_messages_in_batch=3), b"batch-bytes")
    frame = encode_message_frame(7, -1, -1, 2, 3, [-1, 0x7], entry)
    [decoded] = FrameDecoder(1 << 20).feed(frame)
    msg = decoded.command.message
    assert msg.consumer_id == 7
    assert (msg.message_id.ledgerId, msg.message_id.entryId) == (MASK, MASK)
    assert msg.message_id.partition == 2
    assert msg.redelivery_count == 3
    assert list(msg.ack_set) == [-1, 7]
    assert decoded.payload == entry and decoded.checksum_ok


def test_send_receipt_decodes() -> None:
    [decoded] = FrameDecoder(1 << 20).feed(encode_send_receipt(1, 2, 3, 4))
    receipt = decoded.command.send_receipt
    assert (receipt.producer_id, receipt.sequence_id) == (1, 2)
    assert (receipt.message_id.ledgerId, receipt.message_id.entryId) == (3, 4)
    assert not receipt.HasField("highest_sequence_id")


def test_partition_minus_one_is_omitted() -> None:
    frame = encode_message_frame(1, 2, 3, -1, 0, None, b"")
    cmd_size = int.from_bytes(frame[4:8], "big")
    cmd = pb.BaseCommand.FromString(frame[8 : 8 + cmd_size])
    assert not cmd.message.message_id.HasField("partition")
    assert cmd.message.message_id.partition == -1


@SETTINGS
@given(
    u64,
    u64,
    st.one_of(st.none(), st.integers(0, (1 << 31) - 1)),
    st.text(max_size=20),
    u64,
    st.one_of(st.none(), st.integers(0, (1 << 31) - 1)),
    st.binary(max_size=12),
    st.binary(max_size=64),
    st.one_of(st.none(), st.tuples(u64, u64)),
)
def test_plain_send_matches_protobuf(
    producer_id: int,
    sequence_id: int,
    num_messages: int | None,
    name: str,
    publish_time: int,
    in_batch: int | None,
    schema_version: bytes,
    payload: bytes,
    txn_id: tuple[int, int] | None,
) -> None:
    from quasar.protocol import (
        encode_message,
        encode_plain_metadata,
        encode_plain_send,
        encode_plain_send_parts,
    )

    md = pb.MessageMetadata(
        producer_name=name, sequence_id=sequence_id, publish_time=publish_time
    )
    if in_batch is not None:
        md.num_messages_in_batch = in_batch
    if schema_version:
        md.schema_version = schema_version
    send = pb.CommandSend(producer_id=producer_id, sequence_id=sequence_id)
    if num_messages is not None:
        send.num_messages = num_messages
    if txn_id is not None:
        md.txnid_most_bits, md.txnid_least_bits = txn_id
        send.txnid_most_bits, send.txnid_least_bits = txn_id
    meta = encode_plain_metadata(
        name, sequence_id, publish_time, in_batch, schema_version, txn_id
    )
    assert meta == md.SerializeToString()
    expected = encode_message(pb.BaseCommand(type=T.SEND, send=send), md, payload)
    assert (
        encode_plain_send(producer_id, sequence_id, num_messages, meta, payload, txn_id)
        == expected
    )
    head, body = encode_plain_send_parts(
        producer_id, sequence_id, num_messages, meta, payload, txn_id
    )
    assert head + body == expected and body is payload  # the payload is not copied


def test_plain_metadata_rejects_values_outside_uint64() -> None:
    import pytest

    from quasar.errors import LocalProtocolError
    from quasar.protocol import encode_plain_metadata

    with pytest.raises(LocalProtocolError):
        encode_plain_metadata("p", -1, 0)
    with pytest.raises(LocalProtocolError):
        encode_plain_metadata("p", 0, 1 << 64)
    with pytest.raises(LocalProtocolError):
        encode_plain_metadata("p", 0, 0, txn_id=(0, -1))
    with pytest.raises(LocalProtocolError):
        encode_plain_metadata("p", 0, 0, txn_id=(1 << 64, 0))


def test_varint_matches_protobuf_at_every_length_boundary() -> None:
    from quasar.protocol._wire import varint

    values = {0, (1 << 64) - 1}
    for bits in range(7, 64, 7):
        values |= {(1 << bits) - 1, 1 << bits, (1 << bits) + 1}
    for v in sorted(values):
        expected = pb.MessageIdData(ledgerId=v, entryId=0).SerializeToString()[1:-2]
        assert varint(v) == expected, v
