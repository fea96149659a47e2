"""The fake broker's own scaffolding: waiting for its state from another thread, and
keeping what it failed on."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from quasar.protocol import encode_command, pb

from .threaded import ThreadedFakeBroker

T = pb.BaseCommand


@pytest.fixture
def fake() -> Iterator[ThreadedFakeBroker]:
    with ThreadedFakeBroker() as f:
        yield f


def _connect(fake: ThreadedFakeBroker) -> socket.socket:
    host, port = fake.url.removeprefix("pulsar://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def test_wait_for_wakes_on_a_change(fake: ThreadedFakeBroker) -> None:
    with _connect(fake) as sock:
        assert fake.wait_for(lambda: len(fake.broker.connections) == 1)
        sock.sendall(encode_command(T(type=T.PING, ping=pb.CommandPing())))
        assert fake.wait_for(lambda: bool(fake.broker.commands(T.PING)))
        assert sock.recv(64)  # the PONG
    assert fake.wait_for(lambda: not fake.broker.connections)


def test_wait_for_answers_false_on_timeout(fake: ThreadedFakeBroker) -> None:
    assert fake.wait_for(lambda: False, timeout_s=0.01) is False


def test_what_the_fake_fails_on_is_kept(fake: ThreadedFakeBroker) -> None:
    # A FLOW for a consumer never subscribed is a client bug the fake cannot serve.
    flow = T(type=T.FLOW, flow=pb.CommandFlow(consumer_id=9, messagePermits=1))
    with _connect(fake) as sock:
        sock.sendall(encode_command(flow))
        assert fake.wait_for(lambda: bool(fake.broker.errors))
        assert sock.recv(64) == b""  # and it closed that connection
    [error] = fake.broker.errors
    assert isinstance(error, KeyError)
    [frame] = fake.broker.frames
    assert frame.command == flow
