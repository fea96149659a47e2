"""FrameDecoder and the generic encoders."""

from __future__ import annotations

import struct

import pytest

from quasar.errors import (
    FrameTooLarge,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)
from quasar.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    Frame,
    FrameDecoder,
    crc32c,
    encode_command,
    encode_message,
    encode_payload_command,
    make_entry,
    parse_entry,
    pb,
)

from ._helpers import T, lookup_response, message_cmd, metadata, ping, send_cmd

LIMIT = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING


def decode_all(data: bytes, limit: int = LIMIT) -> list[Frame]:
    return FrameDecoder(limit).feed(data)


def test_simple_command_layout() -> None:
    frame = encode_command(ping())
    body = ping().SerializeToString()
    assert frame == struct.pack(">II", len(body) + 4, len(body)) + body
    [decoded] = decode_all(frame)
    assert decoded.command == ping()
    assert decoded.type == T.PING
    assert decoded.payload is None and decoded.checksum_ok is None


def test_send_with_checksum_layout_and_roundtrip() -> None:
    meta = metadata(partition_key="k")
    frame = encode_message(send_cmd(), meta, b"hello")
    cmd = send_cmd().SerializeToString()
    meta_bytes = meta.SerializeToString()
    covered = struct.pack(">I", len(meta_bytes)) + meta_bytes + b"hello"
    expected_entry = b"\x0e\x01" + struct.pack(">I", crc32c(covered)) + covered
    assert frame == struct.pack(
        ">II", 4 + len(cmd) + len(expected_entry), len(cmd)
    ) + cmd + (expected_entry)
    [decoded] = decode_all(frame)
    assert decoded.command == send_cmd()
    assert decoded.payload == expected_entry
    assert decoded.checksum_ok is True
    parsed = parse_entry(decoded.payload)
    assert parsed.metadata == meta
    assert decoded.payload[parsed.payload_offset :] == b"hello"


def test_send_without_checksum() -> None:
    frame = encode_message(send_cmd(), metadata(), b"body", checksum=False)
    [decoded] = decode_all(frame)
    assert decoded.checksum_ok is None
    assert decoded.payload == make_entry(metadata(), b"body", checksum=False)
    assert decoded.payload[:4] == struct.pack(">I", metadata().ByteSize())


def test_checksum_mismatch_is_reported_not_raised() -> None:
    frame = bytearray(encode_message(send_cmd(), metadata(), b"payload!"))
    frame[-1] ^= 0xFF
    [decoded] = decode_all(bytes(frame))
    assert decoded.checksum_ok is False
    assert decoded.payload is not None and decoded.payload.endswith(b"payload\xde")


def test_message_frame_forwards_stored_entry_verbatim() -> None:
    entry = make_entry(metadata(num_messages_in_batch=3), b"x" * 100)
    frame = encode_payload_command(message_cmd(), entry)
    [decoded] = decode_all(frame)
    assert decoded.command == message_cmd()
    assert decoded.payload == entry
    assert decoded.checksum_ok is True


def test_broker_entry_metadata_prefix_is_skipped_and_exposed() -> None:
    bem = pb.BrokerEntryMetadata(broker_timestamp=1234, index=99).SerializeToString()
    entry = make_entry(metadata(), b"abc")
    section = b"\x0e\x02" + struct.pack(">I", len(bem)) + bem + entry
    [decoded] = decode_all(encode_payload_command(message_cmd(), section))
    assert decoded.broker_entry_metadata == bem
    assert decoded.payload == entry
    assert decoded.checksum_ok is True
    assert pb.BrokerEntryMetadata.FromString(bem).index == 99


def test_broker_entry_metadata_before_checksumless_entry() -> None:
    bem = pb.BrokerEntryMetadata(index=1).SerializeToString()
    entry = make_entry(metadata(), b"abc", checksum=False)
    section = b"\x0e\x02" + struct.pack(">I", len(bem)) + bem + entry
    [decoded] = decode_all(encode_payload_command(message_cmd(), section))
    assert decoded.payload == entry and decoded.checksum_ok is None


def _stream() -> tuple[bytes, list[pb.BaseCommand], list[bytes | None]]:
    entries = [make_entry(metadata(i), bytes([i]) * (i * 37)) for i in range(4)]
    frames = [
        encode_command(ping()),
        encode_payload_command(send_cmd(1, 0), entries[0]),
        encode_command(lookup_response()),
        encode_payload_command(message_cmd(), entries[1]),
        encode_message(send_cmd(2, 9), metadata(9), b"", checksum=False),
        encode_payload_command(send_cmd(1, 1), entries[3]),
        encode_command(pb.BaseCommand(type=T.PONG, pong=pb.CommandPong())),
    ]
    commands = [
        pb.BaseCommand.FromString(f[8 : 8 + struct.unpack(">I", f[4:8])[0]])
        for f in frames
    ]
    payloads: list[bytes | None] = []
    for f in frames:
        cmd_size = struct.unpack(">I", f[4:8])[0]
        rest = f[8 + cmd_size :]
        payloads.append(rest or None)
    return b"".join(frames), commands, payloads


def test_concatenated_frames_in_one_feed() -> None:
    stream, commands, payloads = _stream()
    decoded = decode_all(stream)
    assert [f.command for f in decoded] == commands
    assert [f.payload for f in decoded] == payloads


def test_split_at_every_byte_boundary() -> None:
    stream, commands, payloads = _stream()
    for cut in range(len(stream) + 1):
        decoder = FrameDecoder(LIMIT)
        decoded = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert [f.command for f in decoded] == commands, cut
        assert [f.payload for f in decoded] == payloads, cut
        assert decoder.buffered_bytes == 0


def test_byte_by_byte() -> None:
    stream, commands, payloads = _stream()
    decoder = FrameDecoder(LIMIT)
    decoded: list[Frame] = []
    for i in range(len(stream)):
        decoded += decoder.feed(stream[i : i + 1])
    assert [f.command for f in decoded] == commands
    assert [f.payload for f in decoded] == payloads


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_a_limit_leaves_whole_frames_as_bytes_for_later_calls(limit: int) -> None:
    stream, commands, payloads = _stream()
    for cut in range(0, len(stream) + 1, 7):
        decoder = FrameDecoder(LIMIT)
        decoded = decoder.feed(stream[:cut], limit)
        assert len(decoded) <= limit
        while decoder.has_frame:
            more = decoder.feed(b"", limit)
            assert 0 < len(more) <= limit
            decoded += more
        decoded += decoder.feed(stream[cut:])
        assert [f.command for f in decoded] == commands, cut
        assert [f.payload for f in decoded] == payloads, cut
        assert decoder.buffered_bytes == 0 and not decoder.has_frame


def test_has_frame_is_false_for_a_started_frame_only() -> None:
    ping_frame = encode_command(ping())
    decoder = FrameDecoder(LIMIT)
    assert decoder.feed(ping_frame * 2 + ping_frame[:5], 1) != []
    assert decoder.has_frame  # one whole PING left, then a started one
    assert len(decoder.feed(b"", 1)) == 1
    assert not decoder.has_frame
    assert decoder.buffered_bytes == 5


def test_an_oversized_frame_behind_a_limit_is_refused_on_the_next_call() -> None:
    decoder = FrameDecoder(1000)
    assert len(decoder.feed(encode_command(ping()) + struct.pack(">I", 5000), 1)) == 1
    assert decoder.has_frame, "the next call must refuse it without waiting for bytes"
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"", 1)
    assert not decoder.has_frame


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_accepts_any_bytes_like(kind: type) -> None:
    stream, commands, _ = _stream()
    decoder = FrameDecoder(LIMIT)
    half = len(stream) // 2
    decoded = decoder.feed(kind(stream[:half])) + decoder.feed(kind(stream[half:]))
    assert [f.command for f in decoded] == commands


def test_large_frames_in_small_reads_exercise_compaction() -> None:
    entry = make_entry(metadata(), b"z" * 300_000)
    frame = encode_payload_command(send_cmd(), entry)
    stream = encode_command(ping()) * 5000 + frame * 3 + encode_command(ping())
    decoder = FrameDecoder(LIMIT)
    decoded: list[Frame] = []
    for i in range(0, len(stream), 7001):
        decoded += decoder.feed(stream[i : i + 7001])
    assert len(decoded) == 5004
    assert [f.payload for f in decoded[5000:5003]] == [entry] * 3
    assert all(f.checksum_ok for f in decoded[5000:5003])
    assert decoder.buffered_bytes == 0


def test_frame_too_large_is_raised_from_the_header_alone() -> None:
    decoder = FrameDecoder(1000)
    with pytest.raises(FrameTooLarge):
        decoder.feed(struct.pack(">I", 997))  # 1001 bytes with the size field
    ok = FrameDecoder(1000)
    assert ok.feed(struct.pack(">I", 996)) == []


def test_limit_accepts_a_frame_of_exactly_the_limit() -> None:
    frame = encode_payload_command(send_cmd(), make_entry(metadata(), b"q" * 500))
    assert len(decode_all(frame, limit=len(frame))) == 1
    with pytest.raises(FrameTooLarge):
        decode_all(frame, limit=len(frame) - 1)


def _raw(total: int, cmd_size: int, body: bytes) -> bytes:
    return struct.pack(">II", total, cmd_size) + body


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(struct.pack(">I", 0), id="empty-frame"),
        pytest.param(struct.pack(">I", 2) + b"\x00\x00", id="no-command-size"),
        pytest.param(_raw(4 + 3, 10, b"abc"), id="command-size-beyond-frame"),
        pytest.param(_raw(4, 0, b""), id="empty-command"),
        pytest.param(_raw(7, 3, b"\xff\xff\xff"), id="undecodable"),
        pytest.param(_raw(6, 2, b"\x08\x01"), id="unknown-type-1"),
        pytest.param(_raw(6, 2, b"\x08\x2c"), id="unknown-type-44"),
        pytest.param(_raw(6, 2, b"\x08\x06"), id="send-without-send-field"),
        pytest.param(_raw(8, 4, b"\x08\x06\x32\x00"), id="send-missing-required"),
        pytest.param(encode_command(send_cmd()), id="send-without-metadata"),
        pytest.param(
            encode_payload_command(send_cmd(), b"\x0e\x01\x00\x00\x00"),
            id="truncated-checksum",
        ),
        pytest.param(
            encode_payload_command(message_cmd(), b"\x0e\x02\x00\x00\x00\x09abc"),
            id="broker-entry-metadata-overrun",
        ),
        pytest.param(
            encode_payload_command(message_cmd(), b"\x0e\x02\x00"), id="bem-truncated"
        ),
    ],
)
def test_malformed_frames_raise_remote_protocol_error(data: bytes) -> None:
    decoder = FrameDecoder(LIMIT)
    with pytest.raises(RemoteProtocolError):
        decoder.feed(data)
    # The stream is out of sync now: the decoder stays broken.
    with pytest.raises(RemoteProtocolError):
        decoder.feed(encode_command(ping()))


def test_error_after_good_frames_in_same_feed() -> None:
    decoder = FrameDecoder(LIMIT)
    with pytest.raises(RemoteProtocolError):
        decoder.feed(encode_command(ping()) + _raw(7, 3, b"\xff\xff\xff"))


def test_ping_without_sub_message_is_accepted() -> None:
    # CommandPing has no fields, so its absence loses nothing.
    [decoded] = decode_all(_raw(6, 2, b"\x08\x12"))
    assert decoded.type == T.PING


def test_trailing_bytes_after_simple_command_are_ignored() -> None:
    body = ping().SerializeToString()
    [decoded] = decode_all(_raw(4 + len(body) + 3, len(body), body + b"xyz"))
    assert decoded.payload is None


def test_unknown_fields_are_tolerated() -> None:
    # A newer peer may add fields; proto2 keeps them as unknown fields.
    body = ping().SerializeToString() + b"\xf8\x07\x01"  # field 127, varint 1
    [decoded] = decode_all(_raw(4 + len(body), len(body), body))
    assert decoded.type == T.PING


def test_encode_command_missing_required_field() -> None:
    with pytest.raises(LocalProtocolError):
        encode_command(
            pb.BaseCommand(type=T.ERROR, error=pb.CommandError(request_id=1))
        )
    with pytest.raises(LocalProtocolError):
        encode_message(send_cmd(), pb.MessageMetadata(producer_name="p"), b"")


def test_decoder_rejects_tiny_limit() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(4)


def test_protocol_errors_share_a_base() -> None:
    assert issubclass(FrameTooLarge, ProtocolError)
    assert issubclass(RemoteProtocolError, ProtocolError)


def test_caller_may_reuse_its_read_buffer() -> None:
    # An asyncio BufferedProtocol hands out one buffer and refills it; nothing decoded
    # (commands, payloads, a buffered partial frame) may alias it.
    stream, commands, payloads = _stream()
    decoder = FrameDecoder(LIMIT)
    decoded: list[Frame] = []
    read_buffer = bytearray(100)
    for i in range(0, len(stream), 100):
        chunk = stream[i : i + 100]
        read_buffer[: len(chunk)] = chunk
        decoded += decoder.feed(memoryview(read_buffer)[: len(chunk)])
        read_buffer[:] = b"\xaa" * 100
    assert [f.command for f in decoded] == commands
    assert [f.payload for f in decoded] == payloads


def test_frame_is_a_slots_dataclass() -> None:
    frame = Frame(ping())
    assert not hasattr(frame, "__dict__")
    assert (frame.payload, frame.checksum_ok, frame.broker_entry_metadata) == (
        None,
    ) * 3
