"""Hand-written encoders for the two frames a broker sends most, MESSAGE and
SEND_RECEIPT, and for the SEND a client writes for a plain message (in a
transaction or not).

Building a ``BaseCommand`` object per message costs several microseconds in Python;
these functions write the same protobuf bytes directly. Tests compare them byte for
byte with protobuf's own serialization of the equivalent message, so they must follow
its rules exactly: fields in field-number order, varints, negative int32/int64 values
sign-extended to ten bytes, repeated scalars unpacked (proto2's default), optional
fields written only when set.

Protobuf tags used below are ``(field_number << 3) | wire_type`` with wire type 0
(varint) or 2 (length-delimited)::

    BaseCommand      08 type              4a message (9)       3a send_receipt (7)
    CommandMessage   08 consumer_id       12 message_id        18 redelivery_count
                     20 ack_set (each)
    CommandSendReceipt 08 producer_id     10 sequence_id       1a message_id
                     20 highest_sequence_id
    MessageIdData    08 ledgerId          10 entryId           18 partition
    BaseCommand      32 send (6)
    CommandSend      08 producer_id       10 sequence_id       18 num_messages
                     20 txnid_least_bits  28 txnid_most_bits
    MessageMetadata  0a producer_name     10 sequence_id       18 publish_time
                     58 num_messages_in_batch (11)             82 01 schema_version (16)
                     b0 01 txnid_least_bits (22)               b8 01 txnid_most_bits (23)
"""

from __future__ import annotations

from collections.abc import Sequence

from quasar.errors import LocalProtocolError

from ._wire import (
    KEEP_GIL,
    MAGIC_CRC32C_BYTES,
    MASK64,
    MAX_U32,
    U32,
    U32X2,
    BytesLike,
    crc32c_c,
    varint,
)

__all__ = [
    "encode_message_frame",
    "encode_plain_metadata",
    "encode_plain_send",
    "encode_plain_send_parts",
    "encode_send_receipt",
]

_ONE_BYTE = [bytes((i,)) for i in range(0x80)]
_varint = varint


def encode_message_frame(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: Sequence[int] | None,
    entry: BytesLike,
) -> bytes:
    """Return a complete MESSAGE frame delivering the stored ``entry``.

    Equal to ``encode_payload_command(cmd, entry)`` for the ``BaseCommand{MESSAGE}``
    whose ``message_id`` has ``ledgerId``/``entryId`` and, when not -1, ``partition``;
    ``redelivery_count`` is written only when non-zero and ``ack_set`` only when
    non-empty. Ids may be given signed (-1 is written as 2^64-1). Raises
    ``LocalProtocolError`` if the frame would not fit a u32 size.
    """
    varint = _varint
    mid = b"\x08" + varint(ledger_id & MASK64) + b"\x10" + varint(entry_id & MASK64)
    if partition != -1:
        # int32 on the wire, but a negative value is sign-extended to 64 bits.
        mid += b"\x18" + varint(partition & MASK64)
    msg = b"\x08" + varint(consumer_id & MASK64) + b"\x12" + _ONE_BYTE[len(mid)] + mid
    if redelivery_count:
        msg += b"\x18" + varint(redelivery_count & MASK64)
    if ack_set:
        msg += b"".join([b"\x20" + varint(word & MASK64) for word in ack_set])
    # The MESSAGE body stays far below 2^14 bytes (ack sets are bounded by batch size).
    cmd = b"\x08\x09\x4a" + varint(len(msg)) + msg
    size = len(cmd)
    total = 4 + size + len(entry)
    if total > MAX_U32:
        raise LocalProtocolError(f"frame of {total} bytes does not fit a u32 size")
    return b"".join((U32X2.pack(total, size), cmd, entry))


def encode_send_receipt(
    producer_id: int,
    sequence_id: int,
    ledger_id: int,
    entry_id: int,
    highest_sequence_id: int = 0,
) -> bytes:
    """Return a complete SEND_RECEIPT frame for a stored message.

    Equal to ``encode_command`` of ``BaseCommand{SEND_RECEIPT}`` with ``message_id``
    ``{ledgerId, entryId}`` and ``highest_sequence_id`` only when non-zero. Ids may be
    given signed (-1 is written as 2^64-1).
    """
    varint = _varint
    mid = b"\x08" + varint(ledger_id & MASK64) + b"\x10" + varint(entry_id & MASK64)
    receipt = (
        b"\x08"
        + varint(producer_id & MASK64)
        + b"\x10"
        + varint(sequence_id & MASK64)
        + b"\x1a"
        + _ONE_BYTE[len(mid)]
        + mid
    )
    if highest_sequence_id:
        receipt += b"\x20" + varint(highest_sequence_id & MASK64)
    cmd = b"\x08\x07\x3a" + _ONE_BYTE[len(receipt)] + receipt
    size = len(cmd)
    return U32X2.pack(size + 4, size) + cmd


# (publish time, its encoded field) of the last call; a tuple is swapped atomically.
_time_field: tuple[int, bytes] = (-1, b"")


def encode_plain_metadata(
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    num_messages_in_batch: int | None = None,
    schema_version: bytes = b"",
    txn_id: tuple[int, int] | None = None,
) -> bytes:
    """The serialized ``MessageMetadata`` of an entry with nothing but these fields.

    Equal to protobuf's serialization of ``MessageMetadata(producer_name,
    sequence_id, publish_time)`` plus ``num_messages_in_batch`` when not None,
    ``schema_version`` when not empty and, for an entry of a transaction,
    ``txnid_most_bits`` / ``txnid_least_bits`` from ``txn_id`` = (most, least). Ids
    and times must be in 0..2^64-1 and ``num_messages_in_batch`` in 0..2^31-1; an id
    or time outside that range raises ``LocalProtocolError``.
    """
    if not (0 <= sequence_id <= MASK64 and 0 <= publish_time <= MASK64):
        raise LocalProtocolError(
            f"sequence id {sequence_id} or publish time {publish_time} is not a uint64"
        )
    global _time_field
    name = producer_name.encode()
    cached_time, time_field = _time_field
    if cached_time != publish_time:  # many messages share a millisecond
        time_field = b"\x18" + _varint(publish_time)
        _time_field = (publish_time, time_field)
    meta = b"\x0a" + _varint(len(name)) + name + b"\x10" + _varint(sequence_id) + time_field
    if num_messages_in_batch is not None:
        meta += b"\x58" + _varint(num_messages_in_batch)
    if schema_version:
        meta += b"\x82\x01" + _varint(len(schema_version)) + schema_version
    if txn_id is not None:
        meta += _txn_fields(b"\xb0\x01", b"\xb8\x01", txn_id)
    return meta


def _txn_fields(least_tag: bytes, most_tag: bytes, txn_id: tuple[int, int]) -> bytes:
    """A transaction id's two uint64 fields, least significant bits first (their
    field-number order in both MessageMetadata and CommandSend)."""
    most, least = txn_id
    if not (0 <= most <= MASK64 and 0 <= least <= MASK64):
        raise LocalProtocolError(f"transaction id {txn_id} is not a pair of uint64")
    return least_tag + _varint(least) + most_tag + _varint(most)


def encode_plain_send(
    producer_id: int,
    sequence_id: int,
    num_messages: int | None,
    metadata: bytes,
    payload: BytesLike,
    txn_id: tuple[int, int] | None = None,
) -> bytes:
    """A complete SEND frame with a checksummed entry built from ``metadata``.

    Equal to ``encode_message(BaseCommand{SEND{producer_id, sequence_id,
    num_messages if not None, txnid_least_bits and txnid_most_bits from txn_id =
    (most, least) if not None}}, metadata, payload)`` where ``metadata`` is the
    serialized ``MessageMetadata`` (e.g. from ``encode_plain_metadata``, given the
    same ``txn_id``). Raises ``LocalProtocolError`` if the frame would not fit a u32
    size.
    """
    head, body = encode_plain_send_parts(
        producer_id, sequence_id, num_messages, metadata, payload, txn_id
    )
    return b"".join((head, body))


def encode_plain_send_parts(
    producer_id: int,
    sequence_id: int,
    num_messages: int | None,
    metadata: bytes,
    payload: BytesLike,
    txn_id: tuple[int, int] | None = None,
) -> tuple[bytes, BytesLike]:
    """``encode_plain_send`` as ``(head, payload)``: the frame is ``head + payload``.

    A writer that can send pieces (``writelines``) saves copying the payload, a whole
    batch of up to 128 KiB, into one buffer. Raises ``LocalProtocolError`` if the
    frame would not fit a u32 size.
    """
    send = b"\x08" + _varint(producer_id & MASK64) + b"\x10" + _varint(sequence_id & MASK64)
    if num_messages is not None:
        send += b"\x18" + _varint(num_messages & MASK64)
    if txn_id is not None:
        send += _txn_fields(b"\x20", b"\x28", txn_id)
    cmd = b"\x08\x06\x32" + _varint(len(send)) + send
    head = U32.pack(len(metadata)) + metadata
    crc = crc32c_c(payload, crc32c_c(head, 0, KEEP_GIL), KEEP_GIL)
    size = len(cmd)
    total = 4 + size + 6 + len(head) + len(payload)
    if total > MAX_U32:
        raise LocalProtocolError(f"frame of {total} bytes does not fit a u32 size")
    frame_head = b"".join(
        (U32X2.pack(total, size), cmd, MAGIC_CRC32C_BYTES, U32.pack(crc), head)
    )
    return frame_head, payload
