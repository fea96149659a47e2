"""A consumer's chunked-message reassembly, with its expiry timer and what it drops.

``ChunkAssembly`` (pure) decides; this shell applies its decisions on the event loop:
chunks of dropped messages are acknowledged or tracked for redelivery through the
callbacks the consumer passes in, and a timer drops incomplete messages once they
expire even when no further chunk arrives to notice it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from quasar.client.chunk_assembly import AssembledMessage, ChunkAssembly, ChunkOutcome
from quasar.client.message_id import MessageId
from quasar.client.options import ConsumerOptions
from quasar.clock import Clock
from quasar.protocol import pb

__all__ = ["ChunkReceiver"]


class ChunkReceiver:
    """Reassembles one consumer's chunked messages.

    ``acknowledge(mid)``: acknowledge one chunk individually; ``track(mid)``: leave a
    chunk unacknowledged, to be redelivered (the consumer's unacked-message tracker).
    """

    def __init__(
        self,
        options: ConsumerOptions,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
        acknowledge: Callable[[MessageId], None],
        track: Callable[[MessageId], None],
    ) -> None:
        self.assembly = ChunkAssembly(
            options.max_pending_chunked_message,
            options.auto_ack_oldest_chunked_message_on_queue_full,
            options.expire_time_of_incomplete_chunked_message_ms,
        )
        self._clock = clock
        self._loop = loop
        self._acknowledge = acknowledge
        self._track = track
        self._timer: asyncio.TimerHandle | None = None

    def on_chunk(
        self, md: pb.MessageMetadata, chunk: bytes, mid: MessageId
    ) -> AssembledMessage | None:
        """Take one chunk; returns the message it completed, if any."""
        out = self.assembly.add(md, chunk, mid, self._clock.wall_ms())
        self._settle(out)
        self._arm_timer()
        return out.message

    def _settle(self, out: ChunkOutcome) -> None:
        for mid in out.to_ack:
            self._acknowledge(mid)
        for mid in out.to_redeliver:
            self._track(mid)

    def _arm_timer(self) -> None:
        if self._timer is not None:
            return
        at = self.assembly.next_expiry_ms()
        if at is None:
            return
        delay_s = max(0.0, at - self._clock.wall_ms()) / 1000.0
        self._timer = self._loop.call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._settle(self.assembly.expire(self._clock.wall_ms()))
        self._arm_timer()

    def clear(self) -> None:
        """Forget incomplete messages: the broker delivers their chunks again (after
        a reconnect, a seek or a redelivery of everything unacknowledged)."""
        self.assembly.clear()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.assembly.clear()
