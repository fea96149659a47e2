"""One connection through the fault proxy (``quasar.testing.fault_proxy``): the
client's socket, the upstream socket to the target, and the two pumps between them.

A pump is a reader task and a writer task joined by a bounded queue of chunks; the
writer applies the faults in force (this connection's and the proxy's) at chunk
boundaries, so bytes are never reordered. Everything here runs on the proxy's loop
except the public fault methods, which hand their change to it through the proxy.
"""

from __future__ import annotations

import asyncio
import enum
import socket
import struct
from collections.abc import Callable
from typing import Any, Protocol


class ProxyHost(Protocol):
    """What a connection needs of the proxy that accepted it."""

    faults: Faults  # the proxy-wide faults, applied to every connection
    chunk_bytes_max: int
    buffered_chunks_max: int

    def run_on_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the proxy's loop; return its result."""
        ...

    def connection_closed(self, conn: ProxiedConnection) -> None:
        """Called on the proxy's loop once ``conn`` is closed."""
        ...


class Direction(enum.Enum):
    """Which way bytes flow through a pump."""

    TO_SERVER = "client->server"
    TO_CLIENT = "server->client"


class Faults:
    """The faults in force on one scope (the whole proxy or one connection)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.delay_s = 0.0
        self.dropping = False
        self.blackhole_until = 0.0  # loop time
        self.cuts: dict[Direction, Cut] = {}


class Cut:
    """An armed cut: forward ``after_bytes`` of the next chunk ``when`` accepts."""

    def __init__(
        self, after_bytes: int, rst: bool, when: Callable[[bytes], bool] | None
    ) -> None:
        assert after_bytes >= 0, "after_bytes must not be negative"
        self.after_bytes = after_bytes
        self.rst = rst
        self.when = when

    def applies(self, chunk: bytes) -> bool:
        return self.when is None or self.when(chunk)


_EOF = b""


class ProxiedConnection:
    """One client connection and its upstream connection to the target."""

    def __init__(
        self,
        proxy: ProxyHost,
        number: int,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        server: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self._proxy = proxy
        self.number = number  # 1 for the first connection the proxy accepted
        self._client = client
        self._server = server
        self.faults = Faults()
        self.closed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------ test thread API

    def delay(self, seconds: float) -> None:
        """Write every chunk ``seconds`` after it was read (0 ends the delay)."""
        self._proxy.run_on_loop(self._set, "delay_s", seconds)

    def drop(self, dropping: bool = True) -> None:
        """Discard everything in both directions, silently."""
        self._proxy.run_on_loop(self._set, "dropping", dropping)

    def blackhole(self, seconds: float) -> None:
        """Hold everything for ``seconds``, then forward it."""
        self._proxy.run_on_loop(self._blackhole, seconds)

    def cut(
        self,
        direction: Direction,
        after_bytes: int,
        *,
        rst: bool = False,
        when: Callable[[bytes], bool] | None = None,
    ) -> None:
        """Forward ``after_bytes`` of the next chunk going ``direction`` (the next
        one ``when`` accepts), then close both sockets (``rst``: with a reset)."""
        self._proxy.run_on_loop(self._arm_cut, direction, Cut(after_bytes, rst, when))

    def reset(self) -> None:
        """Close both sockets with an RST."""
        self._proxy.run_on_loop(self._reset)

    @property
    def is_closed(self) -> bool:
        return self.closed.is_set()

    # ------------------------------------------------------------ proxy loop

    def _set(self, name: str, value: object) -> None:
        setattr(self.faults, name, value)

    def _blackhole(self, seconds: float) -> None:
        self.faults.blackhole_until = asyncio.get_running_loop().time() + seconds

    def _arm_cut(self, direction: Direction, cut: Cut) -> None:
        self.faults.cuts[direction] = cut

    def start(self) -> None:
        chunk_max = self._proxy.chunk_bytes_max
        for direction, (reader, _), (_, writer) in (
            (Direction.TO_SERVER, self._client, self._server),
            (Direction.TO_CLIENT, self._server, self._client),
        ):
            queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(
                self._proxy.buffered_chunks_max
            )
            self._tasks.append(asyncio.ensure_future(self._read(reader, queue, chunk_max)))
            self._tasks.append(asyncio.ensure_future(self._write(direction, queue, writer)))

    def _delay(self) -> float:
        return max(self.faults.delay_s, self._proxy.faults.delay_s)

    async def _read(
        self,
        reader: asyncio.StreamReader,
        queue: asyncio.Queue[tuple[float, bytes]],
        chunk_max: int,
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                chunk = await reader.read(chunk_max)
                await queue.put((loop.time() + self._delay(), chunk))
                if not chunk:
                    return
        except (ConnectionError, OSError):
            await queue.put((loop.time(), _EOF))

    async def _write(
        self,
        direction: Direction,
        queue: asyncio.Queue[tuple[float, bytes]],
        writer: asyncio.StreamWriter,
    ) -> None:
        loop = asyncio.get_running_loop()
        scopes = (self.faults, self._proxy.faults)
        try:
            while True:
                due, chunk = await queue.get()
                while True:
                    # Re-read every time: a blackhole may begin or be extended while
                    # this chunk waits.
                    until = max(due, *(s.blackhole_until for s in scopes))
                    wait = until - loop.time()
                    if wait <= 0:
                        break
                    await asyncio.sleep(min(wait, 0.05))
                if not chunk:
                    self._close(rst=False)
                    return
                if any(s.dropping for s in scopes):
                    continue
                cut = None
                for scope in scopes:
                    armed = scope.cuts.get(direction)
                    if armed is not None and armed.applies(chunk):
                        cut = scope.cuts.pop(direction)
                        break
                if cut is not None:
                    if cut.after_bytes:
                        writer.write(chunk[: cut.after_bytes])
                        await writer.drain()
                    self._close(rst=cut.rst)
                    return
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            self._close(rst=False)

    def _reset(self) -> None:
        self._close(rst=True)

    def _close(self, *, rst: bool) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for _, writer in (self._client, self._server):
            transport = writer.transport
            if rst:
                sock = transport.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                transport.abort()
            else:
                transport.close()
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        self._proxy.connection_closed(self)
