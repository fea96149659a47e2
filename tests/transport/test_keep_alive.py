"""The keep-alive timer both connections use, on a virtual scheduler: every (handshake,
heard, hearing) case of a tick, and the PING / PONG frames it sends."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from quasar.protocol import FrameDecoder, encode_command, pb
from quasar.transport.keep_alive import PING_FRAME, PONG_FRAME, KeepAlive, Silence

T = pb.BaseCommand


class _Timer:
    def __init__(self, delay: float, callback: Callable[[], object]) -> None:
        self.delay = delay
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _Scheduler:
    """Holds timers until the test fires them."""

    def __init__(self) -> None:
        self.timers: list[_Timer] = []

    def call_later(self, delay: float, callback: Callable[[], object]) -> _Timer:
        timer = _Timer(delay, callback)
        self.timers.append(timer)
        return timer

    def pending(self) -> list[_Timer]:
        return [t for t in self.timers if not t.cancelled]

    def fire(self) -> None:
        """Run the one pending timer (one interval passes)."""
        (timer,) = self.pending()
        self.timers.remove(timer)
        timer.callback()


class _Owner:
    def __init__(self, hearing: bool = True) -> None:
        self.sent: list[bytes] = []
        self.expired: list[Silence] = []
        self.hearing = hearing


def _keep_alive(
    owner: _Owner, interval_s: float = 30.0, handshake_done: bool = True
) -> tuple[KeepAlive, _Scheduler]:
    scheduler = _Scheduler()
    keep_alive = KeepAlive(
        interval_s,
        scheduler,
        owner.sent.append,
        owner.expired.append,
        hearing=lambda: owner.hearing,
        handshake_done=handshake_done,
    )
    return keep_alive, scheduler


def test_a_peer_that_answers_gets_a_ping_every_interval() -> None:
    owner = _Owner()
    keep_alive, scheduler = _keep_alive(owner)
    keep_alive.start()
    assert [t.delay for t in scheduler.pending()] == [30.0]
    for _ in range(3):
        scheduler.fire()
        assert not keep_alive.heard  # the PING is out; an answer is awaited
        keep_alive.heard = True  # the peer answered
    assert owner.sent == [PING_FRAME] * 3
    assert owner.expired == []
    assert keep_alive.running


def test_a_silent_peer_expires_on_the_tick_after_the_ping() -> None:
    owner = _Owner()
    keep_alive, scheduler = _keep_alive(owner)
    keep_alive.start()
    scheduler.fire()  # heard since start: PING
    scheduler.fire()  # nothing since the PING
    assert owner.sent == [PING_FRAME]
    assert owner.expired == [Silence.NO_ANSWER]
    assert not keep_alive.running


def test_silence_while_not_reading_is_not_held_against_the_peer() -> None:
    owner = _Owner()
    keep_alive, scheduler = _keep_alive(owner)
    keep_alive.start()
    scheduler.fire()
    owner.hearing = False  # back-pressure: the owner stopped reading
    scheduler.fire()
    assert owner.expired == [] and owner.sent == [PING_FRAME] * 2
    owner.hearing = True
    scheduler.fire()  # reading again and still nothing: gone
    assert owner.expired == [Silence.NO_ANSWER]


@pytest.mark.parametrize("heard", [True, False])
def test_no_handshake_by_the_first_tick_expires(heard: bool) -> None:
    owner = _Owner()
    keep_alive, scheduler = _keep_alive(owner, handshake_done=False)
    keep_alive.heard = heard
    keep_alive.start()
    scheduler.fire()
    assert owner.expired == [Silence.NO_HANDSHAKE] and owner.sent == []


@pytest.mark.parametrize("interval_s", [0.0, -1.0])
def test_a_non_positive_interval_disables_the_timer(interval_s: float) -> None:
    owner = _Owner()
    keep_alive, scheduler = _keep_alive(owner, interval_s=interval_s)
    keep_alive.start()
    assert scheduler.timers == [] and not keep_alive.running


def test_stop_cancels_and_start_twice_arms_once() -> None:
    owner = _Owner()
    keep_alive, scheduler = _keep_alive(owner)
    keep_alive.start()
    keep_alive.start()
    assert len(scheduler.pending()) == 1
    keep_alive.stop()
    assert scheduler.pending() == [] and not keep_alive.running
    keep_alive.stop()  # idempotent


def test_a_nan_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        _keep_alive(_Owner(), interval_s=math.nan)


def test_ping_and_pong_frames_are_the_commands() -> None:
    decoder = FrameDecoder(1024)
    ping, pong = decoder.feed(PING_FRAME + PONG_FRAME)
    assert ping.command.type == T.PING and pong.command.type == T.PONG
    # The same bytes the command builders of both ends produce.
    built = T(type=T.PING)
    built.ping.SetInParent()
    assert PING_FRAME == encode_command(built)
