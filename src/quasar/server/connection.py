"""One client connection on the broker side: bytes in, commands out.

The connection is a thin asyncio ``Protocol`` around the sans-IO frame decoder. It
owns the per-connection state Pulsar defines (handshake, producer and consumer ids,
pending publishes) and forwards commands to the broker service.

Life of a connection::

    AWAIT_CONNECT --CONNECT--> READY --(transport lost | protocol error)--> CLOSED

Any command before CONNECT, an undecodable frame or an oversize frame closes this
connection only; the broker keeps serving everyone else and nothing stored is touched.

Writes are coalesced: frames produced while handling one read (many receipts, many
MESSAGE frames) go out in a single ``transport.write`` at the end of the loop
iteration, which is most of the difference between a few thousand and tens of
thousands of messages per second in Python.

Back-pressure: when more than ``max_pending_publish`` sends await their receipts,
reading from the socket pauses until half of them complete (Pulsar's
``maxPendingPublishRequestsPerConnection``).

Fair turns: after a large read (``YIELD_AFTER_READ_BYTES``) reading pauses until the
loop has run what became ready meanwhile. libuv reads a busy socket up to 32 times
(256 KiB each) in one go, so without the pause a publishing client's burst (1,000
unbatched sends) was decoded whole before any storage completion, receipt or dispatch
could run: its receipts came back together, the client sent its next burst only then,
and broker and client took turns instead of overlapping. Measured in
``docs/benchmarks.md`` (session 5).

Keep-alive (Pulsar's ``keepAliveIntervalSeconds``): every interval the broker sends a
PING; if nothing at all arrived from the client since the previous PING, the client is
gone (a half-open TCP connection, a frozen process) and the connection is closed, which
frees its producers and hands its consumers' unacknowledged messages to others. A
connection that has not sent CONNECT by the first tick is closed too. While reading is
paused for back-pressure, an answer could not be seen, so nobody is closed for that.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from quasar.broker.consumer import Consumer
from quasar.broker.producer import Producer
from quasar.broker.service import BrokerService
from quasar.broker.topic import PersistentTopic
from quasar.errors import BrokerError, ProtocolError, ServerError
from quasar.protocol import (
    EAGER_FLUSH_BYTES,
    FRAME_PADDING,
    PROTOCOL_VERSION_MAX,
    Frame,
    FrameDecoder,
    encode_command,
    pb,
)

from .consumer_commands import ConsumerCommands
from .lookup_commands import LookupCommands
from .producer_commands import ProducerCommands
from .txn_commands import TransactionCommands

log = logging.getLogger(__name__)

SERVER_VERSION = "quasar-0.1.0"
# A read at least this large suggests more is waiting: the connection then pauses
# reading for one loop turn (see "Fair turns" above). uvloop reads up to 256 KiB.
YIELD_AFTER_READ_BYTES = 64 * 1024

_PING_FRAME = encode_command(pb.BaseCommand(type=pb.BaseCommand.PING, ping=pb.CommandPing()))
U64 = 1 << 64


def signed64(v: int) -> int:
    """uint64 on the wire to int64 (ledger/entry ids use -1 = 2**64-1)."""
    return v - U64 if v >= 1 << 63 else v


class ServerConnection(
    ProducerCommands, ConsumerCommands, LookupCommands, TransactionCommands, asyncio.Protocol
):
    def __init__(
        self,
        service: BrokerService,
        max_pending_publish: int = 1000,
        keep_alive_s: float = 30.0,
    ) -> None:
        self.service = service
        self.settings = service.config.broker
        self._decoder = FrameDecoder(self.settings.max_message_size + FRAME_PADDING)
        self._transport: asyncio.Transport | None = None
        self._wbuf: list[bytes] = []
        self._flush_scheduled = False
        self._wbuf_bytes = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.connected = False
        self.closed = False
        self.protocol_version = 0
        self.principal: str | None = None  # the authenticated role (no auth yet)
        self._client_version = ""
        self._remote = ""
        self.producers: dict[int, tuple[Producer, PersistentTopic]] = {}
        self.producer_futures: dict[int, asyncio.Future[None]] = {}
        self.consumers: dict[int, tuple[Consumer, PersistentTopic]] = {}
        self.consumer_futures: dict[int, asyncio.Future[None]] = {}
        self.pending_publish = 0
        self.max_pending_publish = max_pending_publish
        self._reading_paused = False  # back-pressure: too many publishes in flight
        self._read_yielded = False  # a turn given up after a large read
        self._reading = True  # what the transport was last told
        self._keep_alive_s = keep_alive_s
        self._keep_alive: asyncio.TimerHandle | None = None
        self._heard = False  # anything received since the last keep-alive PING
        self._handlers: dict[int, Callable[[pb.BaseCommand, Frame], None]] = (
            self._build_handlers()
        )

    # -- properties the broker uses ----------------------------------------------------
    @property
    def remote_address(self) -> str:
        return self._remote

    @property
    def client_version(self) -> str:
        return self._client_version

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self._remote = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket

            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self._arm_keep_alive()

    def _arm_keep_alive(self) -> None:
        if self._keep_alive_s > 0:
            self._keep_alive = asyncio.get_running_loop().call_later(
                self._keep_alive_s, self._keep_alive_tick
            )

    def _keep_alive_tick(self) -> None:
        self._keep_alive = None
        if self.closed:
            return
        if not self.connected:
            log.info("closing connection from %s: no CONNECT within %g s",
                     self._remote, self._keep_alive_s)
            self.abort()
            return
        if not self._heard and not self._reading_paused:
            log.info("closing connection from %s: nothing received for %g s "
                     "(no answer to the keep-alive PING)", self._remote, self._keep_alive_s)
            self.abort()
            return
        self._heard = False
        self.write(_PING_FRAME)
        self._arm_keep_alive()

    def data_received(self, data: bytes) -> None:
        self._heard = True
        if len(data) >= YIELD_AFTER_READ_BYTES and not self._read_yielded:
            self._read_yielded = True
            self._update_reading()
            asyncio.get_running_loop().call_soon(self._end_read_turn)
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as e:
            log.warning("closing connection from %s: %s", self._remote, e)
            self.abort()
            return
        for frame in frames:
            if self.closed:
                return
            try:
                self._handle(frame)
            except ProtocolError as e:
                log.warning("closing connection from %s: %s", self._remote, e)
                self.abort()
                return

    def _end_read_turn(self) -> None:
        self._read_yielded = False
        self._update_reading()

    def _update_reading(self) -> None:
        """Pause or resume the transport: it reads unless back-pressure or a yielded
        turn holds it."""
        want = not (self._reading_paused or self._read_yielded)
        if want is self._reading or self.closed or self._transport is None:
            return
        self._reading = want
        if want:
            self._transport.resume_reading()
        else:
            self._transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._keep_alive is not None:
            self._keep_alive.cancel()
            self._keep_alive = None
        for task in list(self._tasks):
            task.cancel()
        for producer, topic in list(self.producers.values()):
            topic.remove_producer(producer)
        for consumer, topic in list(self.consumers.values()):
            topic.remove_consumer(consumer)
        self.producers.clear()
        self.consumers.clear()
        self.on_connection_lost()

    def pause_writing(self) -> None:  # the kernel buffer is full; frames queue in memory
        pass

    def resume_writing(self) -> None:
        pass

    # -- writing -----------------------------------------------------------------------
    def write(self, frame: bytes) -> None:
        if self.closed:
            return
        self._wbuf.append(frame)
        self._wbuf_bytes += len(frame)
        if self._wbuf_bytes >= EAGER_FLUSH_BYTES:
            self._flush()
            return
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._wbuf_bytes = 0
        if self.closed or self._transport is None or not self._wbuf:
            self._wbuf.clear()
            return
        data = self._wbuf[0] if len(self._wbuf) == 1 else b"".join(self._wbuf)
        self._wbuf.clear()
        self._transport.write(data)

    def send_command(self, cmd: pb.BaseCommand) -> None:
        self.write(encode_command(cmd))

    def abort(self) -> None:
        self._flush()
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    # -- dispatch ----------------------------------------------------------------------
    def _build_handlers(self) -> dict[int, Callable[[pb.BaseCommand, Frame], None]]:
        T = pb.BaseCommand
        handlers: dict[int, Callable[[pb.BaseCommand, Frame], None]] = {
            T.PING: lambda c, f: self.send_command(
                pb.BaseCommand(type=T.PONG, pong=pb.CommandPong())
            ),
            T.PONG: lambda c, f: None,
        }
        handlers.update(self.producer_handlers())
        handlers.update(self.consumer_handlers())
        handlers.update(self.lookup_handlers())
        handlers.update(self.transaction_handlers())
        return handlers

    def _handle(self, frame: Frame) -> None:
        cmd = frame.command
        if not self.connected:
            if cmd.type != pb.BaseCommand.CONNECT:
                raise ProtocolError(f"expected CONNECT, got {pb.BaseCommand.Type.Name(cmd.type)}")
            self._on_connect(cmd.connect)
            return
        handler = self._handlers.get(cmd.type)
        if handler is None:
            raise ProtocolError(
                f"command {pb.BaseCommand.Type.Name(cmd.type)} is not accepted from clients"
            )
        handler(cmd, frame)

    def _on_connect(self, c: pb.CommandConnect) -> None:
        self.connected = True
        self._client_version = c.client_version
        self.protocol_version = min(PROTOCOL_VERSION_MAX, c.protocol_version)
        reply = pb.BaseCommand(type=pb.BaseCommand.CONNECTED)
        reply.connected.server_version = SERVER_VERSION
        reply.connected.protocol_version = self.protocol_version
        reply.connected.max_message_size = self.settings.max_message_size
        self.send_command(reply)

    # -- helpers for the command mixins ------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a request handler that has to wait (topic load, lookup)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("request handler failed on %s", self._remote, exc_info=task.exception())

    def send_error(self, request_id: int, error: BaseException) -> None:
        code, message = error_code_and_message(error)
        cmd = pb.BaseCommand(type=pb.BaseCommand.ERROR)
        cmd.error.request_id = request_id
        cmd.error.error = code
        cmd.error.message = message
        self.send_command(cmd)

    def send_success(self, request_id: int) -> None:
        cmd = pb.BaseCommand(type=pb.BaseCommand.SUCCESS)
        cmd.success.request_id = request_id
        self.send_command(cmd)

    def publish_completed(self) -> None:
        self.pending_publish -= 1
        if self._reading_paused and self.pending_publish <= self.max_pending_publish // 2:
            self._reading_paused = False
            self._update_reading()

    def publish_started(self) -> None:
        self.pending_publish += 1
        if not self._reading_paused and self.pending_publish >= self.max_pending_publish:
            self._reading_paused = True
            self._update_reading()


def error_code_and_message(error: BaseException) -> tuple[int, str]:
    """The ServerError code and message for an exception (UnknownError for bugs)."""
    if isinstance(error, BrokerError) and error.code is not None:
        return int(error.code), str(error) or type(error).__name__
    code = getattr(error, "code", None)
    if isinstance(code, ServerError):
        return int(code), str(error) or type(error).__name__
    return int(ServerError.UnknownError), f"{type(error).__name__}: {error}"
