"""Batch payloads: several messages stored as one entry.

An entry whose ``MessageMetadata`` has ``num_messages_in_batch = N`` (the field's
*presence* marks a batch) carries, after decompression, N records::

    +------------------+-----------------------+---------------------+
    | singleMetaSize   | SingleMessageMetadata | payload             |  x N
    |   u32 (BE)       | singleMetaSize bytes  | payload_size bytes  |
    +------------------+-----------------------+---------------------+

The outer metadata holds what applies to the whole entry (sequence id of the first
message, compression, the first message's key); each SingleMessageMetadata holds the
per-message properties, key, event time and sequence id.

Fast paths. Most batches carry messages with nothing but a payload and a sequence id;
their ``SingleMessageMetadata`` is exactly ``18 <payload_size> 40 <sequence_id>``
(tags of fields 3 and 8, varints). ``encode_plain_batch`` writes such batches without
building protobuf objects, and ``split_batch`` recognises such records by hand and
returns ``None`` for their metadata (every other field has its default); any other
record is parsed by protobuf as before. Tests compare both with protobuf byte for byte.
The optional C extension ``_batchsplit`` splits a batch whose records are all plain
in one call (a consumer's most frequent work per message); anything else, including
every malformed batch, goes through the Python code, which reports the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from google.protobuf.message import EncodeError

from quasar.errors import LocalProtocolError, RemoteProtocolError

from ._generated import pulsar_api_pb2 as pb
from ._wire import U32, BytesLike, parse_message, varint
from .int64 import UINT64_MAX

# The extension is optional (setup.py builds it when a C compiler is there). Without
# it split_batch runs in Python; the reason is kept so that quasar.native can report
# which path runs.
BATCHSPLIT_IMPORT_ERROR: ImportError | None = None
try:
    import quasar.protocol._batchsplit as _batchsplit
except ImportError as exc:
    _batchsplit = None  # type: ignore[assignment]
    BATCHSPLIT_IMPORT_ERROR = exc

__all__ = ["build_batch", "encode_plain_batch", "parse_batch", "split_batch"]

_INT32_MAX = (1 << 31) - 1


def parse_batch(
    payload: BytesLike, count: int
) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    """Split an (uncompressed) batch payload into its ``count`` messages.

    Raises ``RemoteProtocolError`` if ``count`` is negative, the payload ends early,
    a SingleMessageMetadata is undecodable or lacks ``payload_size``, a payload size
    is negative, or bytes are left over after ``count`` messages.
    """
    if count < 0:
        raise RemoteProtocolError(f"negative batch size {count}")
    view = memoryview(payload)
    size = len(view)
    pos = 0
    out: list[tuple[pb.SingleMessageMetadata, bytes]] = []
    for index in range(count):
        if size - pos < 4:
            raise RemoteProtocolError(
                f"batch truncated before message {index} of {count}"
            )
        meta_size = U32.unpack_from(view, pos)[0]
        meta_start = pos + 4
        meta_end = meta_start + meta_size
        if meta_end > size:
            raise RemoteProtocolError(
                f"batch message {index}: metadata overruns the payload"
            )
        meta = parse_message(
            pb.SingleMessageMetadata,
            view[meta_start:meta_end],
            f"batch message {index} metadata",
        )
        if meta.payload_size < 0:
            raise RemoteProtocolError(f"batch message {index}: negative payload_size")
        body_end = meta_end + meta.payload_size
        if body_end > size:
            raise RemoteProtocolError(
                f"batch message {index}: payload overruns the batch"
            )
        out.append((meta, bytes(view[meta_end:body_end])))
        pos = body_end
    if pos != size:
        raise RemoteProtocolError(
            f"{size - pos} stray bytes after {count} batch messages"
        )
    return out


def build_batch(items: Iterable[tuple[pb.SingleMessageMetadata, BytesLike]]) -> bytes:
    """Serialize messages into a batch payload (to be compressed, then sent).

    ``payload_size`` is filled in from the payload when it is not set (the caller's
    message is not modified). Raises ``LocalProtocolError`` if it is set to a different
    value or the metadata cannot be encoded.
    """
    parts: list[BytesLike] = []
    for meta, body in items:
        length = len(body) if not isinstance(body, memoryview) else body.nbytes
        if not meta.HasField("payload_size"):
            filled = pb.SingleMessageMetadata()
            filled.CopyFrom(meta)
            filled.payload_size = length
            meta = filled
        elif meta.payload_size != length:
            raise LocalProtocolError(
                f"payload_size {meta.payload_size} does not match a {length}-byte payload"
            )
        try:
            encoded = meta.SerializeToString()
        except EncodeError as exc:
            raise LocalProtocolError(
                f"cannot encode SingleMessageMetadata: {exc}"
            ) from exc
        parts.append(U32.pack(len(encoded)))
        parts.append(encoded)
        parts.append(body)
    return b"".join(parts)


# U32 size prefixes of plain records' metadata (at most 2 + 5 + 1 + 10 bytes).
_META_SIZE_PREFIX = [U32.pack(n) for n in range(32)]
# First byte of the varint of a value >= 128, by its low seven bits.
_LOW_SEVEN = [bytes((i | 0x80,)) for i in range(0x80)]


def encode_plain_batch(
    sequence_ids: Sequence[int], payloads: Sequence[BytesLike]
) -> bytes:
    """Serialize messages ``(sequence_ids[i], payloads[i])`` into a batch payload.

    Equal to ``build_batch`` of ``SingleMessageMetadata(payload_size=len(payload),
    sequence_id=sequence_id)`` for each pair: the metadata is written by hand.
    Raises ``LocalProtocolError`` if a sequence id is outside 0..2^64-1 or the two
    sequences differ in length.
    """
    if len(sequence_ids) != len(payloads):
        raise LocalProtocolError(
            f"{len(sequence_ids)} sequence ids for {len(payloads)} payloads"
        )
    if not sequence_ids:
        return b""
    if isinstance(sequence_ids, range):
        # A run's bounds are its ends: no pass over it (min/max would make one).
        ends = (sequence_ids[0], sequence_ids[-1])
        low, high = min(ends), max(ends)
    else:
        low, high = min(sequence_ids), max(sequence_ids)
    if low < 0 or high > UINT64_MAX:
        raise LocalProtocolError("sequence id out of range")
    parts: list[BytesLike] = []
    append = parts.append
    prefix = _META_SIZE_PREFIX
    low_seven = _LOW_SEVEN
    last_size = last_high = -1
    size_field = lead = high_bytes = b""
    for seq, body in zip(sequence_ids, payloads, strict=True):
        size = len(body)
        if size != last_size:  # payloads of one batch are often the same size
            last_size, size_field = size, b"\x18" + varint(size) + b"\x40"
            last_high = -1
        if seq < 0x80:
            meta = size_field + varint(seq)
            append(prefix[len(meta)] + meta)
            append(body)
            continue
        # varint(seq) is its low seven bits (continued) + varint(seq >> 7); the
        # sequence ids of a batch usually run on, so the second part is shared by
        # up to 128 of them and only the first byte is looked up per message.
        high = seq >> 7
        if high != last_high:
            last_high, high_bytes = high, varint(high)
            lead = prefix[len(size_field) + 1 + len(high_bytes)] + size_field
        append(lead + low_seven[seq & 0x7F] + high_bytes)
        append(body)
    return b"".join(parts)


def _plain_record(meta: bytes) -> tuple[int, int]:
    """``(payload_size, start of the sequence id)`` if ``meta`` is exactly
    ``18 <varint> [40 <varint>]`` (the start is ``len(meta)`` without a sequence id),
    else ``(-1, 0)``."""
    n = len(meta)
    if n < 2 or meta[0] != 0x18:
        return -1, 0
    size = 0
    shift = 0
    i = 1
    while True:
        if i >= n or shift > 28:
            return -1, 0
        b = meta[i]
        i += 1
        size |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    if size > _INT32_MAX:
        return -1, 0
    if i == n:
        return size, n
    if meta[i] != 0x40:
        return -1, 0
    i += 1
    if _ends_with_one_varint(meta, i):
        return size, i
    return -1, 0


def _ends_with_one_varint(meta: bytes, start: int) -> bool:
    """Whether ``meta[start:]`` is one well-formed varint of at most ten bytes."""
    length = len(meta) - start
    return (
        0 < length <= 10
        and meta[-1] < 0x80
        and (length == 1 or min(meta[start:-1]) >= 0x80)
    )


def split_batch(
    payload: bytes, count: int
) -> list[tuple[pb.SingleMessageMetadata | None, bytes]]:
    """Like ``parse_batch``, but a record whose metadata holds only ``payload_size``
    and ``sequence_id`` comes back with ``None`` instead of a parsed message.

    Raises the same ``RemoteProtocolError`` cases as ``parse_batch``.
    """
    if count < 0:
        raise RemoteProtocolError(f"negative batch size {count}")
    data = bytes(payload)
    if _batchsplit is not None:
        records = _batchsplit.split_plain(data, count)
        if records is not None:  # every record plain and well-formed
            return cast("list[tuple[pb.SingleMessageMetadata | None, bytes]]", records)
    size = len(data)
    pos = 0
    out: list[tuple[pb.SingleMessageMetadata | None, bytes]] = []
    append = out.append
    unpack = U32.unpack_from
    # "18 <payload_size> 40" of the last plain record with a sequence id: the
    # records of a batch mostly share it, so a record that starts with it needs only
    # its sequence id checked.
    prefix = b""
    prefix_size = -1
    for index in range(count):
        if size - pos < 4:
            raise RemoteProtocolError(
                f"batch truncated before message {index} of {count}"
            )
        meta_start = pos + 4
        meta_end = meta_start + unpack(data, pos)[0]
        if meta_end > size:
            raise RemoteProtocolError(
                f"batch message {index}: metadata overruns the payload"
            )
        raw = data[meta_start:meta_end]
        if prefix and raw.startswith(prefix) and _ends_with_one_varint(raw, len(prefix)):
            body_size = prefix_size
        else:
            body_size, seq_start = _plain_record(raw)
            if body_size >= 0 and seq_start < len(raw):
                prefix, prefix_size = raw[:seq_start], body_size
        meta: pb.SingleMessageMetadata | None = None
        if body_size < 0:
            meta = parse_message(
                pb.SingleMessageMetadata, raw, f"batch message {index} metadata"
            )
            body_size = meta.payload_size
            if body_size < 0:
                raise RemoteProtocolError(
                    f"batch message {index}: negative payload_size"
                )
        body_end = meta_end + body_size
        if body_end > size:
            raise RemoteProtocolError(
                f"batch message {index}: payload overruns the batch"
            )
        append((meta, data[meta_end:body_end]))
        pos = body_end
    if pos != size:
        raise RemoteProtocolError(
            f"{size - pos} stray bytes after {count} batch messages"
        )
    return out
