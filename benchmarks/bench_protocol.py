#!/usr/bin/env python3
"""Throughput of quasar.protocol's hot paths (one core, no I/O).

    python benchmarks/bench_protocol.py [--seconds 1.0] [--payload 1024]

Prints operations per second and MB/s for:

* client side: encode SEND + MessageMetadata + payload (with CRC-32C);
* broker side: decode those SEND frames (FrameDecoder, checksum verified) and parse
  the entry's metadata; encode SEND_RECEIPT; encode MESSAGE frames with the
  hand-written encoder and, for comparison, through protobuf objects;
* client side: decode MESSAGE frames.

Numbers are for comparison between versions on one machine, not assertions.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from google.protobuf.internal import api_implementation  # noqa: E402

from quasar.protocol import (  # noqa: E402
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    FrameDecoder,
    encode_message,
    encode_message_frame,
    encode_payload_command,
    encode_send_receipt,
    make_entry,
    parse_entry,
    pb,
)

BATCH = 1000  # frames per timed call, so loop overhead stays small


def measure(
    name: str, seconds: float, frame_bytes: int, fn: Callable[[], object]
) -> None:
    fn()  # warm up
    ops = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        fn()
        ops += BATCH
        now = time.perf_counter()
        if now >= deadline:
            break
    elapsed = now - start
    rate = ops / elapsed
    print(
        f"{name:<46} {rate:>12,.0f} frames/s {rate * frame_bytes / 1e6:>9.1f} MB/s"
        f" {1e6 / rate:>8.2f} us/frame"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--payload", type=int, default=1024)
    args = parser.parse_args()
    payload = bytes(range(256)) * (args.payload // 256) + b"x" * (args.payload % 256)
    limit = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING
    print(
        f"protobuf backend: {api_implementation.Type()}, payload {len(payload)} bytes"
    )

    meta = pb.MessageMetadata(
        producer_name="standalone-0-1",
        sequence_id=123456,
        publish_time=1_700_000_000_000,
        partition_key="key-42",
        properties=[pb.KeyValue(key="origin", value="bench")],
    )
    send = pb.BaseCommand(
        type=pb.BaseCommand.SEND, send=pb.CommandSend(producer_id=1, sequence_id=123456)
    )

    def encode_sends() -> None:
        for _ in range(BATCH):
            encode_message(send, meta, payload)

    send_frame = encode_message(send, meta, payload)
    send_stream = send_frame * BATCH

    def decode_sends() -> None:
        for frame in FrameDecoder(limit).feed(send_stream):
            assert frame.payload is not None
            parse_entry(frame.payload, verify_checksum=False)

    def encode_receipts() -> None:
        for i in range(BATCH):
            encode_send_receipt(1, i, 42, i)

    entry = make_entry(meta, payload)

    def encode_messages_fast() -> None:
        for i in range(BATCH):
            encode_message_frame(7, 42, i, -1, 0, None, entry)

    def encode_messages_pb() -> None:
        for i in range(BATCH):
            cmd = pb.BaseCommand(
                type=pb.BaseCommand.MESSAGE,
                message=pb.CommandMessage(
                    consumer_id=7, message_id=pb.MessageIdData(ledgerId=42, entryId=i)
                ),
            )
            encode_payload_command(cmd, entry)

    message_stream = b"".join(
        encode_message_frame(7, 42, i, -1, 0, None, entry) for i in range(BATCH)
    )

    def decode_messages() -> None:
        FrameDecoder(limit).feed(message_stream)

    def decode_messages_chunked() -> None:
        decoder = FrameDecoder(limit)
        for i in range(0, len(message_stream), 65536):
            decoder.feed(message_stream[i : i + 65536])

    s = args.seconds
    measure("encode SEND + metadata + payload (crc)", s, len(send_frame), encode_sends)
    measure(
        "decode SEND + verify crc + parse metadata", s, len(send_frame), decode_sends
    )
    measure("encode SEND_RECEIPT (hand-written)", s, 40, encode_receipts)
    message_bytes = len(message_stream) // BATCH
    measure("encode MESSAGE (hand-written)", s, message_bytes, encode_messages_fast)
    measure("encode MESSAGE (protobuf objects)", s, message_bytes, encode_messages_pb)
    measure("decode MESSAGE (one feed, verify crc)", s, message_bytes, decode_messages)
    measure(
        "decode MESSAGE (64 KiB reads, verify crc)",
        s,
        message_bytes,
        decode_messages_chunked,
    )


if __name__ == "__main__":
    main()
