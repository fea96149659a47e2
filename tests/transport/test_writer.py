"""The coalescing ``FrameWriter`` both connections write through: what leaves when, in
which transport call, and what happens around close and flow control."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from quasar.protocol import EAGER_FLUSH_BYTES
from quasar.transport.writer import GATHER_PIECE_BYTES_MIN, FrameWriter, gather


class _Transport:
    """Records each transport call with the buffers it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def write(self, data: Any) -> None:
        self.calls.append(("write", data))

    def writelines(self, parts: Any) -> None:
        self.calls.append(("writelines", list(parts)))

    def sent(self) -> list[bytes]:
        """One bytes object per call."""
        return [
            bytes(data) if kind == "write" else b"".join(bytes(p) for p in data)
            for kind, data in self.calls
        ]


def _writer() -> tuple[FrameWriter, _Transport]:
    writer = FrameWriter(asyncio.get_running_loop())
    transport = _Transport()
    writer.attach(transport)  # type: ignore[arg-type]
    return writer, transport


async def test_frames_of_one_iteration_leave_in_one_write_at_its_end() -> None:
    writer, transport = _writer()
    writer.write(b"a" * 100)
    writer.write(b"b" * 200)
    assert transport.calls == []
    await asyncio.sleep(0)
    assert transport.calls == [("write", b"a" * 100 + b"b" * 200)]


async def test_a_single_frame_is_written_as_it_is() -> None:
    writer, transport = _writer()
    frame = bytearray(b"f" * 10)
    writer.write(frame)
    await asyncio.sleep(0)
    assert len(transport.calls) == 1 and transport.calls[0][1] is frame


async def test_a_large_amount_buffered_leaves_at_once_in_order() -> None:
    writer, transport = _writer()
    receipt, batch = b"r" * 40, b"m" * (EAGER_FLUSH_BYTES - 40)
    writer.write(receipt)
    writer.write(batch)  # the two reach the threshold together
    assert transport.sent() == [receipt + batch]
    writer.write(b"t" * 10)  # counted afresh: waits for the end of the iteration
    assert len(transport.calls) == 1
    await asyncio.sleep(0)
    assert transport.sent() == [receipt + batch, b"t" * 10]


async def test_after_an_eager_flush_the_pending_end_of_iteration_flush_is_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    scheduled: list[object] = []
    call_soon = loop.call_soon

    def counting_call_soon(callback: Any, *args: Any, **kwargs: Any) -> asyncio.Handle:
        scheduled.append(callback)
        return call_soon(callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_soon", counting_call_soon)
    writer, transport = _writer()
    writer.write(b"s")  # schedules the end-of-iteration flush
    writer.write(b"x" * EAGER_FLUSH_BYTES)
    writer.write(b"t")
    assert len(scheduled) == 1
    monkeypatch.undo()
    await asyncio.sleep(0)
    assert transport.sent() == [b"s" + b"x" * EAGER_FLUSH_BYTES, b"t"]


async def test_pieces_keep_large_buffers_apart_in_one_writelines() -> None:
    writer, transport = _writer()
    small = b"s" * 100
    head, payload = b"h" * 50, memoryview(b"p" * GATHER_PIECE_BYTES_MIN)
    writer.write(small)
    writer.write_parts((head, payload))
    await asyncio.sleep(0)
    ((kind, parts),) = transport.calls
    assert kind == "writelines"
    assert parts[0] == small + head
    assert parts[1] is payload  # the batch is not copied
    assert transport.sent() == [small + head + bytes(payload)]


async def test_write_parts_count_towards_the_eager_flush() -> None:
    writer, transport = _writer()
    writer.write(b"s" * 100)
    writer.write_parts((b"h" * 50, b"p" * EAGER_FLUSH_BYTES))
    assert transport.sent() == [b"s" * 100 + b"h" * 50 + b"p" * EAGER_FLUSH_BYTES]


async def test_frames_are_dropped_before_attach_and_after_close() -> None:
    writer = FrameWriter(asyncio.get_running_loop())
    writer.write(b"early")
    assert not writer.is_open
    transport = _Transport()
    writer.attach(transport)  # type: ignore[arg-type]
    writer.write(b"buffered")
    writer.close()  # what is buffered leaves first
    assert transport.sent() == [b"buffered"]
    writer.write(b"late")
    writer.write_parts((b"la", b"te"))
    await asyncio.sleep(0)
    assert transport.sent() == [b"buffered"]


async def test_discard_drops_what_is_buffered() -> None:
    writer, transport = _writer()
    writer.write(b"x")
    writer.discard()
    await asyncio.sleep(0)
    writer.write(b"y")
    await asyncio.sleep(0)
    assert transport.calls == []


async def test_a_frame_written_from_inside_the_transport_write_is_kept() -> None:
    writer, transport = _writer()
    original = transport.write

    def reentrant(data: Any) -> None:
        original(data)
        if data == b"first":
            writer.write(b"second")

    transport.write = reentrant  # type: ignore[method-assign]
    writer.write(b"first")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert transport.sent() == [b"first", b"second"]


async def test_a_non_positive_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="eager_flush_bytes"):
        FrameWriter(asyncio.get_running_loop(), eager_flush_bytes=0)


def test_gather_joins_runs_of_small_pieces_only() -> None:
    big = b"B" * GATHER_PIECE_BYTES_MIN
    assert gather([]) == []
    assert gather([b"a", b"b"]) == [b"ab"]
    out = gather([b"a", big, b"b", b"c", big, b"d"])
    assert out == [b"a", big, b"bc", big, b"d"]
    assert out[1] is big
