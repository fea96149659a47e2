"""Reassembling chunked messages on the consumer side (pure: no I/O, clock passed in).

A producer splits a message larger than the broker's ``max_message_size`` into
chunks after compression; every chunk is its own entry whose metadata carries the
message's ``uuid`` (``"<producerName>-<sequenceId>"``), ``chunk_id`` (0..n-1),
``num_chunks_from_msg`` (n) and ``total_chunk_msg_size`` (the compressed size).
Chunks of one message arrive in order, but chunks of different messages (from other
producers) may be interleaved between them.

The assembly keeps one context per incomplete message, bounded as in Pulsar's
client:

* at most ``max_pending_chunked_message`` incomplete messages (0: no bound); a new
  one beyond that evicts the oldest, whose chunks are acknowledged when
  ``auto_ack_oldest_chunked_message_on_queue_full`` is set and otherwise left
  unacknowledged for redelivery;
* an incomplete message older than ``expire_time_of_incomplete_chunked_message_ms``
  (0: never) is dropped and its chunks acknowledged: its remaining chunks are not
  coming (the producer failed or a resend left a partial copy);
* a chunk that continues no known message (its first chunk was dropped, or a gap)
  is acknowledged once it is older than that expiry by its publish time, else left
  unacknowledged, as the official clients do;
* a chunk received again (the broker stored a resend) is kept with its message, so
  acknowledging the message acknowledges it too, and its bytes are not used twice.

The bytes held per message never exceed its ``total_chunk_msg_size``: a chunk that
would overflow it drops the message (its metadata lied).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from quasar.client.message_id import ChunkMessageId, MessageId
from quasar.protocol import pb

__all__ = ["AssembledMessage", "ChunkAssembly", "ChunkOutcome"]


@dataclass
class _Pending:
    """One chunked message whose chunks are still arriving."""

    num_chunks: int
    total_size: int
    received_ms: float
    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    # Every chunk received for the message, resent copies included (acked together).
    ids: list[MessageId] = field(default_factory=list)


@dataclass
class AssembledMessage:
    """A complete chunked message: the last chunk's metadata, the joined (still
    compressed) payload and the message's id."""

    metadata: pb.MessageMetadata
    payload: bytes
    message_id: ChunkMessageId


@dataclass
class ChunkOutcome:
    """What one chunk led to: the message it completed (if any) and the chunk ids of
    dropped messages to acknowledge or to leave for redelivery."""

    message: AssembledMessage | None = None
    to_ack: list[MessageId] = field(default_factory=list)
    to_redeliver: list[MessageId] = field(default_factory=list)


class ChunkAssembly:
    """The incomplete chunked messages of one consumer, keyed by ``uuid``."""

    def __init__(
        self,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        expire_time_of_incomplete_chunked_message_ms: int = 60000,
    ) -> None:
        self._max_pending = max_pending_chunked_message
        self._auto_ack_oldest = auto_ack_oldest_chunked_message_on_queue_full
        self._expire_ms = expire_time_of_incomplete_chunked_message_ms
        self._pending: OrderedDict[str, _Pending] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pending)

    def add(
        self, md: pb.MessageMetadata, chunk: bytes, mid: MessageId, now_ms: float
    ) -> ChunkOutcome:
        """Take one chunk (``md``: its metadata, ``chunk``: its payload bytes,
        ``now_ms``: the wall clock) and say what it led to."""
        out = self.expire(now_ms)
        uuid, chunk_id, num_chunks = md.uuid, md.chunk_id, md.num_chunks_from_msg
        pending = self._pending.get(uuid)
        if chunk_id == 0:
            if pending is not None:
                # Start over with this copy. The broker redelivering the same chunks
                # holds nothing new; a producer's resend left an earlier, partial
                # copy, whose chunks are acknowledged.
                del self._pending[uuid]
                if pending.ids[0].entry_key != mid.entry_key:
                    out.to_ack.extend(pending.ids)
            if 0 < self._max_pending <= len(self._pending):
                _, oldest = self._pending.popitem(last=False)
                dropped = out.to_ack if self._auto_ack_oldest else out.to_redeliver
                dropped.extend(oldest.ids)
            pending = _Pending(num_chunks, md.total_chunk_msg_size, now_ms)
            self._pending[uuid] = pending
        elif pending is None:
            self._stray(md, mid, now_ms, out)
            return out
        elif chunk_id < len(pending.parts):
            pending.ids.append(mid)  # a resent copy of a chunk already held
            return out
        if chunk_id != len(pending.parts) or num_chunks != pending.num_chunks:
            # A gap: the chunks in between are lost, so the message cannot complete.
            del self._pending[uuid]
            out.to_redeliver.extend(pending.ids)
            self._stray(md, mid, now_ms, out)
            return out
        pending.size += len(chunk)
        pending.ids.append(mid)
        if pending.size > pending.total_size:
            del self._pending[uuid]
            out.to_ack.extend(pending.ids)
            return out
        pending.parts.append(chunk)
        if len(pending.parts) == num_chunks:
            del self._pending[uuid]
            ids = pending.ids
            keys = tuple(dict.fromkeys(m.entry_key for m in ids))
            out.message = AssembledMessage(
                md, b"".join(pending.parts), ChunkMessageId(ids[0], mid, keys)
            )
        return out

    def _stray(
        self, md: pb.MessageMetadata, mid: MessageId, now_ms: float, out: ChunkOutcome
    ) -> None:
        """A chunk that continues no message held here."""
        expired = self._expire_ms > 0 and now_ms > md.publish_time + self._expire_ms
        (out.to_ack if expired else out.to_redeliver).append(mid)

    def expire(self, now_ms: float) -> ChunkOutcome:
        """Drop the incomplete messages older than the expiry; their chunks are to be
        acknowledged."""
        out = ChunkOutcome()
        if self._expire_ms <= 0:
            return out
        while self._pending:
            uuid, oldest = next(iter(self._pending.items()))
            if now_ms - oldest.received_ms < self._expire_ms:
                break
            del self._pending[uuid]
            out.to_ack.extend(oldest.ids)
        return out

    def next_expiry_ms(self) -> float | None:
        """When the oldest incomplete message expires (None: nothing to expire)."""
        if self._expire_ms <= 0 or not self._pending:
            return None
        return next(iter(self._pending.values())).received_ms + self._expire_ms

    def clear(self) -> list[MessageId]:
        """Forget every incomplete message (the broker redelivers what is unacked,
        e.g. after a reconnect or a seek); returns the chunk ids that were held."""
        ids = [m for pending in self._pending.values() for m in pending.ids]
        self._pending.clear()
        return ids
