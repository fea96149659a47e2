"""The coordinator → participant calls over the wire (``TransactionBufferClient``).

In one process the coordinator calls topics directly (``LocalTransactionBufferClient``
in ``quasar.broker.transactions``). When the partition or subscription lives on another
broker, the same calls travel as END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION over a
Pulsar connection to that broker, which routes them to the same topic methods. This
client keeps one connection per broker URL, correlates responses by request id, and
turns error responses into ``quasar.errors`` exceptions carrying ``retryable``, which is
what the coordinator's end fan-out retries on. A lost connection fails the calls in
flight with a retryable error; the coordinator sends them again (participants are
idempotent). ``lookup`` asks a broker where a topic lives (LOOKUP), so a cluster
member can follow redirects to a participant's owner (``cluster_transactions.py``).
With ``auth`` the connection authenticates as the broker's own role (CONNECT's
``auth_method_name`` and ``auth_data``), which the receiving broker requires of
END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION when authorization is on. With
``tls`` (a client ``SSLContext``) it reaches ``pulsar+ssl://`` URLs only, and without
it ``pulsar://`` URLs only: a URL of the other kind is refused (retryably), never
reached over the transport it did not ask for.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from collections.abc import Callable

from quasar.errors import ServiceNotReady, error_for_code
from quasar.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    PROTOCOL_VERSION_MAX,
    FrameDecoder,
    encode_command,
    pb,
)
from quasar.protocol.txn_id import TxnID
from quasar.transaction.txn_status import TxnAction
from quasar.transport.keep_alive import PONG_FRAME
from quasar.transport.writer import FrameWriter

T = pb.BaseCommand
CLIENT_VERSION = "quasar-broker-txn-client"
REQUEST_TIMEOUT_S = 30.0  # operation timeout, as the Pulsar clients use
PLAIN_SCHEME = "pulsar://"
TLS_SCHEME = "pulsar+ssl://"


class _BrokerConnection(asyncio.Protocol):
    def __init__(
        self,
        on_lost: Callable[[_BrokerConnection], None],
        auth: tuple[str, bytes] | None = None,
    ) -> None:
        self._auth = auth
        self._decoder = FrameDecoder(DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING)
        self._transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        # An end fans out to many partitions at once: their requests to one broker
        # leave together, as the client's and the broker's own frames do.
        self._writer = FrameWriter(loop)
        self._pending: dict[int, asyncio.Future[pb.BaseCommand]] = {}
        self.connected: asyncio.Future[None] = loop.create_future()
        self._on_lost = on_lost
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._writer.attach(self._transport)  # type: ignore[arg-type]
        cmd = T(type=T.CONNECT)
        cmd.connect.client_version = CLIENT_VERSION
        cmd.connect.protocol_version = PROTOCOL_VERSION_MAX
        if self._auth is not None:
            cmd.connect.auth_method_name, cmd.connect.auth_data = self._auth
        self.write(cmd)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except Exception as exc:  # a broken peer: fail everything, reconnect later
            self._fail(ServiceNotReady(f"bad frame from broker: {exc}"))
            if self._transport is not None:
                self._transport.close()
            return
        for frame in frames:
            cmd = frame.command
            if cmd.type == T.CONNECTED:
                if not self.connected.done():
                    self.connected.set_result(None)
            elif cmd.type == T.PING:
                self._writer.write(PONG_FRAME)
            elif cmd.type in (T.END_TXN_ON_PARTITION_RESPONSE, T.END_TXN_ON_SUBSCRIPTION_RESPONSE):
                resp = (
                    cmd.endTxnOnPartitionResponse
                    if cmd.type == T.END_TXN_ON_PARTITION_RESPONSE
                    else cmd.endTxnOnSubscriptionResponse
                )
                fut = self._pending.pop(resp.request_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
            elif cmd.type == T.LOOKUP_RESPONSE:
                fut = self._pending.pop(cmd.lookupTopicResponse.request_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
            elif cmd.type == T.ERROR:
                fut = self._pending.pop(cmd.error.request_id, None)
                if fut is not None and not fut.done():
                    fut.set_exception(error_for_code(cmd.error.error, cmd.error.message))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._writer.discard()
        self._fail(ServiceNotReady(f"connection to broker lost: {exc}"))
        if not self.connected.done():
            self.connected.set_exception(ServiceNotReady("broker closed the connection"))
        self._on_lost(self)

    def _fail(self, exc: BaseException) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    def write(self, cmd: pb.BaseCommand) -> None:
        self._writer.write(encode_command(cmd))

    async def request(self, request_id: int, cmd: pb.BaseCommand) -> pb.BaseCommand:
        fut: asyncio.Future[pb.BaseCommand] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        self.write(cmd)
        try:
            return await asyncio.wait_for(fut, REQUEST_TIMEOUT_S)
        except TimeoutError:
            raise ServiceNotReady(f"no answer to request {request_id}") from None
        finally:
            self._pending.pop(request_id, None)

    def close(self) -> None:
        self._writer.close()
        if self._transport is not None:
            self._transport.close()


class RemoteTransactionBufferClient:
    """``TransactionBufferClient`` over Pulsar connections to participant brokers.

    ``broker_url_for(topic)`` names the broker that owns a topic (``pulsar://host:port``);
    in a cluster it is a lookup, for a test it can be a constant.
    """

    def __init__(
        self,
        broker_url_for: Callable[[str], str],
        auth: tuple[str, bytes] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``auth``: the authentication method's name and data CONNECT carries;
        ``tls``: the context of ``pulsar+ssl://`` connections (``None``: plaintext)."""
        self._url_for = broker_url_for
        self._auth = auth
        self._tls = tls
        self._connections: dict[str, _BrokerConnection] = {}
        self._connecting: dict[str, asyncio.Task[_BrokerConnection]] = {}
        self._request_ids = itertools.count(1)

    async def _connection(self, url: str) -> _BrokerConnection:
        conn = self._connections.get(url)
        if conn is not None and not conn.closed:
            return conn
        task = self._connecting.get(url)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(url))
            self._connecting[url] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._connecting.pop(url, None)

    async def _connect(self, url: str) -> _BrokerConnection:
        scheme = TLS_SCHEME if self._tls is not None else PLAIN_SCHEME
        if not url.startswith(scheme):
            raise ServiceNotReady(
                f"broker URL {url} is not {scheme}..., the only kind this broker "
                "connects to (brokerClientTlsEnabled)"
            )
        host, port = url.removeprefix(scheme).rsplit(":", 1)
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(
                lambda: _BrokerConnection(self._forget, self._auth),
                host,
                int(port),
                ssl=self._tls,
                server_hostname=host if self._tls is not None else None,
                ssl_handshake_timeout=REQUEST_TIMEOUT_S if self._tls is not None else None,
            )
            await asyncio.wait_for(conn.connected, REQUEST_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError) as exc:
            # OSError covers ssl.SSLError: an untrusted certificate is retried like
            # an unreachable broker, with its reason in the message.
            raise ServiceNotReady(f"cannot reach broker {url}: {exc}") from None
        self._connections[url] = conn
        return conn

    def _forget(self, conn: _BrokerConnection) -> None:
        for url, c in list(self._connections.items()):
            if c is conn:
                del self._connections[url]

    async def lookup(
        self, url: str, topic: str, authoritative: bool
    ) -> pb.CommandLookupTopicResponse:
        """The LOOKUP answer of the broker at ``url`` for ``topic``.

        Raises:
            ServiceNotReady: the broker cannot be reached or did not answer.
        """
        rid = next(self._request_ids)
        cmd = T(type=T.LOOKUP)
        cmd.lookupTopic.request_id, cmd.lookupTopic.topic = rid, topic
        cmd.lookupTopic.authoritative = authoritative
        conn = await self._connection(url)
        return (await conn.request(rid, cmd)).lookupTopicResponse

    async def end_txn_on_partition(
        self, topic: str, txn_id: TxnID, action: TxnAction, low_watermark: int
    ) -> None:
        await self.end_txn_on_partition_at(
            self._url_for(topic), topic, txn_id, action, low_watermark
        )

    async def end_txn_on_partition_at(
        self, url: str, topic: str, txn_id: TxnID, action: TxnAction, low_watermark: int
    ) -> None:
        """END_TXN_ON_PARTITION to the broker at ``url``.

        Raises:
            QuasarError: the broker's error (with its code), or ServiceNotReady.
        """
        rid = next(self._request_ids)
        cmd = T(type=T.END_TXN_ON_PARTITION)
        c = cmd.endTxnOnPartition
        c.request_id, c.topic, c.txn_action = rid, topic, int(action)
        c.txnid_most_bits, c.txnid_least_bits = txn_id.most_bits, txn_id.least_bits
        if low_watermark >= 0:  # uint64 on the wire: "nothing ended yet" is left out
            c.txnid_least_bits_of_low_watermark = low_watermark
        conn = await self._connection(url)
        _raise_if_error((await conn.request(rid, cmd)).endTxnOnPartitionResponse)

    async def end_txn_on_subscription(
        self,
        topic: str,
        subscription: str,
        txn_id: TxnID,
        action: TxnAction,
        low_watermark: int,
    ) -> None:
        await self.end_txn_on_subscription_at(
            self._url_for(topic), topic, subscription, txn_id, action, low_watermark
        )

    async def end_txn_on_subscription_at(
        self,
        url: str,
        topic: str,
        subscription: str,
        txn_id: TxnID,
        action: TxnAction,
        low_watermark: int,
    ) -> None:
        """END_TXN_ON_SUBSCRIPTION to the broker at ``url``; raises as
        ``end_txn_on_partition_at``."""
        rid = next(self._request_ids)
        cmd = T(type=T.END_TXN_ON_SUBSCRIPTION)
        c = cmd.endTxnOnSubscription
        c.request_id, c.txn_action = rid, int(action)
        c.subscription.topic, c.subscription.subscription = topic, subscription
        c.txnid_most_bits, c.txnid_least_bits = txn_id.most_bits, txn_id.least_bits
        if low_watermark >= 0:
            c.txnid_least_bits_of_low_watermark = low_watermark
        conn = await self._connection(url)
        _raise_if_error((await conn.request(rid, cmd)).endTxnOnSubscriptionResponse)

    async def close(self) -> None:
        for conn in list(self._connections.values()):
            conn.close()
        self._connections.clear()


def _raise_if_error(resp: pb.CommandEndTxnOnPartitionResponse) -> None:
    """Raises: the ``quasar.errors`` class of the response's error code, if any."""
    if resp.HasField("error"):
        raise error_for_code(resp.error, resp.message)
