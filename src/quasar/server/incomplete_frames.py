"""How long, and with how many bytes, one connection may hold a frame that has started
but not ended.

A frame's first bytes tell its size; the decoder keeps what arrived until the rest
does. A client that sends most of a large frame and then a byte now and then would
have the broker hold that buffer for ever, and many such clients would hold many. So
each connection has an ``IncompleteFrameWatch``, told after every read how many bytes
its decoder holds:

* the frame must be complete within ``incompleteFrameTimeoutSeconds`` of its first
  bytes, or the connection is closed. Time does not count while the broker itself has
  paused reading (back-pressure, a fair turn): the frame could not progress then;
* the bytes count towards the broker-wide budget of ``ConnectionLimits``; a read that
  takes the connection's incomplete frame past the free allowance while the total is
  over the budget closes the connection.

One timer per connection, armed when a frame starts and re-armed only when it fires
and finds a newer frame, so a busy connection, whose reads often end inside a frame,
does not pay for a timer per read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from .limits import ConnectionLimits

__all__ = ["IncompleteFrameWatch"]

log = logging.getLogger(__name__)


class IncompleteFrameWatch:
    """Times and accounts one connection's incomplete frame."""

    def __init__(
        self,
        limits: ConnectionLimits,
        loop: asyncio.AbstractEventLoop,
        timeout_s: float,
        reading: Callable[[], bool],
        close: Callable[[], None],
        remote: Callable[[], str],
    ) -> None:
        """``reading``: whether the connection reads now; ``close``: closes it;
        ``remote``: the peer's address, for the log."""
        self._limits = limits
        self._loop = loop
        self._timeout_s = timeout_s
        self._reading = reading
        self._close = close
        self._remote = remote
        self.held_bytes = 0
        self._since: float | None = None  # when the frame now held started
        self._timer: asyncio.TimerHandle | None = None

    def after_read(self, held: int, completed: bool) -> bool:
        """The decoder holds ``held`` bytes after a read (``completed``: the read ended
        some frame, so what is held now belongs to a new one). Returns False when the
        connection was closed for the broker-wide budget."""
        before = self.held_bytes
        self.held_bytes = held
        limits = self._limits
        if not limits.incomplete_frame_held(before, held):
            log.warning(
                "closing connection from %s: its incomplete frame holds %d bytes while "
                "all connections hold %d, over maxIncompleteFramesSizeInMB",
                self._remote(), held, limits.incomplete_frames_bytes,
            )
            limits.refused("maxIncompleteFramesSizeInMB")
            self.release()
            self._close()
            return False
        if not held:
            self._since = None
        elif completed or self._since is None:
            self._since = self._loop.time()
            if self._timer is None:
                self._timer = self._loop.call_later(self._timeout_s, self._check)
        return True

    def release(self) -> None:
        """The connection closes: its bytes leave the budget, the timer stops (a
        second call does nothing)."""
        self._limits.incomplete_frame_held(self.held_bytes, 0)
        self.held_bytes = 0
        self._since = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        self._timer = None
        since = self._since
        if since is None:
            return
        if not self._reading():
            # The broker paused reading: the frame cannot progress, through no fault
            # of the client's. Its time starts again from now.
            since = self._since = self._loop.time()
        left = since + self._timeout_s - self._loop.time()
        if left > 0:
            self._timer = self._loop.call_later(left, self._check)
            return
        log.warning(
            "closing connection from %s: a frame started %g s ago is still incomplete "
            "(%d bytes received; incompleteFrameTimeoutSeconds)",
            self._remote(), self._timeout_s, self.held_bytes,
        )
        self._limits.refused("incompleteFrameTimeoutSeconds")
        self.release()
        self._close()
