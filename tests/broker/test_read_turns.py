"""The broker connection's read turns: after a large read it stops reading for one loop
turn, so storage completions, receipts and dispatch run between a client's bursts; and
the turn never resumes reading that publish back-pressure has paused. A read of many
frames is handled a bounded number of frames per turn, the rest waiting (and waiting
for publish back-pressure to lift, as unread bytes would)."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace
from typing import Any

from quasar.config import ServiceConfiguration
from quasar.protocol import encode_command, pb
from quasar.server.connection import (
    FRAMES_PER_TURN,
    YIELD_AFTER_READ_BYTES,
    ServerConnection,
)

T = pb.BaseCommand


class FakeTransport:
    """Records what the connection asked of it, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _connection(max_pending_publish: int = 1000) -> tuple[ServerConnection, FakeTransport]:
    # No command reaches the service in these tests (only part of one large frame is
    # fed): the connection reads nothing of it but its configuration.
    service = SimpleNamespace(config=ServiceConfiguration())
    conn = ServerConnection(service, max_pending_publish, keep_alive_s=0)  # type: ignore[arg-type]
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def _partial_frame(nbytes: int) -> bytes:
    """The first ``nbytes`` of a frame that needs more: buffered, nothing handled."""
    return struct.pack(">I", 1024 * 1024) + b"\0" * (nbytes - 4)


async def _one_turn() -> None:
    # call_soon callbacks queued before this run before it resumes.
    await asyncio.sleep(0)


async def test_a_large_read_gives_up_one_loop_turn() -> None:
    conn, transport = _connection()
    conn.data_received(_partial_frame(YIELD_AFTER_READ_BYTES))
    assert transport.calls == ["pause"]
    await _one_turn()
    assert transport.calls == ["pause", "resume"]


async def test_small_reads_do_not_pause() -> None:
    conn, transport = _connection()
    for _ in range(8):
        conn.data_received(_partial_frame(YIELD_AFTER_READ_BYTES // 8))
    await _one_turn()
    assert transport.calls == []


async def test_reads_within_one_turn_pause_once() -> None:
    conn, transport = _connection()
    conn.data_received(_partial_frame(YIELD_AFTER_READ_BYTES))
    # libuv may deliver a read it had already taken before the pause took effect.
    conn.data_received(b"\0" * YIELD_AFTER_READ_BYTES)
    await _one_turn()
    assert transport.calls == ["pause", "resume"]


async def test_the_end_of_a_turn_keeps_back_pressure() -> None:
    conn, transport = _connection(max_pending_publish=2)
    conn.publish_started()
    conn.publish_started()  # two sends in flight: back-pressure pauses reading
    assert transport.calls == ["pause"]
    conn.data_received(_partial_frame(YIELD_AFTER_READ_BYTES))  # already read by libuv
    await _one_turn()
    assert transport.calls == ["pause"], "the turn ended but back-pressure still holds"
    conn.publish_completed()  # one left in flight = half of the limit
    assert transport.calls == ["pause", "resume"]


async def test_back_pressure_released_during_a_turn_waits_for_its_end() -> None:
    conn, transport = _connection(max_pending_publish=2)
    conn.publish_started()
    conn.publish_started()
    conn.data_received(_partial_frame(YIELD_AFTER_READ_BYTES))
    conn.publish_completed()
    assert transport.calls == ["pause"], "the yielded turn still holds reading"
    await _one_turn()
    assert transport.calls == ["pause", "resume"]


async def test_a_closed_connection_is_not_resumed() -> None:
    conn, transport = _connection()
    conn.data_received(_partial_frame(YIELD_AFTER_READ_BYTES))
    conn.connection_lost(None)
    await _one_turn()
    assert transport.calls == ["pause"]


def _connected(max_pending_publish: int = 1000) -> tuple[ServerConnection, FakeTransport, list[int]]:
    """A connection past its handshake whose PING handler records each PING."""
    conn, transport = _connection(max_pending_publish)
    connect = T(type=T.CONNECT)
    connect.connect.client_version, connect.connect.protocol_version = "test", 20
    conn.data_received(encode_command(connect))
    handled: list[int] = []
    conn._handlers[T.PING] = lambda c, f: handled.append(1)
    return conn, transport, handled


async def test_a_read_of_many_frames_is_handled_a_turn_at_a_time() -> None:
    conn, transport, handled = _connected()
    ping = encode_command(T(type=T.PING))
    conn.data_received(ping * (2 * FRAMES_PER_TURN + 100))
    assert len(handled) == FRAMES_PER_TURN
    assert transport.calls == ["pause"], "nothing more is read while frames wait"
    # The rest waits as bytes, decoded a turn's share at a time, not all at once.
    assert conn._decoder.buffered_bytes == len(ping) * (FRAMES_PER_TURN + 100)
    await _one_turn()
    assert len(handled) == 2 * FRAMES_PER_TURN
    await _one_turn()
    assert len(handled) == 2 * FRAMES_PER_TURN + 100
    assert transport.calls == ["pause", "resume"]


async def test_frames_left_of_a_read_wait_for_publish_back_pressure_to_lift() -> None:
    conn, transport, handled = _connected(max_pending_publish=100)
    conn._handlers[T.PING] = lambda c, f: (handled.append(1), conn.publish_started())
    conn.data_received(encode_command(T(type=T.PING)) * (2 * FRAMES_PER_TURN))
    assert len(handled) == FRAMES_PER_TURN  # the first turn's share went through
    for _ in range(3):
        await _one_turn()
    assert len(handled) == FRAMES_PER_TURN, "held while too many sends are in flight"
    while conn.pending_publish > 50:
        conn.publish_completed()
    await _one_turn()
    assert len(handled) == 2 * FRAMES_PER_TURN
