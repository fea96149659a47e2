"""Splitting a message into chunks on the producer side, as Pulsar's clients do.

A producer with ``chunking_enabled`` sends a message whose compressed payload and
metadata exceed the broker's ``max_message_size`` (from CONNECTED) as several SENDs:

* each chunk carries at most ``max_message_size - metadata size`` payload bytes, the
  metadata measured before the chunk fields are added (so a chunk's entry exceeds the
  limit by those fields; brokers bound chunks by their frame limit);
* every chunk's metadata is the message's (properties, keys, compression, the
  uncompressed size of the whole message) plus ``uuid`` =
  ``"<producerName>-<sequenceId>"``, ``chunk_id`` (0..n-1), ``num_chunks_from_msg``
  (n) and ``total_chunk_msg_size`` (the compressed size);
* all chunks share the message's sequence id; each SEND has ``is_chunk`` set and gets
  its own receipt, and the message's send completes with the last chunk's receipt,
  its id a ``ChunkMessageId`` of the first and the last chunk.
"""

from __future__ import annotations

from quasar.client.exceptions import MessageTooBig
from quasar.client.message_id import ChunkMessageId, MessageId
from quasar.client.receipts import SendCallback
from quasar.protocol import pb

__all__ = ["ChunkedSend", "chunk_metadata", "split_payload"]


def split_payload(payload: bytes, metadata_size: int, max_message_size: int) -> list[bytes]:
    """The chunks of ``payload`` (one piece when it fits in one message).

    Raises:
        MessageTooBig: the metadata alone leaves no room for payload.
    """
    chunk_size = max_message_size - metadata_size
    if chunk_size <= 0:
        raise MessageTooBig(
            f"metadata of {metadata_size} bytes leaves no room for a chunk within "
            f"{max_message_size}"
        )
    if len(payload) <= chunk_size:
        return [payload]
    view = memoryview(payload)
    return [bytes(view[i : i + chunk_size]) for i in range(0, len(payload), chunk_size)]


def chunk_metadata(
    md: pb.MessageMetadata, uuid: str, chunk_id: int, num_chunks: int, total_size: int
) -> pb.MessageMetadata:
    """A copy of the message's metadata with the fields of chunk ``chunk_id``."""
    chunk = pb.MessageMetadata()
    chunk.CopyFrom(md)
    chunk.uuid = uuid
    chunk.chunk_id = chunk_id
    chunk.num_chunks_from_msg = num_chunks
    chunk.total_chunk_msg_size = total_size
    return chunk


class ChunkedSend:
    """Completes one chunked message's send from its chunks' outcomes: the first
    failure fails it, the last chunk's receipt completes it."""

    def __init__(self, num_chunks: int, callback: SendCallback) -> None:
        self._last = num_chunks - 1
        self._callback = callback
        self._first: MessageId | None = None
        self._done = False

    def part(self, chunk_id: int) -> SendCallback:
        """The receipt callback of chunk ``chunk_id``."""

        def completed(error: BaseException | None, mid: MessageId | None) -> None:
            if self._done:
                return
            if error is not None or mid is None:
                self._done = True
                self._callback(error, None)
                return
            if chunk_id == 0:
                self._first = mid
            if chunk_id == self._last:
                self._done = True
                self._callback(None, ChunkMessageId(self._first or mid, mid))

        return completed
