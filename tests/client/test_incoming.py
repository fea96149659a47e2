"""Decoding MESSAGE entries into messages (pure, no broker)."""

from __future__ import annotations

from quasar.client.incoming import decode_entry
from quasar.client.message_id import MessageId
from quasar.client.outgoing import (
    Batch,
    OutgoingMessage,
    batch_payload,
    fill_batch_metadata,
)
from quasar.protocol import compress, make_entry, pb

TOPIC = "persistent://public/default/t-partition-2"


def _cmd(entry: int = 4, ack_set: list[int] | None = None) -> pb.CommandMessage:
    cmd = pb.CommandMessage(consumer_id=1, redelivery_count=2)
    cmd.message_id.ledgerId = 9
    cmd.message_id.entryId = entry
    cmd.ack_set.extend(ack_set or [])
    return cmd


def _batch_entry(n: int, codec: int = 0) -> bytes:
    batch = Batch()
    for i in range(n):
        batch.append(OutgoingMessage(f"m{i}".encode(), properties={"i": str(i)}), i, None)
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=123)
    fill_batch_metadata(md, batch)
    payload = batch_payload(batch)
    if codec:
        md.compression = codec
        md.uncompressed_size = len(payload)
        payload = compress(codec, payload)
    return make_entry(md, payload)


def test_single_message() -> None:
    md = pb.MessageMetadata(
        producer_name="p",
        sequence_id=1,
        publish_time=5,
        partition_key="k",
        event_time=7,
    )
    md.properties.add(key="a", value="b")
    out = decode_entry(
        _cmd(),
        make_entry(md, b"body"),
        True,
        topic=TOPIC,
        partition=2,
        schema=None,
        consumer=None,
    )
    assert out.validation_error is None and out.skipped == 0
    (msg,) = out.messages
    assert (
        msg.data() == b"body"
        and msg.properties() == {"a": "b"}
        and msg.partition_key() == "k"
    )
    assert msg.message_id() == MessageId(2, 9, 4)
    assert (
        msg.redelivery_count() == 2
        and msg.event_timestamp() == 7
        and msg.publish_timestamp() == 5
    )


def test_batch_with_ack_set_and_skip() -> None:
    # Member 1 was acked before (bit 0 in ack_set); the reader skips member 0.
    out = decode_entry(
        _cmd(ack_set=[0b1101]),
        _batch_entry(4, codec=1),
        True,
        topic=TOPIC,
        partition=2,
        schema=None,
        consumer=None,
        skip=lambda mid: mid.batch_index() == 0,
    )
    assert [m.data() for m in out.messages] == [b"m2", b"m3"]
    assert [m.message_id().batch_index() for m in out.messages] == [2, 3]
    assert all(m.message_id().batch_size() == 4 for m in out.messages)
    assert out.skipped == 2 and out.count == 4 and out.unacked_bits == 0b1101
    assert out.messages[0].properties() == {"i": "2"}


def test_unusable_entries_report_validation_errors() -> None:
    entry = _batch_entry(3, codec=2)
    bad_checksum = decode_entry(
        _cmd(), entry, False, topic=TOPIC, partition=2, schema=None, consumer=None
    )
    assert bad_checksum.validation_error == pb.CommandAck.ChecksumMismatch
    md = pb.MessageMetadata(
        producer_name="p",
        sequence_id=1,
        publish_time=5,
        compression=2,
        uncompressed_size=10,
    )
    corrupt = decode_entry(
        _cmd(),
        make_entry(md, b"not zlib"),
        True,
        topic=TOPIC,
        partition=2,
        schema=None,
        consumer=None,
    )
    assert corrupt.validation_error == pb.CommandAck.DecompressionError
    garbage = decode_entry(
        _cmd(), b"\x00\x00", None, topic=TOPIC, partition=2, schema=None, consumer=None
    )
    assert garbage.validation_error == pb.CommandAck.BatchDeSerializeError
