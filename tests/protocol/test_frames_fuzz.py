"""Property tests: the decoder never fails with anything but a ProtocolError."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quasar.errors import ProtocolError
from quasar.protocol import (
    Frame,
    FrameDecoder,
    encode_command,
    encode_message,
    encode_payload_command,
    make_entry,
    pb,
)

from ._helpers import T, lookup_response, message_cmd, metadata, ping, send_cmd

FUZZ = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _valid_frames() -> list[bytes]:
    bem = pb.BrokerEntryMetadata(broker_timestamp=5, index=6).SerializeToString()
    return [
        encode_command(ping()),
        encode_command(lookup_response()),
        encode_message(
            send_cmd(), metadata(properties=[pb.KeyValue(key="a", value="b")]), b"hi"
        ),
        encode_message(send_cmd(), metadata(), b"no-crc", checksum=False),
        encode_payload_command(
            message_cmd(),
            b"\x0e\x02"
            + struct.pack(">I", len(bem))
            + bem
            + make_entry(metadata(), b"m"),
        ),
        encode_command(
            pb.BaseCommand(
                type=T.ACK,
                ack=pb.CommandAck(
                    consumer_id=1,
                    ack_type=pb.CommandAck.Individual,
                    message_id=[
                        pb.MessageIdData(ledgerId=1, entryId=2, ack_set=[-1, 3])
                    ],
                ),
            )
        ),
    ]


VALID = _valid_frames()


def _feed_checked(decoder: FrameDecoder, chunks: list[bytes]) -> list[Frame]:
    out: list[Frame] = []
    for chunk in chunks:
        try:
            out += decoder.feed(chunk)
        except ProtocolError:
            return out
    return out


@FUZZ
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_arbitrary_bytes(chunks: list[bytes]) -> None:
    for frame in _feed_checked(FrameDecoder(4096), chunks):
        assert isinstance(frame, Frame)


@FUZZ
@given(
    st.lists(st.sampled_from(VALID), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=6),
    st.lists(st.integers(min_value=0), max_size=3),
    st.integers(min_value=0),
    st.integers(min_value=1, max_value=97),
)
def test_mutated_valid_frames(
    frames: list[bytes],
    flips: list[tuple[int, int]],
    deletions: list[int],
    truncate: int,
    chunk: int,
) -> None:
    data = bytearray(b"".join(frames))
    for pos, value in flips:
        data[pos % len(data)] = value
    for pos in deletions:
        if data:
            del data[pos % len(data)]
    data = data[: len(data) - truncate % 8]
    chunks = [bytes(data[i : i + chunk]) for i in range(0, len(data), chunk)]
    for frame in _feed_checked(FrameDecoder(1 << 16), chunks):
        assert isinstance(frame, Frame)
        if frame.type in (T.SEND, T.MESSAGE):
            assert frame.payload is not None


@FUZZ
@given(st.lists(st.sampled_from(VALID), max_size=6), st.data())
def test_valid_stream_any_split(frames: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=5)))
    pieces = [
        stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)
    ]
    decoder = FrameDecoder(1 << 16)
    decoded: list[Frame] = []
    for piece in pieces:
        decoded += decoder.feed(piece)
    assert len(decoded) == len(frames)
    assert decoder.buffered_bytes == 0
    for frame in decoded:
        assert frame.checksum_ok is not False
