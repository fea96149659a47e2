"""One client connection on the broker side: bytes in, commands out.

The connection is a thin asyncio ``Protocol`` around the sans-IO frame decoder. It
owns what is per connection (the handshake, keep-alive, publish back-pressure, the
producer and consumer tables) and dispatches each decoded command to a handler object:
``ProducerCommands``, ``ConsumerCommands``, ``LookupCommands`` and
``TransactionCommands``, which see the connection only as a ``ConnectionContext``
(``context.py``) and answer through the broker service.

Life of a connection::

    AWAIT_CONNECT --CONNECT--> READY --(transport lost | protocol error)--> CLOSED

With authentication enabled, CONNECT is authenticated first (``authentication.py``):
refused credentials get ERROR(AuthenticationError) and the connection closes; the
role becomes the connection's ``principal``, and expiring credentials are refreshed
with AUTH_CHALLENGE / AUTH_RESPONSE while READY.

Any command before CONNECT, an undecodable frame or an oversize frame closes this
connection only; the broker keeps serving everyone else and nothing stored is touched.
Each such close counts in ``quasar_hostile_input_refused_total`` (``frame_size`` or
``protocol_violation``), as every refusal a handler answers does when a check tagged
it (``quasar.broker.hostile_input``).

Writes are coalesced by the ``FrameWriter`` the client shares (``quasar.transport``):
frames produced while handling one read (many receipts, many MESSAGE frames) go out in
a single ``transport.write`` at the end of the loop iteration, which is most of the
difference between a few thousand and tens of thousands of messages per second in
Python.

Back-pressure: when more than ``max_pending_publish`` sends await their receipts,
reading from the socket pauses until half of them complete (Pulsar's
``maxPendingPublishRequestsPerConnection``).

Dispatch back-pressure: once the transport's write buffer passes
``pulsarChannelWriteBufferHighWaterMark``, the transport calls ``pause_writing`` and
the connection's consumers stop being handed entries (their shared ``WriteState``
reads not writable), until it drains below the low-water mark and
``resume_writing`` wakes their dispatchers. So a consumer that grants a huge number
of permits and never reads costs the broker one write buffer, not its backlog.
Answers (receipts, PONGs, errors) are never held back; instead, while the write buffer
is above the high-water mark the connection's requests are not read either
(``pulsarChannelPauseReceivingRequestsIfUnwritable``), so a client that sends requests
and never reads the answers costs one write buffer plus the answers of one read.

Resources: every connection shares the broker's ``ConnectionLimits``
(``limits.py``): a connection over ``brokerMaxConnections`` or
``brokerMaxConnectionsPerIp`` is answered ERROR(NotAllowedError) and closed at once.
A frame that has started must end within ``incompleteFrameTimeoutSeconds`` (while
reading is not paused by the broker itself), and the bytes all connections hold for
incomplete frames are bounded together; a connection over either is closed
(``incomplete_frames.py``). When a
connection closes, everything it holds is let go at once (producers, consumers,
buffered frames, the decoder's buffer), not when a garbage collection finds the
connection's reference cycles.

Fair turns: after a large read (``YIELD_AFTER_READ_BYTES``) reading pauses until the
loop has run what became ready meanwhile, and a read of many frames is handled
``FRAMES_PER_TURN`` at a time, one loop turn each, the rest waiting in the decoder as
bytes: a 256 KiB read of 12-byte PINGs would otherwise be 22,000 decoded commands at
once. libuv reads a busy socket up to 32
times (256 KiB each) in one go, so without the pause a publishing client's burst (1,000
unbatched sends) would be decoded whole before any storage completion, receipt or
dispatch could run: its receipts would come back together, the client would send its
next burst only then, and broker and client would take turns instead of overlapping.

Keep-alive (Pulsar's ``keepAliveIntervalSeconds``, ``quasar.transport.keep_alive``):
every interval the broker sends a PING; if nothing at all arrived from the client
since the previous PING, the client is gone and the connection is closed, which frees
its producers and hands its consumers' unacknowledged messages to others. A connection
that has not sent CONNECT by the first tick is closed too. While reading is paused for
back-pressure, an answer could not be seen, so nobody is closed for that.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Coroutine
from typing import Any

from quasar.auth import AuthenticationService, AuthorizationService
from quasar.broker.consumer import Consumer, WriteState
from quasar.broker.hostile_input import HostileInputRefusals
from quasar.broker.non_persistent_topics import ServedTopic
from quasar.broker.producer import Producer
from quasar.broker.service import BrokerService
from quasar.errors import (
    REFUSED_PROTOCOL_VIOLATION,
    NotAllowedError,
    ProtocolError,
    take_refusal,
)
from quasar.protocol import (
    FRAME_PADDING,
    PROTOCOL_VERSION_MAX,
    Frame,
    FrameDecoder,
    encode_command,
    pb,
)
from quasar.transport.keep_alive import PONG_FRAME, KeepAlive, Silence
from quasar.transport.writer import Buffer, FrameWriter

from .authentication import ConnectionAuthentication
from .consumer_commands import ConsumerCommands
from .context import CommandHandler
from .incomplete_frames import IncompleteFrameWatch
from .limits import ConnectionLimits
from .lookup_commands import LookupCommands
from .producer_commands import ProducerCommands
from .replies import BROKER_REQUEST_ID, error
from .topic_list_commands import TopicListCommands, watchers_offered
from .txn_commands import TransactionCommands

log = logging.getLogger(__name__)

SERVER_VERSION = "quasar-0.1.0"
# A read at least this large suggests more is waiting: the connection then pauses
# reading for one loop turn (see "Fair turns" above). uvloop reads up to 256 KiB.
YIELD_AFTER_READ_BYTES = 64 * 1024
# At most this many frames of one read are handled in one loop turn; the rest wait for
# the next turns, with reading paused. A 256 KiB read holds over 4,000 small
# commands, and some (PRODUCER, SUBSCRIBE) start a request handler each: handled in
# one turn, they would keep every other connection waiting for all of them.
FRAMES_PER_TURN = 512

T = pb.BaseCommand


class ServerConnection(asyncio.Protocol):
    """A client connection; implements ``ConnectionContext`` for its handlers."""

    # The writer's own method, bound once: every receipt and delivery goes through it,
    # so no call of the connection's sits in between.
    write: Callable[[Buffer], None]

    def __init__(
        self,
        service: BrokerService,
        max_pending_publish: int = 1000,
        keep_alive_s: float = 30.0,
        authentication: AuthenticationService | None = None,
        authorization: AuthorizationService | None = None,
        limits: ConnectionLimits | None = None,
        refusals: HostileInputRefusals | None = None,
    ) -> None:
        """``limits``: the broker's connection limits, shared by its connections;
        ``refusals``: the broker's count of refused hostile input (``service.refusals``).
        None: this connection's own, as for a connection built alone in a test."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self.service = service
        self.settings = service.config.broker
        self.limits = limits if limits is not None else ConnectionLimits(self.settings)
        self.refusals = refusals if refusals is not None else HostileInputRefusals()
        self._decoder = FrameDecoder(self.settings.max_message_size + FRAME_PADDING)
        self._transport: asyncio.Transport | None = None
        self._writer = FrameWriter(loop)
        self.write = self._writer.write
        self._tasks: set[asyncio.Task[Any]] = set()
        self.connected = False
        self.closed = False
        self.protocol_version = 0
        self.principal: str | None = None  # the authenticated role (None: auth off)
        # Without a service of the broker's, the configuration decides: off allows
        # all, on builds one over the broker's metadata.
        if authorization is None:
            config = service.config.authorization
            authorization = (
                AuthorizationService(config, service.resources)
                if config.authorization_enabled
                else AuthorizationService.allow_all()
            )
        self.authorization = authorization
        # The client certificate verified in the TLS handshake (ssl's decoded form),
        # for authentication by certificate; None on plaintext or without one.
        self.peer_certificate: dict[str, Any] | None = None
        self._client_version = ""
        self._remote = ""
        self._ip = ""
        self._admitted = False  # counted as open in the broker's limits
        # Shared with this connection's consumers: deliveries stop while it is False.
        self.write_state = WriteState()
        self._close_timer: asyncio.TimerHandle | None = None
        self.producers: dict[int, tuple[Producer, ServedTopic]] = {}
        self.producer_futures: dict[int, asyncio.Future[None]] = {}
        self.consumers: dict[int, tuple[Consumer, ServedTopic]] = {}
        self.consumer_futures: dict[int, asyncio.Future[None]] = {}
        self.pending_publish = 0
        self.max_pending_publish = max_pending_publish
        self._reading_paused = False  # back-pressure: too many publishes in flight
        # Back-pressure: the peer does not read its answers (the write buffer is above
        # the high-water mark, under pulsarChannelPauseReceivingRequestsIfUnwritable).
        self._unwritable = False
        self._read_yielded = False  # a turn given up after a large read
        self._frames_held = False  # whole frames of a read wait for later turns
        # Those frames are held back by publish back-pressure too.
        self._frames_waiting = False
        self._reading = True  # what the transport was last told
        # The frame that has started but not ended: its bytes and its deadline.
        self._incomplete = IncompleteFrameWatch(
            self.limits,
            loop,
            float(self.settings.incomplete_frame_timeout_seconds),
            reading=lambda: self._reading,
            close=self.abort,
            remote=lambda: self._remote,
        )
        self._keep_alive = KeepAlive(
            keep_alive_s, loop, self.write, self._keep_alive_expired, hearing=self._hearing
        )
        self._producer_commands = ProducerCommands(self)
        self._consumer_commands = ConsumerCommands(self)
        self._topic_list_commands = TopicListCommands(self)
        self._handlers: dict[int, CommandHandler] = {
            T.PING: lambda c, f: self.write(PONG_FRAME),
            T.PONG: lambda c, f: None,
            **self._producer_commands.handlers(),
            **self._consumer_commands.handlers(),
            **LookupCommands(self).handlers(),
            **TransactionCommands(self).handlers(),
            **self._topic_list_commands.handlers(),
        }
        self._authentication: ConnectionAuthentication | None = None
        self._authenticating = False  # CONNECT received, its check not yet done
        if authentication is not None:
            self._authentication = ConnectionAuthentication(
                self,
                authentication,
                SERVER_VERSION,
                service.config.authentication.authentication_refresh_check_seconds,
            )
            self._handlers[T.AUTH_RESPONSE] = self._authentication.on_auth_response

    # -- what the broker's producers and consumers read ------------------------------
    @property
    def remote_address(self) -> str:
        return self._remote

    @property
    def client_version(self) -> str:
        return self._client_version

    def close_producer(self, producer_id: int) -> None:
        """Broker-initiated close: the client reconnects the producer."""
        self._producer_commands.close_producer(producer_id)

    def close_consumer(self, consumer_id: int) -> None:
        """Broker-initiated close: the client resubscribes (same consumer id)."""
        self._consumer_commands.close_consumer(consumer_id)

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        self._writer.attach(self._transport)  # type: ignore[arg-type]
        peer = transport.get_extra_info("peername")
        self._remote = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        self._ip = str(peer[0]) if peer else "unknown"
        over = self.limits.connection_opened(self._ip)
        if over is not None:
            self._refuse_connection(over)
            return
        self._admitted = True
        settings = self.settings
        transport.set_write_buffer_limits(  # type: ignore[attr-defined]
            high=settings.pulsar_channel_write_buffer_high_water_mark,
            low=min(
                settings.pulsar_channel_write_buffer_low_water_mark,
                settings.pulsar_channel_write_buffer_high_water_mark,
            ),
        )
        # ssl only decodes a certificate it verified, so an unverified one (under
        # tlsAllowInsecureConnection) never reaches authentication.
        self.peer_certificate = transport.get_extra_info("peercert") or None
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                # Small frames (receipts, PINGs) must not wait for Nagle's algorithm.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass  # not a TCP socket (a test's socketpair): nothing to tune
        self._keep_alive.start()

    def _refuse_connection(self, limit_key: str) -> None:
        """Answer a connection over a connection limit and close it (Pulsar's
        answer: ERROR(NotAllowedError) for no request, then close)."""
        if limit_key == "brokerMaxConnections":
            message = "Reached the maximum number of connections"
        else:
            message = f"Reached the maximum number of connections on address {self._ip}"
        log.warning("refusing connection from %s: %s (%s)", self._remote, message, limit_key)
        self.limits.refused(limit_key)
        self.send_command(error(BROKER_REQUEST_ID, NotAllowedError(message)))
        self.abort()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return  # refused or closing: nothing it sends is read any more
        self._keep_alive.heard = True
        if len(data) >= YIELD_AFTER_READ_BYTES and not self._read_yielded:
            self._read_yielded = True
            self._update_reading()
            self._loop.call_soon(self._end_read_turn)
        decoder = self._decoder
        try:
            frames = decoder.feed(data, FRAMES_PER_TURN)
        except ProtocolError as e:
            self._close_for(e)
            return
        if decoder.has_frame:
            # The rest of the read is decoded and handled in later turns, reading
            # paused meanwhile; what is buffered is whole frames, not a started one.
            self._frames_held = True
            self._update_reading()
            self._handle_frames(frames)
            return
        if not self._after_frames_read(bool(frames)):
            return
        self._handle_frames(frames)

    def _after_frames_read(self, completed: bool) -> bool:
        """Tell the incomplete-frame watch what the decoder holds once every whole
        frame is out of it; False when that closed the connection."""
        held = self._decoder.buffered_bytes
        incomplete = self._incomplete
        return not (held or incomplete.held_bytes) or incomplete.after_read(held, completed)

    def _close_for(self, violation: ProtocolError) -> None:
        """Close the connection for a frame the client should not have sent: one
        over the frame-size limit (it cannot be skipped), undecodable, or not
        allowed now. Each is a refusal of hostile input, counted by its tag (a frame
        over the limit) or as a protocol violation."""
        log.warning("closing connection from %s: %s", self._remote, violation)
        self.refusals.count(take_refusal(violation) or REFUSED_PROTOCOL_VIOLATION)
        self.abort()

    def _handle_frames(self, frames: list[Frame]) -> None:
        for frame in frames:
            if self.closed:
                return
            try:
                self._handle(frame)
            except ProtocolError as e:
                self._close_for(e)
                return
        if self._frames_held and not self.closed:
            self._loop.call_soon(self._handle_held_frames)

    def _handle_held_frames(self) -> None:
        """Decode and handle the next ``FRAMES_PER_TURN`` whole frames a read left in
        the decoder, one loop turn each, until none is left; then read again. While
        publish back-pressure holds, they wait for it to lift, as unread bytes would."""
        if self.closed:
            return
        if self._reading_paused:
            self._frames_waiting = True
            return
        decoder = self._decoder
        try:
            frames = decoder.feed(b"", FRAMES_PER_TURN)
        except ProtocolError as e:
            self._close_for(e)
            return
        if not decoder.has_frame:
            self._frames_held = False
            if not self._after_frames_read(True):
                return
            self._update_reading()
        self._handle_frames(frames)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._keep_alive.stop()
        if self._authentication is not None:
            self._authentication.stop()
        self._writer.discard()
        # The connection sits in reference cycles (its handlers point back at it), so
        # what it holds is let go here rather than whenever a collection runs.
        self._decoder.discard()
        self._incomplete.release()
        if self._close_timer is not None:
            self._close_timer.cancel()
            self._close_timer = None
        if self._admitted:
            self._admitted = False
            self.limits.connection_closed(self._ip)
        for task in list(self._tasks):
            task.cancel()
        for producer, topic in list(self.producers.values()):
            topic.remove_producer(producer)
        for consumer, topic in list(self.consumers.values()):
            topic.remove_consumer(consumer)
        self._topic_list_commands.close()
        self.producers.clear()
        self.consumers.clear()
        self.producer_futures.clear()
        self.consumer_futures.clear()
        self._frames_waiting = False
        self._transport = None

    # -- writing back-pressure ---------------------------------------------------------
    def pause_writing(self) -> None:
        """The transport's write buffer passed the high-water mark: stop dispatch, and
        reading requests whose answers would queue behind it."""
        self.write_state.writable = False
        if self.settings.pulsar_channel_pause_receiving_requests_if_unwritable:
            self._unwritable = True
            self._update_reading()

    def resume_writing(self) -> None:
        """The write buffer drained below the low-water mark: dispatch again to the
        consumers that may take entries."""
        self.write_state.writable = True
        if self._unwritable:
            self._unwritable = False
            self._update_reading()
        for consumer, topic in list(self.consumers.values()):
            if consumer.permits > 0:
                topic.resume_dispatch(consumer)

    # -- reading: back-pressure and fair turns ----------------------------------------
    def _end_read_turn(self) -> None:
        self._read_yielded = False
        self._update_reading()

    def _update_reading(self) -> None:
        """Pause or resume the transport: it reads unless back-pressure (publishes in
        flight, answers unread), a yielded turn or frames of a read still to handle hold
        it."""
        want = not (
            self._reading_paused or self._read_yielded or self._frames_held or self._unwritable
        )
        if want is self._reading or self.closed or self._transport is None:
            return
        self._reading = want
        if want:
            self._transport.resume_reading()
        else:
            self._transport.pause_reading()

    def _hearing(self) -> bool:
        """Whether an answer to a keep-alive PING could be read now."""
        return not (self._reading_paused or self._unwritable)

    def publish_started(self) -> None:
        self.pending_publish += 1
        if not self._reading_paused and self.pending_publish >= self.max_pending_publish:
            self._reading_paused = True
            self._update_reading()

    def publish_completed(self) -> None:
        self.pending_publish -= 1
        if self._reading_paused and self.pending_publish <= self.max_pending_publish // 2:
            self._reading_paused = False
            if self._frames_waiting:
                self._frames_waiting = False
                self._loop.call_soon(self._handle_held_frames)
            self._update_reading()

    # -- keep-alive ----------------------------------------------------------------------
    def _keep_alive_expired(self, silence: Silence) -> None:
        interval_s = self._keep_alive.interval_s
        if silence is Silence.NO_HANDSHAKE:
            log.info("closing connection from %s: no CONNECT within %g s",
                     self._remote, interval_s)
        else:
            log.info("closing connection from %s: nothing received for %g s "
                     "(no answer to the keep-alive PING)", self._remote, interval_s)
        self.abort()

    # -- writing -----------------------------------------------------------------------
    def send_command(self, cmd: pb.BaseCommand) -> None:
        self.write(encode_command(cmd))

    def abort(self) -> None:
        """Close the connection: what is buffered leaves first, unless the client
        does not read it (the write buffer is over its high-water mark), or has not
        read it within a keep-alive interval."""
        self._keep_alive.stop()
        self._writer.close()
        self.closed = True
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if not self.write_state.writable:
            transport.abort()
            return
        transport.close()
        self._close_timer = self._loop.call_later(
            max(self._keep_alive.interval_s, 1.0), self._abort_transport
        )

    def _abort_transport(self) -> None:
        self._close_timer = None
        if self._transport is not None:
            self._transport.abort()

    # -- dispatch ----------------------------------------------------------------------
    def _handle(self, frame: Frame) -> None:
        cmd = frame.command
        if not self.connected:
            if cmd.type != T.CONNECT:
                raise ProtocolError(f"expected CONNECT, got {T.Type.Name(cmd.type)}")
            self._on_connect(cmd.connect)
            return
        handler = self._handlers.get(cmd.type)
        if handler is None:
            raise ProtocolError(f"command {T.Type.Name(cmd.type)} is not accepted from clients")
        handler(cmd, frame)

    def _on_connect(self, c: pb.CommandConnect) -> None:
        if self._authentication is None:
            self._connected(c)
            return
        if self._authenticating:
            raise ProtocolError("CONNECT sent again before CONNECTED")
        self._authenticating = True
        self.spawn(self._authenticate_connect(self._authentication, c))

    async def _authenticate_connect(
        self, authentication: ConnectionAuthentication, c: pb.CommandConnect
    ) -> None:
        if await authentication.on_connect(c):
            self._connected(c)
        else:
            self.limits.counts.create_fail += 1
        # Refused: the client was answered and the connection is closing.

    def _connected(self, c: pb.CommandConnect) -> None:
        self.connected = True
        self.limits.counts.create_success += 1
        self._keep_alive.handshake_done = True
        self._client_version = c.client_version
        self.protocol_version = min(PROTOCOL_VERSION_MAX, c.protocol_version)
        reply = T(type=T.CONNECTED)
        reply.connected.server_version = SERVER_VERSION
        reply.connected.protocol_version = self.protocol_version
        reply.connected.max_message_size = self.settings.max_message_size
        if watchers_offered(self.service.config.topic_list, c.feature_flags):
            reply.connected.feature_flags.supports_topic_watchers = True
        self.send_command(reply)

    # -- tasks -------------------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a request handler that has to wait (topic load, lookup)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("request handler failed on %s", self._remote, exc_info=task.exception())

