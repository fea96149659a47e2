"""The fault proxy itself, in front of a loopback echo server."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from quasar.testing.fault_proxy import Direction, FaultProxy, wait_until


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except ConnectionResetError:
            pass  # the proxy's reset() reached this side: what those tests do


@pytest.fixture(scope="module")
def echo() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(echo: int) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", echo) as p:
        yield p


def _connect(proxy: FaultProxy) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=5)
    return s


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        data = s.recv(n - len(out))
        if not data:
            break
        out += data
    return out


def test_forwards_both_ways_in_order(proxy: FaultProxy) -> None:
    with _connect(proxy) as s:
        payload = bytes(range(256)) * 1000  # several chunks
        s.sendall(payload)
        assert _recv_exactly(s, len(payload)) == payload
    assert proxy.accepted == 1


def test_delay_adds_latency_and_keeps_order(proxy: FaultProxy) -> None:
    proxy.delay(0.2)
    with _connect(proxy) as s:
        started = time.monotonic()
        for i in range(5):
            s.sendall(bytes([i]) * 10)
        assert _recv_exactly(s, 50) == b"".join(bytes([i]) * 10 for i in range(5))
        # Two legs through the proxy, each delayed.
        assert time.monotonic() - started >= 0.4


def test_drop_discards_silently(proxy: FaultProxy) -> None:
    with _connect(proxy) as s:
        proxy.wait_for_open(1)
        proxy.connections()[0].drop()
        s.sendall(b"lost")
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):
            s.recv(10)
        assert not proxy.connections()[0].is_closed  # still open: nothing was said


def test_blackhole_holds_then_delivers(proxy: FaultProxy) -> None:
    with _connect(proxy) as s:
        proxy.wait_for_open(1)
        proxy.blackhole(0.5)
        started = time.monotonic()
        s.sendall(b"held")
        assert _recv_exactly(s, 4) == b"held"
        assert time.monotonic() - started >= 0.45


def test_cut_forwards_a_prefix_then_closes(proxy: FaultProxy) -> None:
    with _connect(proxy) as s:
        proxy.wait_for_open(1)
        proxy.connections()[0].cut(Direction.TO_CLIENT, 3)
        s.sendall(b"abcdefgh")
        assert _recv_exactly(s, 8) == b"abc"  # then EOF
        wait_until(lambda: not proxy.connections(), 5, "cut connection forgotten")


def test_reset_sends_rst(proxy: FaultProxy) -> None:
    with _connect(proxy) as s:
        proxy.wait_for_open(1)
        assert proxy.reset_all() == 1
        s.settimeout(5)
        with pytest.raises(ConnectionResetError):
            s.recv(10)
            s.sendall(b"x")  # a FIN would allow this; after an RST the recv raises
            s.recv(10)


def test_pause_accepting_holds_new_connections(proxy: FaultProxy) -> None:
    proxy.pause_accepting()
    with _connect(proxy) as s:  # the kernel completes the handshake (backlog)
        s.sendall(b"wait")
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):
            s.recv(10)
        assert proxy.accepted == 0
        proxy.resume_accepting()
        s.settimeout(5)
        assert _recv_exactly(s, 4) == b"wait"
    assert proxy.accepted == 1


def test_connections_beyond_the_bound_are_refused(echo: int) -> None:
    with FaultProxy("127.0.0.1", echo, connections_max=1) as p:
        with _connect(p) as first:
            p.wait_for_open(1)
            with _connect(p) as second:
                second.settimeout(5)
                assert second.recv(10) == b""  # closed at once
            first.sendall(b"ok")
            assert _recv_exactly(first, 2) == b"ok"
        assert p.refused == 1


def test_listens_on_loopback_only(echo: int) -> None:
    with pytest.raises(ValueError, match="loopback"):
        FaultProxy("127.0.0.1", echo, listen_host="0.0.0.0")


def test_stop_closes_connections(echo: int) -> None:
    p = FaultProxy("127.0.0.1", echo).start()
    s = _connect(p)
    p.wait_for_open(1)
    p.stop()
    s.settimeout(5)
    assert s.recv(10) == b""
    s.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", p.listen_port), timeout=1).close()


def test_cut_aims_at_the_chunk_a_predicate_picks(proxy: FaultProxy) -> None:
    with _connect(proxy) as s:
        proxy.wait_for_open(1)
        proxy.cut_all(Direction.TO_CLIENT, 0, rst=True, when=lambda chunk: b"!" in chunk)
        s.sendall(b"abc")
        assert _recv_exactly(s, 3) == b"abc"  # not picked: forwarded
        s.sendall(b"x!")
        s.settimeout(5)
        with pytest.raises(ConnectionResetError):
            s.recv(10)
