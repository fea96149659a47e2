"""What both ends of a Pulsar connection do with their socket, shared by the client and
the broker: coalesced frame writes (``writer``), the PING/PONG keep-alive
(``keep_alive``) and the TLS layer in front of a connection (``tls``).

The package sits above the sans-IO ``quasar.protocol`` (it uses asyncio) and below
``quasar.client`` and ``quasar.server``, which build their connections on it.
"""

from __future__ import annotations

from quasar.transport.keep_alive import PING_FRAME, PONG_FRAME, KeepAlive, Silence
from quasar.transport.writer import FrameWriter

__all__ = ["PING_FRAME", "PONG_FRAME", "FrameWriter", "KeepAlive", "Silence"]
