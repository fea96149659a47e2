"""Pulsar's keep-alive (``keepAliveIntervalSeconds``), the same timer on both ends.

Every interval a connection sends a PING. If nothing that proves the peer alive
arrived since the previous PING, the peer is gone (a half-open TCP connection, a frozen
process) and the owner closes the connection: the broker then frees the client's
producers and hands its consumers' unacknowledged messages to others, the client fails
its requests and reconnects.

What counts as proof is the owner's call, because the two ends differ on purpose. The
broker counts any bytes from the client, its PINGs included, as Pulsar's broker does.
The client counts every frame but the broker's PINGs: a broker that still sends its
own PINGs but no longer answers ours is not serving this connection.

A connection whose handshake is not done by the first tick is closed too (on the
broker: a peer that opened a socket and never sent CONNECT). While the owner does not
read from the socket (publish back-pressure), an answer could not be seen, so silence
is not held against the peer then.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from typing import Protocol

from quasar.protocol import encode_command, pb

__all__ = ["PING_FRAME", "PONG_FRAME", "KeepAlive", "Scheduler", "Silence", "TimerHandle"]

# Both frames are constant, so each is encoded once.
PING_FRAME = encode_command(pb.BaseCommand(type=pb.BaseCommand.PING, ping=pb.CommandPing()))
PONG_FRAME = encode_command(pb.BaseCommand(type=pb.BaseCommand.PONG, pong=pb.CommandPong()))


class Silence(enum.Enum):
    """Why a peer is considered gone."""

    NO_HANDSHAKE = "no handshake within the keep-alive interval"
    NO_ANSWER = "no answer to the keep-alive PING"


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """Where the timer runs: the event loop, or a virtual clock in tests."""

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle: ...


def _always() -> bool:
    return True


class KeepAlive:
    """The keep-alive timer of one connection.

    The owner sets ``heard`` whenever the peer proves it is alive and
    ``handshake_done`` once the handshake completed, calls ``start`` when the timer
    should run and ``stop`` when the connection closes. ``expire`` is called at most
    once, on the tick that finds the peer gone; the timer is stopped by then.
    """

    __slots__ = (
        "_expire",
        "_hearing",
        "_interval_s",
        "_scheduler",
        "_timer",
        "_write",
        "handshake_done",
        "heard",
    )

    def __init__(
        self,
        interval_s: float,
        scheduler: Scheduler,
        write: Callable[[bytes], object],
        expire: Callable[[Silence], object],
        *,
        hearing: Callable[[], bool] = _always,
        handshake_done: bool = False,
    ) -> None:
        """``interval_s`` <= 0 disables the timer. ``write`` sends the PING frame;
        ``hearing`` says whether the owner reads from the socket now.

        Raises:
            ValueError: ``interval_s`` is NaN.
        """
        if math.isnan(interval_s):
            raise ValueError("keep-alive interval must be a number of seconds, got NaN")
        self._interval_s = interval_s
        self._scheduler = scheduler
        self._write = write
        self._expire = expire
        self._hearing = hearing
        self._timer: TimerHandle | None = None
        self.handshake_done = handshake_done
        self.heard = True

    @property
    def interval_s(self) -> float:
        return self._interval_s

    @property
    def running(self) -> bool:
        return self._timer is not None

    def start(self) -> None:
        """Tick every interval from now on (no-op when disabled or running)."""
        if self._interval_s > 0 and self._timer is None:
            self._timer = self._scheduler.call_later(self._interval_s, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        self._timer = None
        if not self.handshake_done:
            self._expire(Silence.NO_HANDSHAKE)
            return
        if not self.heard and self._hearing():
            self._expire(Silence.NO_ANSWER)
            return
        self.heard = False
        self._write(PING_FRAME)
        self.start()
