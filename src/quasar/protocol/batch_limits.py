"""What a message's outer metadata may claim, checked without decompressing it.

The outer ``MessageMetadata`` of an entry is the peer's word: ``uncompressed_size``
says how large a compressed payload becomes, ``num_messages_in_batch`` how many
messages a batch holds. The broker sizes work by both (compaction decompresses and
splits batches, permits and unacked counts go by the batch size, an ack set has a bit
per batch member), so both are bounded by what the bytes can really hold before
anything is allocated for them.

A batch record costs at least ``BATCH_RECORD_BYTES_MIN`` bytes of framing, even with
an empty payload::

    +--------------+----------------------------------------+---------+
    | metaSize u32 | SingleMessageMetadata: payload_size    | payload |
    |   4 bytes    | (required): tag 0x18 + varint, >= 2 B  | >= 0 B  |
    +--------------+----------------------------------------+---------+

so a batch whose uncompressed payload has ``B`` bytes holds at most ``B // 6``
messages, and its ack set needs at most ``ceil(that / 64)`` words.

A chunk of a chunked message carries the whole message's ``uncompressed_size``, which
may exceed ``maxMessageSize`` (that is what chunking is for); chunks are never batches,
so only their batch bound applies. A chunk's own claims are checked instead: its
``chunk_id`` lies in ``[0, num_chunks_from_msg)`` and it is no batch, because the
broker's deduplication and every consumer's reassembly key on those fields.
"""

from __future__ import annotations

from typing import NamedTuple

from ._generated import pulsar_api_pb2 as pb

__all__ = [
    "ACK_SET_WORD_BITS",
    "BATCH_RECORD_BYTES_MIN",
    "REFUSED_ACK_SET",
    "REFUSED_BATCH_SIZE",
    "REFUSED_CHUNK",
    "REFUSED_COMPACTION_BATCH_SIZE",
    "REFUSED_DECOMPRESSED_SIZE",
    "REFUSED_UNCOMPRESSED_SIZE",
    "Refusal",
    "ack_set_words_max",
    "batch_records_max",
    "check_published",
    "is_partial_chunk",
    "stored_batch_size",
]

# Four bytes of metaSize plus the smallest SingleMessageMetadata (payload_size = 0).
BATCH_RECORD_BYTES_MIN = 6
ACK_SET_WORD_BITS = 64

# The reasons a refusal is counted under (the ``reason`` label of
# ``quasar_hostile_input_refused_total``).
REFUSED_UNCOMPRESSED_SIZE = "uncompressed_size"
REFUSED_BATCH_SIZE = "batch_size"
REFUSED_ACK_SET = "ack_set"
REFUSED_DECOMPRESSED_SIZE = "decompressed_size"
REFUSED_COMPACTION_BATCH_SIZE = "compaction_batch_size"
REFUSED_CHUNK = "chunk"


class Refusal(NamedTuple):
    """Why a message or an acknowledgement is refused: a ``REFUSED_*`` reason and a
    message for the client."""

    reason: str
    message: str


def batch_records_max(body_bytes: int) -> int:
    """The most batch records ``body_bytes`` of uncompressed payload can hold."""
    return max(body_bytes, 0) // BATCH_RECORD_BYTES_MIN


def ack_set_words_max(batch_size: int) -> int:
    """The most ack-set words a batch of ``batch_size`` messages needs."""
    return (max(batch_size, 0) + ACK_SET_WORD_BITS - 1) // ACK_SET_WORD_BITS


def _body_bytes(md: pb.MessageMetadata, payload_bytes: int) -> int:
    """The payload's size once decompressed, as far as the metadata tells."""
    return md.uncompressed_size if md.compression != pb.NONE else payload_bytes


def check_published(
    md: pb.MessageMetadata,
    payload_bytes: int,
    num_messages: int,
    max_uncompressed_size: int,
) -> Refusal | None:
    """Check a SEND's metadata (``payload_bytes``: the payload after the metadata;
    ``num_messages``: ``CommandSend.num_messages``) against ``maxMessageSize``.

    Returns the refusal, or None when the message may be stored. Reads only fields of
    the outer metadata; nothing is decompressed. This runs for every SEND, so each
    field is read at most once and the usual cases return early.
    """
    uncompressed = md.uncompressed_size
    chunks = md.num_chunks_from_msg
    if chunks > 1 or chunks < 0:
        return _check_chunk(md, chunks, num_messages)
    if uncompressed > max_uncompressed_size:
        return Refusal(
            REFUSED_UNCOMPRESSED_SIZE,
            f"Message uncompresses to {uncompressed} bytes, "
            f"more than maxMessageSize {max_uncompressed_size}",
        )
    if not md.HasField("num_messages_in_batch"):
        if num_messages == 1:
            return None
        n = 1
    else:
        n = md.num_messages_in_batch
    records_max = (
        uncompressed if md.compression != pb.NONE else payload_bytes
    ) // BATCH_RECORD_BYTES_MIN
    if n != 1 and not 1 <= n <= records_max:
        return Refusal(
            REFUSED_BATCH_SIZE,
            f"Batch claims {n} messages; its payload holds 1 to {records_max}",
        )
    if num_messages != n and not 1 <= num_messages <= max(records_max, 1):
        return Refusal(
            REFUSED_BATCH_SIZE,
            f"SEND claims {num_messages} messages; its payload holds 1 to "
            f"{max(records_max, 1)}",
        )
    return None


def _check_chunk(md: pb.MessageMetadata, chunks: int, num_messages: int) -> Refusal | None:
    """Check one chunk of a chunked message (``chunks``: its ``num_chunks_from_msg``)."""
    chunk_id = md.chunk_id
    if chunks < 0 or not 0 <= chunk_id < chunks:
        return Refusal(
            REFUSED_CHUNK, f"Chunk {chunk_id} of {chunks}: not a chunk of the message"
        )
    if md.HasField("num_messages_in_batch") or num_messages != 1:
        return Refusal(REFUSED_CHUNK, "A chunk of a chunked message cannot be a batch")
    return None


def is_partial_chunk(md: pb.MessageMetadata) -> bool:
    """Whether ``md`` is a chunk other than the last of its message.

    Such a chunk shares its sequence id with the later chunks, so deduplication must
    not record the id until the last chunk is stored (Pulsar's rule).
    """
    chunks = md.num_chunks_from_msg
    return chunks > 1 and md.chunk_id < chunks - 1


def stored_batch_size(md: pb.MessageMetadata, payload_bytes: int) -> int:
    """The message count of a stored batch entry, for permits and unacked counts.

    Entries stored before ``check_published`` existed may claim a count their bytes
    cannot hold (or one below 1); such an entry counts as one message, so it can
    neither drive a consumer's permits or unacked count negative nor inflate them.
    """
    n = md.num_messages_in_batch
    if n < 1 or n > batch_records_max(_body_bytes(md, payload_bytes)):
        return 1
    return n
