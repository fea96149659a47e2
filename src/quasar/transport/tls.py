"""The TLS layer in front of a connection's protocol, shared by the client and the
broker.

``TlsLayer`` is asyncio's own TLS protocol (the one ``create_server(ssl=...)`` and
``create_connection(ssl=...)`` put in front of an application protocol), made the
socket's protocol directly so that its owner learns the peer's address and how the
handshake ended: ``handshake`` completes when the application protocol has been
connected, or fails with the handshake's error, after which the socket is closed.

Both ends need that. The broker logs a failed handshake (a plaintext client on the TLS
port, a missing or untrusted client certificate) with the peer's address, which
asyncio keeps to its debug log. The client closes the socket of a failed handshake
itself, because an event loop's own TLS connect may leave it open.
"""

from __future__ import annotations

import asyncio
import math
import ssl
from asyncio.sslproto import SSLProtocol

__all__ = ["TLS_HANDSHAKE_TIMEOUT_S", "TlsLayer", "handshake_failure_reason"]

# How long a peer may take to finish the TLS handshake (asyncio's default too).
TLS_HANDSHAKE_TIMEOUT_S = 60.0


class TlsLayer(SSLProtocol):
    """TLS in front of ``app_protocol``; see the module docstring.

    ``server_hostname`` (client side) is the name the certificate is checked
    against when the context checks host names, and the name sent as SNI.
    """

    def __init__(
        self,
        app_protocol: asyncio.BaseProtocol,
        context: ssl.SSLContext,
        *,
        server_side: bool,
        server_hostname: str | None = None,
        handshake_timeout_s: float = TLS_HANDSHAKE_TIMEOUT_S,
    ) -> None:
        loop = asyncio.get_running_loop()
        self.handshake: asyncio.Future[None] = loop.create_future()
        super().__init__(
            loop,
            app_protocol,
            context,
            self.handshake,
            server_side=server_side,
            server_hostname=server_hostname,
            # Whole seconds, as asyncio's signature declares it.
            ssl_handshake_timeout=max(1, math.ceil(handshake_timeout_s)),
        )
        self.remote_address = "unknown"
        self._raw: asyncio.BaseTransport | None = None
        self.handshake.add_done_callback(self._handshake_done)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._raw = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.remote_address = f"{peer[0]}:{peer[1]}"
        super().connection_made(transport)

    def _handshake_done(self, handshake: asyncio.Future[None]) -> None:
        if handshake.cancelled() or handshake.exception() is not None:
            self.abort()

    def abort(self) -> None:
        """Close the socket at once (a failed or abandoned handshake)."""
        if self._raw is not None and not self._raw.is_closing():
            self._raw.abort()  # type: ignore[attr-defined]


def handshake_failure_reason(e: BaseException) -> str:
    """A one-line reason for a failed handshake (OpenSSL's reason when there is one)."""
    if isinstance(e, TimeoutError):
        return "no handshake within the timeout"
    if isinstance(e, ssl.SSLError) and e.reason:
        return str(e.reason)
    return str(e) or type(e).__name__
