"""What a command handler needs from the client connection it serves.

The broker side of a connection is split in two: ``ServerConnection`` (``connection.py``)
owns the socket, the handshake, keep-alive, back-pressure and dispatch; the handler
objects (``producer_commands``, ``consumer_commands``, ``lookup_commands``,
``txn_commands``) turn each decoded command into calls on the broker and an
answer. They see the connection only through ``ConnectionContext`` below, so they import
nothing of ``connection.py`` and can be tested over a fake context.

The context also satisfies what the broker's ``Producer`` and ``Consumer`` keep of their
connection (write a frame, close a producer or consumer, the peer's address and client
version), so a handler can hand the context to them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from quasar.auth.authorization import AuthorizationService
from quasar.broker.consumer import Consumer, WriteState
from quasar.broker.hostile_input import HostileInputRefusals
from quasar.broker.non_persistent_topics import ServedTopic
from quasar.broker.producer import Producer
from quasar.broker.service import BrokerService
from quasar.config import BrokerConfig
from quasar.protocol import Frame, pb

from .limits import ConnectionLimits

__all__ = ["CommandHandler", "ConnectionContext"]

# Handles one decoded command; raising ProtocolError closes the connection.
CommandHandler = Callable[[pb.BaseCommand, Frame], None]


class ConnectionContext(Protocol):
    """One client connection, as its command handlers use it."""

    service: BrokerService
    # The broker section of the configuration (limits, advertised URLs).
    settings: BrokerConfig
    # The authenticated role (None: no authentication configured).
    principal: str | None
    # What roles may do; asked before a topic is looked up, produced to or consumed.
    authorization: AuthorizationService
    # The client certificate verified in the TLS handshake, as ssl decodes it
    # (``subject``, ``issuer``, ``notAfter``...); None on plaintext or without one.
    peer_certificate: dict[str, Any] | None
    # Producers and consumers created on this connection, by the client's ids; the
    # futures are set once creation succeeded, so a retried request can be told apart
    # from a second one with the same id.
    producers: dict[int, tuple[Producer, ServedTopic]]
    producer_futures: dict[int, asyncio.Future[None]]
    consumers: dict[int, tuple[Consumer, ServedTopic]]
    consumer_futures: dict[int, asyncio.Future[None]]
    # The broker's limits on connections, producers and consumers (shared by every
    # connection), and this connection's write state, which its consumers share:
    # dispatch to them stops while its write buffer is full.
    limits: ConnectionLimits
    write_state: WriteState
    # The broker's count of refused hostile input: a handler passes every failure it
    # answers through ``refusals.counted``, which counts those a check tagged.
    refusals: HostileInputRefusals

    @property
    def closed(self) -> bool:
        """Whether the connection is closed or closing (answers are dropped)."""
        ...

    @property
    def remote_address(self) -> str:
        """The peer as ``host:port``."""
        ...

    @property
    def client_version(self) -> str: ...

    @property
    def protocol_version(self) -> int:
        """The protocol version agreed in the handshake."""
        ...

    def write(self, frame: bytes) -> None:
        """Send an encoded frame (coalesced with the others of this loop iteration)."""
        ...

    def send_command(self, cmd: pb.BaseCommand) -> None:
        """Encode and send a command without payload."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a handler that has to wait (topic load, storage); it is cancelled when
        the connection closes, and a failure is logged."""
        ...

    def publish_started(self) -> None:
        """A SEND awaits its receipt (counts towards publish back-pressure)."""
        ...

    def publish_completed(self) -> None:
        """A SEND was answered, receipt or error."""
        ...

    def close_producer(self, producer_id: int) -> None:
        """Broker-initiated close: tell the client to re-create the producer."""
        ...

    def close_consumer(self, consumer_id: int) -> None:
        """Broker-initiated close: tell the client to re-create the consumer."""
        ...
