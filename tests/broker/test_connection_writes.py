"""The broker connection's write buffering: frames of one loop iteration leave in one
write at its end, and a large amount buffered (message batches for consumers) leaves
at once, in order."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from quasar.config import ServiceConfiguration
from quasar.protocol import EAGER_FLUSH_BYTES
from quasar.server.connection import ServerConnection


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


def _connection() -> tuple[ServerConnection, _Transport]:
    service = SimpleNamespace(config=ServiceConfiguration())
    conn = ServerConnection(service, keep_alive_s=0)  # type: ignore[arg-type]
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


async def test_small_frames_leave_together_at_the_end_of_the_iteration() -> None:
    conn, transport = _connection()
    conn.write(b"a" * 100)
    conn.write(b"b" * 200)
    assert transport.writes == []
    await asyncio.sleep(0)
    assert transport.writes == [b"a" * 100 + b"b" * 200]


async def test_a_large_amount_buffered_leaves_at_once_in_order() -> None:
    conn, transport = _connection()
    receipt, batch = b"r" * 40, b"m" * (EAGER_FLUSH_BYTES - 40)
    conn.write(receipt)
    conn.write(batch)  # the two reach the threshold together
    assert transport.writes == [receipt + batch]
    conn.write(b"t" * 10)  # counted afresh: waits for the end of the iteration
    assert len(transport.writes) == 1
    await asyncio.sleep(0)
    assert transport.writes == [receipt + batch, b"t" * 10]
