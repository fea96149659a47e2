"""The client connection's write buffering: small frames of one loop iteration leave in
one write at its end, and a large amount buffered leaves at once, in order."""

from __future__ import annotations

import asyncio
from typing import Any

from quasar.client.config import ClientConfig
from quasar.client.connection import ClientConnection
from quasar.protocol import EAGER_FLUSH_BYTES


class _Transport:
    """Records what is written; one list entry per transport call."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def write(self, data: Any) -> None:
        self.calls.append(bytes(data))

    def writelines(self, parts: Any) -> None:
        self.calls.append(b"".join(bytes(p) for p in parts))

    def get_extra_info(self, name: str) -> None:
        return None

    def close(self) -> None:
        pass


async def _connection() -> tuple[ClientConnection, _Transport]:
    conn = ClientConnection("pulsar://127.0.0.1:6650", ClientConfig("pulsar://127.0.0.1:6650"))
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    await asyncio.sleep(0)  # the CONNECT frame leaves at the end of this iteration
    transport.calls.clear()
    return conn, transport


async def test_small_frames_leave_together_at_the_end_of_the_iteration() -> None:
    conn, transport = await _connection()
    conn.write(b"a" * 100)
    conn.write_parts((b"b" * 10, b"c" * 20))
    assert transport.calls == []
    await asyncio.sleep(0)
    assert transport.calls == [b"a" * 100 + b"b" * 10 + b"c" * 20]


async def test_a_large_amount_buffered_leaves_at_once_in_order() -> None:
    conn, transport = await _connection()
    small = b"s" * 100
    head, payload = b"h" * 50, b"p" * EAGER_FLUSH_BYTES
    conn.write(small)
    conn.write_parts((head, payload))
    # Written during the call, behind the frame buffered before it.
    assert transport.calls == [small + head + payload]
    conn.write(b"t" * 10)
    assert len(transport.calls) == 1
    await asyncio.sleep(0)
    assert transport.calls == [small + head + payload, b"t" * 10]


async def test_the_count_restarts_after_each_write() -> None:
    conn, transport = await _connection()
    half = b"x" * (EAGER_FLUSH_BYTES // 2 + 1)
    conn.write(half)
    conn.write(half)  # the two together pass the threshold
    assert transport.calls == [half + half]
    conn.write(half)  # alone it does not
    assert len(transport.calls) == 1
    await asyncio.sleep(0)
    assert transport.calls == [half + half, half]
