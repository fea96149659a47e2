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
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.message import EncodeError

from quasar.errors import LocalProtocolError, RemoteProtocolError

from ._generated import pulsar_api_pb2 as pb
from ._wire import U32, BytesLike, parse_message

__all__ = ["build_batch", "parse_batch"]


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
