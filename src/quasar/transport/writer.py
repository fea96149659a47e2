"""Coalesced frame writes, used by the broker's and the client's connections alike.

A syscall per frame costs more than building the frame, so a connection hands its
frames to a ``FrameWriter``, which passes everything written during one loop
iteration to the transport at once, at the end of the iteration (``call_soon``).

The writer's own buffer is bounded: once ``eager_flush_bytes`` (``EAGER_FLUSH_BYTES``,
32 KiB) are buffered they leave at once, in order. A process that builds batch after
batch in one iteration (a dispatcher serving many consumers, a producer per worker
flushed by one timer) would otherwise hold them all back and hand the peer one late
burst; past this size a write is cheap next to the work it lets the peer start. So
the writer never holds more than that plus one frame.

What the kernel does not take yet queues in the transport. Frames are never held
back for that: request/response traffic must flow even while a consumer's
deliveries fill the socket (dispatch is bounded by permits, not by the socket).

How the buffer leaves: a single buffered item is written as it is; whole frames only
(``write``) are joined into one bytes object, which for many small frames (receipts,
acks, flow permits) costs less than gathering many buffers; when some frame came in
pieces (``write_parts``: a SEND's head and its batch payload), runs of small pieces
are joined and large pieces stay separate buffers, all handed to one ``writelines``
(one ``writev`` with uvloop), so a batch is not copied once more.

Once closed, the writer drops what it is given: a frame for a peer that is gone has
nowhere to go, and its owner already told everyone waiting on that peer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from quasar.protocol import EAGER_FLUSH_BYTES

__all__ = ["GATHER_PIECE_BYTES_MIN", "Buffer", "FrameWriter", "gather"]

Buffer = bytes | bytearray | memoryview

# A piece at least this large is handed to the transport as it is; its smaller
# neighbours are joined into one buffer.
GATHER_PIECE_BYTES_MIN = 16 * 1024


def gather(buf: Sequence[Buffer]) -> list[Buffer]:
    """``buf`` with each run of pieces smaller than ``GATHER_PIECE_BYTES_MIN`` joined
    into one."""
    out: list[Buffer] = []
    run: list[Buffer] = []
    for piece in buf:
        if len(piece) < GATHER_PIECE_BYTES_MIN:
            run.append(piece)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else b"".join(run))
            run = []
        out.append(piece)
    if run:
        out.append(run[0] if len(run) == 1 else b"".join(run))
    return out


class FrameWriter:
    """Buffers a connection's outgoing frames and writes them once per loop iteration.

    Life: created with the loop, ``attach``-ed to the transport when the connection is
    made, then ``close``-d (buffered frames leave first) before the owner closes the
    transport, or ``discard``-ed when the transport is lost.
    """

    __slots__ = (
        "_buf",
        "_buf_bytes",
        "_eager_flush_bytes",
        "_flush_scheduled",
        "_loop",
        "_open",
        "_pieces",
        "_transport",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        eager_flush_bytes: int = EAGER_FLUSH_BYTES,
    ) -> None:
        """Raises:
        ValueError: ``eager_flush_bytes`` is not positive.
        """
        if eager_flush_bytes <= 0:
            raise ValueError(f"eager_flush_bytes must be positive, got {eager_flush_bytes}")
        self._loop = loop
        self._eager_flush_bytes = eager_flush_bytes
        self._transport: asyncio.WriteTransport | None = None
        self._buf: list[Buffer] = []
        self._buf_bytes = 0
        # Some frame in _buf came in pieces: large pieces are kept apart on the way out.
        self._pieces = False
        self._flush_scheduled = False
        self._open = False  # attached and not closed: frames are accepted

    # -- life ------------------------------------------------------------------------
    def attach(self, transport: asyncio.WriteTransport) -> None:
        """Start writing to ``transport`` (the connection was made)."""
        self._transport = transport
        self._open = True

    @property
    def is_open(self) -> bool:
        """Whether frames are accepted: attached and not closed."""
        return self._open

    def close(self) -> None:
        """Write what is buffered now, then accept nothing more. The owner closes the
        transport next, which sends what it still queues before the FIN."""
        if self._open:
            self.flush()
            self._open = False

    def discard(self) -> None:
        """The transport is gone: drop what is buffered and accept nothing more."""
        self._open = False
        self._buf.clear()
        self._buf_bytes = 0
        self._pieces = False

    # -- writing (the hot path: no allocation but the buffer's, no await) --------------
    def write(self, frame: Buffer) -> None:
        """Queue one whole frame; it leaves at the end of this loop iteration, or at
        once if ``eager_flush_bytes`` are buffered with it. Dropped when not open."""
        if not self._open:
            return
        self._buf.append(frame)
        self._buf_bytes += len(frame)
        if self._buf_bytes >= self._eager_flush_bytes:
            self.flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def write_parts(self, parts: Sequence[Buffer]) -> None:
        """``write`` of one frame given as consecutive pieces (e.g. a SEND's head and
        its batch payload), which are handed to the transport without being copied
        into one buffer."""
        if not self._open:
            return
        self._buf.extend(parts)
        if len(parts) > 1:
            self._pieces = True
        self._buf_bytes += sum(map(len, parts))
        if self._buf_bytes >= self._eager_flush_bytes:
            self.flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        # An eager flush in between leaves this callback pending, so frames written
        # after it in the same iteration leave here without scheduling another.
        self._flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        """Hand everything buffered to the transport now."""
        buf = self._buf
        if not buf:
            return
        self._buf_bytes = 0
        pieces, self._pieces = self._pieces, False
        transport = self._transport
        if not self._open or transport is None:
            buf.clear()
            return
        # The buffer is emptied before the transport sees the data: a transport calls
        # back into its protocol from inside write() (pause_writing, an error), and a
        # frame written from such a callback must not be cleared with this batch.
        if len(buf) == 1:
            data = buf[0]
            buf.clear()
            transport.write(data)
        elif not pieces:
            data = b"".join(buf)
            buf.clear()
            transport.write(data)
        else:
            gathered = gather(buf)
            buf.clear()
            transport.writelines(gathered)
