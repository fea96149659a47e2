"""Turning one MESSAGE (command + stored entry) into the application's messages.

Pure: no I/O, no consumer state. The consumer passes in which ids to skip (reader
start position) and gets back the messages to queue, how many were skipped (each is a
permit to return) and, for an entry it cannot use, the ``CommandAck.ValidationError``
to report with an ACK, as the C++ client does.

A chunk of a chunked message is not a message by itself: ``decode_entry`` hands back
its metadata and (still compressed) bytes in ``chunk`` for the consumer's
``ChunkAssembly``, and ``assembled_message`` turns the completed message into one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from quasar.client.chunk_assembly import AssembledMessage
from quasar.client.enums import ConsumerCryptoFailureAction
from quasar.client.exceptions import CryptoError
from quasar.client.message import Message
from quasar.client.message_crypto import MessageDecryptor
from quasar.client.message_id import MessageId
from quasar.client.schema import Schema
from quasar.errors import RemoteProtocolError
from quasar.protocol import pb
from quasar.protocol.ack_set import words_to_bits
from quasar.protocol.batch import split_batch
from quasar.protocol.compression import decompress
from quasar.protocol.entry import parse_entry

log = logging.getLogger(__name__)


@dataclass
class DecodedEntry:
    """The outcome of decoding one MESSAGE frame."""

    ledger_id: int
    entry_id: int
    messages: list[Message] = field(default_factory=list)
    skipped: int = 0
    # Set when the entry is unusable: report it with ACK{validation_error}.
    validation_error: int | None = None
    # Messages in the entry (the permits it used).
    count: int = 1
    # For a batch that came with an ack_set: the still-unacked members as bits.
    batch_size: int = 0
    unacked_bits: int | None = None
    # Messages kept from the application because they could not be decrypted.
    held: int = 0
    # A chunk of a chunked message: its metadata and payload, for reassembly.
    chunk: tuple[pb.MessageMetadata, bytes] | None = None


def decode_entry(
    cmd: Any,
    payload: bytes,
    checksum_ok: bool | None,
    *,
    topic: str,
    partition: int,
    schema: Schema | None,
    consumer: Any,
    skip: Callable[[MessageId], bool] = lambda _: False,
    decryptor: MessageDecryptor | None = None,
    crypto_failure_action: int = ConsumerCryptoFailureAction.FAIL,
) -> DecodedEntry:
    """Decode a ``CommandMessage`` and its entry into messages.

    Batch members whose bit in ``cmd.ack_set`` is 0 (already acked), that ``skip``
    rejects, or that compaction marked ``compacted_out`` are counted in ``skipped``.
    An encrypted entry is decrypted with ``decryptor``; one that cannot be is held
    back (FAIL: counted in ``held``), acked with DecryptionError (DISCARD) or
    delivered encrypted as one message (CONSUME), as ``crypto_failure_action`` says.
    """
    mid = MessageId.from_pb(cmd.message_id)
    ledger, entry = mid.ledger_id(), mid.entry_id()
    if partition < 0:
        partition = mid.partition()
    out = DecodedEntry(ledger, entry)
    if checksum_ok is False:
        out.validation_error = pb.CommandAck.ChecksumMismatch
        return out
    try:
        parsed = parse_entry(payload, verify_checksum=False)
    except RemoteProtocolError:
        out.validation_error = pb.CommandAck.BatchDeSerializeError
        return out
    md = parsed.metadata
    body = bytes(memoryview(payload)[parsed.payload_offset :])
    is_batch = md.HasField("num_messages_in_batch")
    out.count = md.num_messages_in_batch if is_batch else 1
    if len(md.encryption_keys):
        # Each chunk of a chunked message is encrypted on its own, as Pulsar's
        # producers do (they encrypt after splitting).
        try:
            if decryptor is None:
                raise CryptoError("the consumer has no crypto_key_reader")
            body = decryptor.decrypt(md, body)
        except CryptoError as exc:
            return _undecryptable(out, cmd, md, body, exc, crypto_failure_action, mid,
                                  partition, topic, schema, consumer)
    if md.num_chunks_from_msg > 1 and not is_batch:
        # Decompressed only once whole: the producer compressed before splitting.
        out.chunk = (md, body)
        return out
    if md.compression:
        try:
            body = decompress(md.compression, body, md.uncompressed_size)
        except Exception:  # any codec failure means the same thing: unusable entry
            out.validation_error = pb.CommandAck.DecompressionError
            return out
    common: dict[str, Any] = {
        "publish_time": md.publish_time,
        "topic": topic,
        "redelivery_count": cmd.redelivery_count,
        "schema": schema,
        "schema_version": md.schema_version,
        "producer_name": md.producer_name,
        "consumer": consumer,
    }
    if not is_batch:
        msg_id = MessageId(partition, ledger, entry, -1, 0, topic)
        if skip(msg_id):
            out.skipped = 1
            return out
        if not (
            md.properties
            or md.HasField("partition_key")
            or md.HasField("ordering_key")
            or md.event_time
            or md.null_value
        ):
            # No per-message fields: the same object, without keyword handling.
            out.messages.append(
                Message.plain(
                    body,
                    msg_id,
                    md.publish_time,
                    topic,
                    cmd.redelivery_count,
                    schema,
                    md.schema_version,
                    md.producer_name,
                    consumer,
                )
            )
            return out
        out.messages.append(
            Message(
                body,
                msg_id,
                properties={kv.key: kv.value for kv in md.properties},
                partition_key=md.partition_key,
                ordering_key=md.ordering_key,
                event_time=md.event_time,
                null_value=md.null_value,
                **common,
            )
        )
        return out
    try:
        members = split_batch(body, out.count)
    except RemoteProtocolError:
        out.validation_error = pb.CommandAck.BatchDeSerializeError
        return out
    n = out.count
    out.batch_size = n
    unacked = words_to_bits(cmd.ack_set) if len(cmd.ack_set) else None
    out.unacked_bits = unacked
    messages = out.messages
    append = messages.append
    plain = Message.plain
    publish_time = md.publish_time
    redelivery_count = cmd.redelivery_count
    schema_version = md.schema_version
    producer_name = md.producer_name
    for i, (smm, data) in enumerate(members):
        msg_id = MessageId(partition, ledger, entry, i, n, topic)
        if (unacked is not None and not unacked >> i & 1) or skip(msg_id):
            out.skipped += 1
            continue
        if smm is None:
            # Only payload_size and sequence_id: every other field has its default.
            append(
                plain(
                    data,
                    msg_id,
                    publish_time,
                    topic,
                    redelivery_count,
                    schema,
                    schema_version,
                    producer_name,
                    consumer,
                )
            )
            continue
        if smm.compacted_out:
            out.skipped += 1
            continue
        append(
            Message(
                data,
                msg_id,
                properties={kv.key: kv.value for kv in smm.properties},
                partition_key=smm.partition_key,
                ordering_key=smm.ordering_key,
                event_time=smm.event_time,
                null_value=smm.null_value,
                **common,
            )
        )
    return out


def _undecryptable(
    out: DecodedEntry,
    cmd: Any,
    md: Any,
    body: bytes,
    exc: CryptoError,
    action: int,
    mid: MessageId,
    partition: int,
    topic: str,
    schema: Schema | None,
    consumer: Any,
) -> DecodedEntry:
    """An entry that did not decrypt, handled as the consumer's failure action says."""
    if action == ConsumerCryptoFailureAction.DISCARD:
        log.warning("discarding %s of %s: %s", mid, topic, exc)
        out.validation_error = pb.CommandAck.DecryptionError
        return out
    if action == ConsumerCryptoFailureAction.CONSUME:
        # The encrypted payload as one message, a batch too: the application holds
        # the keys' metadata and decrypts (and splits) it itself.
        out.messages.append(
            Message(
                body,
                MessageId(partition, mid.ledger_id(), mid.entry_id(), -1, 0, topic),
                properties={kv.key: kv.value for kv in md.properties},
                partition_key=md.partition_key,
                ordering_key=md.ordering_key,
                publish_time=md.publish_time,
                event_time=md.event_time,
                topic=topic,
                redelivery_count=cmd.redelivery_count,
                schema=schema,
                schema_version=md.schema_version,
                producer_name=md.producer_name,
                consumer=consumer,
            )
        )
        return out
    log.warning(
        "cannot decrypt %s of %s, keeping it unacknowledged "
        "(crypto_failure_action=FAIL): %s", mid, topic, exc,
    )
    out.held = out.count
    return out
def assembled_message(
    assembled: AssembledMessage,
    *,
    redelivery_count: int,
    topic: str,
    schema: Schema | None,
    consumer: Any,
) -> Message | None:
    """The message of a completed chunked message (its last chunk's metadata holds
    every message field; its chunks were decrypted one by one), or None when its
    payload does not decompress."""
    md = assembled.metadata
    body = assembled.payload
    if md.compression:
        try:
            body = decompress(md.compression, body, md.uncompressed_size)
        except Exception:  # any codec failure means the same thing: unusable message
            return None
    return Message(
        body,
        assembled.message_id,
        properties={kv.key: kv.value for kv in md.properties},
        partition_key=md.partition_key,
        ordering_key=md.ordering_key,
        event_time=md.event_time,
        null_value=md.null_value,
        publish_time=md.publish_time,
        topic=topic,
        redelivery_count=redelivery_count,
        schema=schema,
        schema_version=md.schema_version,
        producer_name=md.producer_name,
        consumer=consumer,
    )
