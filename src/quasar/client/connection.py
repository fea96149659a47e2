"""One TCP connection to a broker, as an asyncio ``Protocol``, and the pool of them.

The connection is a thin shell around the sans-IO frame codec: bytes in are decoded
into commands and routed, commands out are encoded and written. It handles what is
per connection:

* the CONNECT / CONNECTED handshake (server protocol version, max message size);
* keep-alive: a PING every ``keep_alive_interval_seconds``; if nothing but PINGs came
  from the broker since our previous PING, the peer is dead and the connection closed;
* request-id correlation: each request waits for the SUCCESS / ERROR / *_RESPONSE with
  its id, with a timeout;
* routing SEND_RECEIPT / SEND_ERROR to producers, MESSAGE / ACTIVE_CONSUMER_CHANGE to
  consumers, and broker-initiated CLOSE_PRODUCER / CLOSE_CONSUMER to them so they
  reconnect; on connection loss every registered producer and consumer is told.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from quasar.client.config import (
    ASSUMED_MAX_MESSAGE_SIZE,
    ClientConfig,
    is_tls_url,
    parse_service_url,
)
from quasar.errors import (
    ConnectError,
    QuasarError,
    RemoteProtocolError,
    Timeout,
    error_for_code,
)
from quasar.protocol import FrameDecoder, encode_command, pb
from quasar.transport.keep_alive import PONG_FRAME, KeepAlive, Silence
from quasar.transport.tls import TlsLayer
from quasar.transport.writer import Buffer, FrameWriter

log = logging.getLogger(__name__)

T = pb.BaseCommand
PROTOCOL_VERSION = 20

# Response commands that carry a request_id, and the sub-message holding it.
_RESPONSES: dict[int, str] = {
    T.SUCCESS: "success",
    T.PRODUCER_SUCCESS: "producer_success",
    T.PARTITIONED_METADATA_RESPONSE: "partitionMetadataResponse",
    T.LOOKUP_RESPONSE: "lookupTopicResponse",
    T.GET_LAST_MESSAGE_ID_RESPONSE: "getLastMessageIdResponse",
    T.GET_TOPICS_OF_NAMESPACE_RESPONSE: "getTopicsOfNamespaceResponse",
    T.GET_SCHEMA_RESPONSE: "getSchemaResponse",
    T.CONSUMER_STATS_RESPONSE: "consumerStatsResponse",
    T.ACK_RESPONSE: "ackResponse",
    T.TC_CLIENT_CONNECT_RESPONSE: "tcClientConnectResponse",
    T.NEW_TXN_RESPONSE: "newTxnResponse",
    T.ADD_PARTITION_TO_TXN_RESPONSE: "addPartitionToTxnResponse",
    T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE: "addSubscriptionToTxnResponse",
    T.END_TXN_RESPONSE: "endTxnResponse",
}

# Responses that report failure in their own ``error`` / ``message`` fields (instead of
# an ERROR command): the request fails with the exception for that code.
_ERROR_IN_RESPONSE = frozenset(
    {
        T.ACK_RESPONSE,
        T.TC_CLIENT_CONNECT_RESPONSE,
        T.NEW_TXN_RESPONSE,
        T.ADD_PARTITION_TO_TXN_RESPONSE,
        T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE,
        T.END_TXN_RESPONSE,
    }
)


class ProducerHandler(Protocol):
    def on_send_receipt(self, receipt: Any) -> None: ...
    def on_send_error(self, error: Any) -> None: ...
    def on_disconnected(
        self, conn: ClientConnection, assigned_url: str | None
    ) -> None: ...


class ConsumerHandler(Protocol):
    def on_message(
        self, cmd: Any, payload: bytes | None, checksum_ok: bool | None
    ) -> None: ...
    def on_active_consumer_change(self, is_active: bool) -> None: ...
    def on_disconnected(
        self, conn: ClientConnection, assigned_url: str | None
    ) -> None: ...


def make_command(type_: int, field: str, **fields: Any) -> Any:
    """A ``BaseCommand`` of ``type_`` whose sub-message ``field`` gets ``fields``."""
    cmd = pb.BaseCommand(type=type_)
    sub = getattr(cmd, field)
    sub.SetInParent()
    for name, value in fields.items():
        if value is None:
            continue
        target = getattr(sub, name)
        if isinstance(value, list):
            target.extend(value)
        elif hasattr(target, "CopyFrom"):
            target.CopyFrom(value)
        else:
            setattr(sub, name, value)
    return cmd


class ClientConnection(asyncio.Protocol):
    """A connection in one of three states: connecting, ready, closed."""

    # Writes go straight to the shared ``FrameWriter`` (``quasar.transport``), whose
    # bound methods these are: frames written during one loop iteration leave in one
    # transport call at its end, except that ``EAGER_FLUSH_BYTES`` buffered leave at
    # once. ``write`` takes a whole frame; ``write_parts`` a frame given as consecutive
    # pieces (a SEND's head and its batch payload), handed to the transport without
    # being copied into one buffer. Both drop the frame once the connection closed.
    write: Callable[[Buffer], None]
    write_parts: Callable[[Sequence[Buffer]], None]

    def __init__(self, url: str, config: ClientConfig) -> None:
        self.url = url
        self.config = config
        self.server_protocol_version = 0
        self.max_message_size = ASSUMED_MAX_MESSAGE_SIZE
        self.server_version = ""
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._writer = FrameWriter(self._loop)
        self.write = self._writer.write
        self.write_parts = self._writer.write_parts
        self._decoder = FrameDecoder(config.max_frame_bytes)
        self._connected: asyncio.Future[None] = self._loop.create_future()
        self._closed = False
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.producers: dict[int, ProducerHandler] = {}
        self.consumers: dict[int, ConsumerHandler] = {}
        # Started once CONNECTED arrived; the broker's own PINGs do not count as
        # hearing from it (see quasar.transport.keep_alive).
        self._keep_alive = KeepAlive(
            config.keep_alive_interval_seconds,
            self._loop,
            self.write,
            self._keep_alive_expired,
            handshake_done=True,
        )
        self.close_reason: BaseException | None = None
        # Set when the transport is gone (after a TLS connection's close_notify
        # exchange, which needs the loop to run).
        self.lost = asyncio.Event()

    # --- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: no isinstance check.
        self._transport = transport  # type: ignore[assignment]
        self._writer.attach(self._transport)  # type: ignore[arg-type]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # Small frames (acks, flow) must not wait for Nagle's algorithm.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        try:
            method, data = self._credentials()
        except QuasarError as exc:
            log.warning("cannot connect to %s: %s", self.url, exc)
            self.close(exc)
            return
        connect = make_command(
            T.CONNECT,
            "connect",
            client_version=self.config.client_version,
            protocol_version=PROTOCOL_VERSION,
            auth_method_name=method,
        )
        if data:
            connect.connect.auth_data = data
        flags = connect.connect.feature_flags
        flags.supports_auth_refresh = True
        self.write(encode_command(connect))

    def _credentials(self) -> tuple[str, bytes]:
        """``(auth_method_name, auth_data)``, read afresh (a token supplier is called
        again each time).

        Raises:
            ErrorGettingAuthenticationData: the credentials cannot be produced.
        """
        auth = self.config.authentication
        if auth is None:
            return "none", b""
        return auth.auth_method_name, auth.auth_data()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except RemoteProtocolError as exc:
            log.warning("bad frame from %s: %s", self.url, exc)
            self.close(exc)
            return
        keep_alive = self._keep_alive
        for frame in frames:
            # The broker's own PINGs do not prove it answers ours.
            if frame.command.type != T.PING:
                keep_alive.heard = True
            try:
                self._handle(frame.command, frame.payload, frame.checksum_ok)
            except QuasarError as exc:
                log.warning("closing %s: %s", self.url, exc)
                self.close(exc)
                return

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set()
        self._shutdown(exc or ConnectError(f"connection to {self.url} closed"))

    @property
    def is_connected_transport(self) -> bool:
        """Whether a transport was attached and is not lost yet."""
        return self._transport is not None and not self.lost.is_set()

    def abort(self) -> None:
        """Drop the socket at once, without the TLS close exchange."""
        if self._transport is not None:
            self._transport.abort()

    # --- public ----------------------------------------------------------------------

    @property
    def is_ready(self) -> bool:
        return (
            self._connected.done()
            and not self._closed
            and not self._connected.exception()
        )

    @property
    def is_closed(self) -> bool:
        return self._closed

    async def wait_connected(self, timeout_s: float) -> None:
        """Wait for CONNECTED.

        Raises:
            ConnectError: the broker refused or closed, or did not answer in time.
        """
        try:
            await asyncio.wait_for(asyncio.shield(self._connected), timeout_s)
        except TimeoutError:
            self.close()
            raise ConnectError(
                f"no CONNECTED from {self.url} within {timeout_s}s"
            ) from None

    def send_command(self, cmd: Any) -> None:
        self.write(encode_command(cmd))

    async def request(
        self,
        cmd: Any,
        request_id: int,
        timeout_s: float | None = None,
        wait_forever: bool = False,
    ) -> Any:
        """Send a command with ``request_id`` and return the matching response command.

        ``wait_forever`` disables the timeout (a producer queued for exclusive access
        waits without limit, as in the C++ client).

        Raises:
            Timeout: no response within ``timeout_s`` (default: operation timeout).
            ConnectError: the connection closed before the response.
            BrokerError subclass: the broker answered ERROR (or an error response).
        """
        if self._closed:
            raise ConnectError(f"connection to {self.url} is closed")
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._pending[request_id] = fut
        self.send_command(cmd)
        # A timer that fails the future itself: ``asyncio.wait_for`` would add a
        # second future, a task hand-off and a timeout context to every request.
        expiry = None if wait_forever else self._loop.call_later(
            self.config.operation_timeout_s if timeout_s is None else timeout_s,
            self._expire, request_id, fut,
        )
        try:
            return await fut
        finally:
            if expiry is not None:
                expiry.cancel()
            self._pending.pop(request_id, None)

    def close(self, reason: BaseException | None = None) -> None:
        if self._transport is not None and not self._closed:
            self.close_reason = reason
            self._writer.close()
            self._transport.close()
        self._shutdown(reason or ConnectError(f"connection to {self.url} closed"))

    # --- internals -------------------------------------------------------------------

    def _shutdown(self, exc: BaseException) -> None:
        if self._closed:
            return
        self._closed = True
        self._keep_alive.stop()
        self._writer.discard()
        if not isinstance(exc, QuasarError):
            exc = ConnectError(f"connection to {self.url} lost: {exc}")
        if not self._connected.done():
            self._connected.set_exception(exc)
            self._connected.exception()  # mark retrieved: the waiter may be gone
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectError(str(exc)))
        self._pending.clear()
        handlers: list[Any] = [*self.producers.values(), *self.consumers.values()]
        self.producers.clear()
        self.consumers.clear()
        for handler in handlers:
            handler.on_disconnected(self, None)

    def _keep_alive_expired(self, silence: Silence) -> None:
        log.warning("no answer to PING from %s, closing", self.url)
        self.close(ConnectError(f"keep-alive timeout on {self.url}"))

    def _expire(self, request_id: int, fut: asyncio.Future[Any]) -> None:
        if not fut.done():
            fut.set_exception(Timeout(f"request {request_id} to {self.url} timed out"))

    def _resolve(
        self, request_id: int, result: Any = None, error: BaseException | None = None
    ) -> None:
        fut = self._pending.pop(request_id, None)
        if fut is None or fut.done():
            return  # a late answer to a request that already timed out
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)

    def _handle(
        self, cmd: Any, payload: bytes | None, checksum_ok: bool | None
    ) -> None:
        t = cmd.type
        if not self._connected.done():
            if t == T.CONNECTED:
                c = cmd.connected
                self.server_version = c.server_version
                self.server_protocol_version = c.protocol_version
                if c.HasField("max_message_size"):
                    self.max_message_size = c.max_message_size
                self._connected.set_result(None)
                if self.server_protocol_version >= 1 and not self._closed:
                    self._keep_alive.start()
            elif t == T.ERROR:
                raise error_for_code(cmd.error.error, cmd.error.message)
            else:
                raise RemoteProtocolError(f"expected CONNECTED, got {T.Type.Name(t)}")
            return
        if t == T.MESSAGE:
            consumer = self.consumers.get(cmd.message.consumer_id)
            if consumer is not None:
                consumer.on_message(cmd.message, payload, checksum_ok)
        elif t == T.SEND_RECEIPT:
            producer = self.producers.get(cmd.send_receipt.producer_id)
            if producer is not None:
                producer.on_send_receipt(cmd.send_receipt)
        elif t == T.SEND_ERROR:
            producer = self.producers.get(cmd.send_error.producer_id)
            if producer is not None:
                producer.on_send_error(cmd.send_error)
        elif t == T.PING:
            self.write(PONG_FRAME)
        elif t == T.PONG:
            pass
        elif t == T.ERROR:
            self._resolve(
                cmd.error.request_id,
                error=error_for_code(cmd.error.error, cmd.error.message),
            )
        elif t in _RESPONSES:
            self._handle_response(t, getattr(cmd, _RESPONSES[t]), cmd)
        elif t == T.CLOSE_PRODUCER:
            cp = cmd.close_producer
            handler = self.producers.pop(cp.producer_id, None)
            if handler is not None:
                handler.on_disconnected(self, self._broker_url(cp.assignedBrokerServiceUrl, cp.assignedBrokerServiceUrlTls))
        elif t == T.CLOSE_CONSUMER:
            cc = cmd.close_consumer
            chandler = self.consumers.pop(cc.consumer_id, None)
            if chandler is not None:
                chandler.on_disconnected(self, self._broker_url(cc.assignedBrokerServiceUrl, cc.assignedBrokerServiceUrlTls))
        elif t == T.ACTIVE_CONSUMER_CHANGE:
            chandler = self.consumers.get(cmd.active_consumer_change.consumer_id)
            if chandler is not None:
                chandler.on_active_consumer_change(cmd.active_consumer_change.is_active)
        elif t == T.TOPIC_MIGRATED:
            tm = cmd.topicMigrated
            table: dict[int, Any] = (
                self.producers if tm.resource_type == 0 else self.consumers
            )
            migrated = table.pop(tm.resource_id, None)
            if migrated is not None:
                migrated.on_disconnected(self, self._broker_url(tm.brokerServiceUrl, tm.brokerServiceUrlTls))
        elif t == T.AUTH_CHALLENGE:
            # The broker asks for fresh credentials (they expired): answer with what
            # the authentication gives now; failing that, the connection closes.
            method, data = self._credentials()
            resp = make_command(
                T.AUTH_RESPONSE,
                "authResponse",
                client_version=self.config.client_version,
                protocol_version=PROTOCOL_VERSION,
            )
            resp.authResponse.response.auth_method_name = method
            resp.authResponse.response.auth_data = data
            self.send_command(resp)
        elif t == T.REACHED_END_OF_TOPIC:
            pass  # nothing to do: receive() simply keeps waiting
        else:
            log.debug("ignoring %s from %s", T.Type.Name(t), self.url)

    def _broker_url(self, plain: str, tls: str) -> str | None:
        """The broker URL a command names for this client: TLS if it uses TLS."""
        return (tls if self.config.use_tls else plain) or None

    def _handle_response(self, t: int, sub: Any, cmd: Any) -> None:
        if not sub.HasField("request_id"):
            return
        rid = sub.request_id
        if (
            t == T.PRODUCER_SUCCESS
            and sub.HasField("producer_ready")
            and not sub.producer_ready
        ):
            return  # queued for exclusive access: the real answer comes later
        if t == T.PARTITIONED_METADATA_RESPONSE and (
            not sub.HasField("response") or sub.response == sub.Failed
        ):
            self._resolve(
                rid,
                error=error_for_code(
                    sub.error, sub.message or "partition metadata failed"
                ),
            )
            return
        if t in (T.GET_SCHEMA_RESPONSE, T.CONSUMER_STATS_RESPONSE) and sub.HasField(
            "error_code"
        ):
            self._resolve(rid, error=error_for_code(sub.error_code, sub.error_message))
            return
        if t in _ERROR_IN_RESPONSE and sub.HasField("error"):
            self._resolve(rid, error=error_for_code(sub.error, sub.message))
            return
        self._resolve(rid, result=cmd)


# How long closing a client waits for its sockets to close (a TLS connection
# exchanges close_notify with the broker first).
CLOSE_WAIT_S = 2.0


class ConnectionPool:
    """At most one live connection per broker URL, shared by everything on it."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._conns: dict[str, ClientConnection] = {}
        self._connecting: dict[str, asyncio.Future[ClientConnection]] = {}
        self._closed = False
        self._closing: list[ClientConnection] = []

    async def get(self, url: str) -> ClientConnection:
        """A ready connection to ``url``, reusing the pooled one if it is alive.

        Raises:
            ConnectError: TCP connect or the handshake failed or timed out.
        """
        if self._closed:
            raise ConnectError("client is closed")
        conn = self._conns.get(url)
        if conn is not None and conn.is_ready:
            return conn
        pending = self._connecting.get(url)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[ClientConnection] = (
            asyncio.get_running_loop().create_future()
        )
        self._connecting[url] = fut
        try:
            conn = await self._open(url)
        except BaseException as exc:
            err = (
                exc
                if isinstance(exc, QuasarError)
                else ConnectError(f"cannot connect to {url}: {exc}")
            )
            fut.set_exception(err)
            fut.exception()
            raise err from None
        finally:
            self._connecting.pop(url, None)
        self._conns[url] = conn
        fut.set_result(conn)
        return conn

    async def _open(self, url: str) -> ClientConnection:
        timeout_s = self.config.connection_timeout_ms / 1000.0
        loop = asyncio.get_running_loop()
        last: BaseException | None = None
        tls = self.config.ssl_context() if is_tls_url(url) else None
        for host, port in parse_service_url(url):
            try:
                if tls is None:
                    _, protocol = await asyncio.wait_for(
                        loop.create_connection(
                            lambda: ClientConnection(url, self.config), host, port
                        ),
                        timeout_s,
                    )
                else:
                    protocol = await self._open_tls(url, host, port, tls, timeout_s)
            except (TimeoutError, OSError) as exc:
                last = exc
                continue
            assert isinstance(protocol, ClientConnection)
            await protocol.wait_connected(timeout_s)
            return protocol
        raise ConnectError(f"cannot connect to {url}: {last}")

    async def _open_tls(
        self, url: str, host: str, port: int, tls: ssl.SSLContext, timeout_s: float
    ) -> ClientConnection:
        """Connect and complete the TLS handshake; the socket is closed if it fails.

        Raises:
            OSError: connecting or the handshake failed (``ssl.SSLError``: a
                certificate that is not trusted or does not name ``host``).
            TimeoutError: either took longer than ``timeout_s``.
        """
        loop = asyncio.get_running_loop()
        connection = ClientConnection(url, self.config)
        # server_hostname: the name to check the certificate against (when
        # tls_validate_hostname) and to send as SNI.
        layer = TlsLayer(
            connection,
            tls,
            server_side=False,
            server_hostname=host,
            handshake_timeout_s=timeout_s,
        )
        try:
            await asyncio.wait_for(
                loop.create_connection(lambda: layer, host, port), timeout_s
            )
            await asyncio.wait_for(asyncio.shield(layer.handshake), timeout_s)
        except BaseException:
            layer.abort()
            raise
        return connection

    def close(self) -> None:
        self._closed = True
        self._closing = list(self._conns.values())
        for conn in self._closing:
            conn.close()
        self._conns.clear()

    async def wait_closed(self, timeout_s: float = CLOSE_WAIT_S) -> None:
        """After :meth:`close`: wait until the sockets are closed, at most
        ``timeout_s``; the ones still open then (a TLS peer that does not answer
        close_notify) are dropped."""
        closing, self._closing = self._closing, []
        waits = [asyncio.ensure_future(c.lost.wait()) for c in closing if c.is_connected_transport]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=timeout_s)
            for task in pending:
                task.cancel()
        for conn in closing:
            if not conn.lost.is_set():
                conn.abort()
