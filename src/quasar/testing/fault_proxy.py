"""A fault-injecting TCP proxy for tests: clients connect to it, it connects to the
broker, and a test decides what the network does in between.

``FaultProxy`` runs an asyncio loop in a background thread of its own, so blocking
tests and the official client (whose I/O runs in C++ threads) can use it as well as
async ones; every public method is called from the test's thread and returns once the
proxy's loop has applied it.

Each accepted connection gets two pumps, client to broker and broker to client. A pump
is a reader task and a writer task joined by a bounded queue of chunks
(``buffered_chunks_max`` chunks of at most ``chunk_bytes_max`` bytes): a stalled writer
fills the queue, the reader stops reading, and TCP pushes back on the sender, so no
fault makes the proxy's memory grow. Every fault is applied by the writer, at a chunk
boundary, so bytes are never reordered:

* ``delay``: every chunk is written ``seconds`` after it was read (order preserved);
* ``drop``: chunks are read and discarded, silently (both sockets stay open);
* ``blackhole``: nothing is written for ``seconds``, then the held chunks flow again,
  as TCP delivers what it retransmitted across an outage that ended in time;
* ``cut``: the next chunk in one direction is forwarded up to ``n`` bytes, then both
  sockets are closed (a connection lost in the middle of a frame); with ``when``, the
  next chunk ``when(chunk)`` accepts (a test aims at one command: "the answer to the
  commit is lost"); with ``rst``, the close is a reset;
* ``reset``: both sockets are closed with ``SO_LINGER`` 0, so the peers get an RST.

Faults set on the proxy apply to every connection, present and future; faults set on a
``ProxiedConnection`` apply to that one. ``pause_accepting`` stops accepting new
connections (they wait in the listen backlog, as with a hung server) until
``resume_accepting``.

The proxy listens on loopback only: it forwards anything to its target and has no
business being reachable from elsewhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from quasar.testing.proxied_connection import Cut, Direction, Faults, ProxiedConnection

__all__ = ["Direction", "FaultProxy", "ProxiedConnection", "wait_until"]

_T = TypeVar("_T")

CHUNK_BYTES_MAX = 64 * 1024
BUFFERED_CHUNKS_MAX = 16
CONNECTIONS_MAX = 256


class FaultProxy:
    """Forwards ``listen_host:listen_port`` to ``target_host:target_port`` with faults.

    Use as a context manager, or ``start()`` and ``stop()``.
    """

    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        chunk_bytes_max: int = CHUNK_BYTES_MAX,
        buffered_chunks_max: int = BUFFERED_CHUNKS_MAX,
        connections_max: int = CONNECTIONS_MAX,
    ) -> None:
        """Raises:
            ValueError: ``listen_host`` is not a loopback address.
        """
        if not ipaddress.ip_address(listen_host).is_loopback:
            raise ValueError(f"the fault proxy listens on loopback only, not {listen_host}")
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self.listen_port = listen_port
        self.chunk_bytes_max = chunk_bytes_max
        self.buffered_chunks_max = buffered_chunks_max
        self.connections_max = connections_max
        self.faults = Faults()
        self.accepted = 0  # connections accepted so far
        self.refused = 0  # connections closed at once: over connections_max or no target
        self._open: dict[int, ProxiedConnection] = {}
        self._accepting = asyncio.Event()
        self._listener: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._changed: asyncio.Condition | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> FaultProxy:
        """Bind, start the loop thread and begin accepting.

        Raises:
            OSError: the listen address cannot be bound.
        """
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((self.listen_host, self.listen_port))
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        listener.setblocking(False)
        self._listener = listener
        self.listen_port = listener.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="quasar-fault-proxy", daemon=True
        )
        self._thread.start()
        self.run_on_loop(self._begin)
        return self

    def stop(self) -> None:
        """Close every connection and the listener, then end the loop thread."""
        if self._loop is None or self._thread is None:
            return
        self._call_async(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = None
        self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``pulsar://host:port`` of the proxy."""
        return f"pulsar://{self.listen_host}:{self.listen_port}"

    # ------------------------------------------------------------ faults, all connections

    def delay(self, seconds: float) -> None:
        """Write every chunk of every connection ``seconds`` after it was read."""
        self.run_on_loop(setattr, self.faults, "delay_s", seconds)

    def drop(self, dropping: bool = True) -> None:
        """Discard everything on every connection, silently, until ``drop(False)``."""
        self.run_on_loop(setattr, self.faults, "dropping", dropping)

    def blackhole(self, seconds: float) -> None:
        """Forward nothing on any connection (new ones are accepted) for ``seconds``."""
        self.run_on_loop(self._blackhole, seconds)

    def cut_all(
        self,
        direction: Direction,
        after_bytes: int,
        *,
        rst: bool = False,
        when: Callable[[bytes], bool] | None = None,
    ) -> int:
        """Arm a cut (see ``ProxiedConnection.cut``) on every open connection;
        returns how many were armed."""
        return self.run_on_loop(self._cut_all, direction, Cut(after_bytes, rst, when))

    def reset_all(self) -> int:
        """RST every open connection; returns how many were reset."""
        return self.run_on_loop(self._reset_all)

    def disarm_cuts(self) -> int:
        """Withdraw every cut armed and not yet fired, on the proxy and on each open
        connection; returns how many were withdrawn."""
        return self.run_on_loop(self._disarm_cuts)

    def pause_accepting(self) -> None:
        self.run_on_loop(self._accepting.clear)

    def resume_accepting(self) -> None:
        self.run_on_loop(self._accepting.set)

    def clear(self) -> None:
        """End every proxy-wide fault (per-connection faults stay)."""
        self.run_on_loop(self._clear)

    # ------------------------------------------------------------ observing

    def connections(self) -> list[ProxiedConnection]:
        """The open connections, oldest first."""
        return self.run_on_loop(lambda: sorted(self._open.values(), key=lambda c: c.number))

    def wait_for_accepted(self, count: int, timeout_s: float = 10.0) -> None:
        """Wait until ``count`` connections were accepted in total.

        Raises:
            TimeoutError: fewer were accepted within ``timeout_s``.
        """
        self._call_async(self._wait(lambda: self.accepted >= count, timeout_s))

    def wait_for_open(self, count: int, timeout_s: float = 10.0) -> None:
        """Wait until at least ``count`` connections are open.

        Raises:
            TimeoutError: fewer were open within ``timeout_s``.
        """
        self._call_async(self._wait(lambda: len(self._open) >= count, timeout_s))

    # ------------------------------------------------------------ proxy loop

    def _begin(self) -> None:
        self._changed = asyncio.Condition()
        self._accepting.set()
        self._accept_task = asyncio.ensure_future(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._listener is not None
        while True:
            await self._accepting.wait()
            sock, _ = await loop.sock_accept(self._listener)
            if not self._accepting.is_set():
                # Paused while this accept was pending: hold the connection unserved
                # until accepting resumes, as the backlog would.
                await self._accepting.wait()
            asyncio.ensure_future(self._serve(sock))

    async def _serve(self, sock: socket.socket) -> None:
        if len(self._open) >= self.connections_max:
            self.refused += 1
            sock.close()
            return
        try:
            client = await asyncio.open_connection(sock=sock)
        except OSError:
            self.refused += 1
            sock.close()
            return
        try:
            server = await asyncio.open_connection(*self.target)
        except OSError:
            # The target is down (a broker being restarted): the client sees its
            # connection closed and tries again; its stream owns the socket now.
            self.refused += 1
            client[1].close()
            return
        self.accepted += 1
        conn = ProxiedConnection(self, self.accepted, client, server)
        self._open[conn.number] = conn
        conn.start()
        await self._notify()

    def connection_closed(self, conn: ProxiedConnection) -> None:
        self._open.pop(conn.number, None)
        asyncio.ensure_future(self._notify())

    async def _notify(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    async def _wait(self, predicate: Callable[[], bool], timeout_s: float) -> None:
        assert self._changed is not None
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(predicate), timeout_s)
            except TimeoutError:
                raise TimeoutError(
                    f"proxy: {self.accepted} accepted, {len(self._open)} open after "
                    f"{timeout_s}s"
                ) from None

    def _blackhole(self, seconds: float) -> None:
        self.faults.blackhole_until = asyncio.get_running_loop().time() + seconds

    def _cut_all(self, direction: Direction, cut: Cut) -> int:
        for conn in self._open.values():
            conn._arm_cut(direction, cut)
        return len(self._open)

    def _reset_all(self) -> int:
        conns = list(self._open.values())
        for conn in conns:
            conn._reset()
        return len(conns)

    def _disarm_cuts(self) -> int:
        scopes = [self.faults, *(conn.faults for conn in self._open.values())]
        armed = sum(len(scope.cuts) for scope in scopes)
        for scope in scopes:
            scope.cuts.clear()
        return armed

    def _clear(self) -> None:
        self.faults.clear()  # in place: every writer holds this object

    async def _shutdown(self) -> None:
        if self._accept_task is not None:
            self._accept_task.cancel()
        for conn in list(self._open.values()):
            conn._close(rst=False)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        # Let the cancelled tasks run their cancellation before the loop stops.
        await asyncio.sleep(0)

    # ------------------------------------------------------------ thread hand-off

    def run_on_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn(*args)`` on the proxy's loop from the test's thread; its result."""
        async def run() -> _T:
            return fn(*args)

        return self._call_async(run())

    def _call_async(self, coro: Coroutine[Any, Any, _T]) -> _T:
        assert self._loop is not None, "proxy not started"
        if threading.current_thread() is self._thread:
            raise RuntimeError("call the proxy from the test's thread, not its loop")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``predicate`` (every 20 ms) until it holds.

    Raises:
        TimeoutError: it did not hold within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout_s}s: {what}")
        time.sleep(0.02)  # polling interval of a bounded wait
