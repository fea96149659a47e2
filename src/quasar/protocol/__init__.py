"""quasar.protocol: the Pulsar binary protocol, sans-IO.

Everything a broker or client needs to turn bytes into commands and back, with no
sockets, no event loop and no threads: the generated protobuf modules, the frame
codec, the stored-entry format, batches, compression, ack sets, message ids and topic
names. It imports only the standard library, ``quasar.errors``, protobuf, crc32c and
the compression libraries (a test enforces this).
"""

from __future__ import annotations

from ._generated import pending_ack_pb2 as pending_ack_pb
from ._generated import pulsar_api_pb2 as pb
from ._generated import pulsar_markers_pb2 as markers_pb
from ._generated import transaction_log_pb2 as txnlog_pb
from ._wire import MAGIC_BROKER_ENTRY_METADATA, MAGIC_CRC32C, varint
from .ack_set import (
    and_,
    clear_index,
    full_ack_set,
    is_acked,
    is_all_acked,
    or_,
    unacked_indexes,
)
from .batch import build_batch, parse_batch
from .compression import compress, decompress
from .crc32c import crc32c
from .entry import ParsedEntry, make_entry, parse_entry, payload_of, verify_entry
from .fastpath import (
    encode_message_frame,
    encode_plain_metadata,
    encode_plain_send,
    encode_plain_send_parts,
    encode_send_receipt,
)
from .frames import (
    EAGER_FLUSH_BYTES,
    Frame,
    FrameDecoder,
    encode_command,
    encode_message,
    encode_payload_command,
)
from .topic_name import TopicName

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""The broker's default ``maxMessageSize``, advertised in CONNECTED."""

FRAME_PADDING = 10 * 1024
"""Room for command and metadata on top of ``max_message_size`` when bounding frames."""

PROTOCOL_VERSION_MAX = 20
"""The highest protocol version quasar speaks (the C++ 4.2 client sends 20)."""

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "EAGER_FLUSH_BYTES",
    "FRAME_PADDING",
    "MAGIC_BROKER_ENTRY_METADATA",
    "MAGIC_CRC32C",
    "varint",
    "PROTOCOL_VERSION_MAX",
    "Frame",
    "FrameDecoder",
    "ParsedEntry",
    "TopicName",
    "and_",
    "build_batch",
    "clear_index",
    "compress",
    "crc32c",
    "decompress",
    "encode_command",
    "encode_message",
    "encode_message_frame",
    "encode_plain_metadata",
    "encode_plain_send",
    "encode_plain_send_parts",
    "encode_payload_command",
    "encode_send_receipt",
    "full_ack_set",
    "is_acked",
    "is_all_acked",
    "or_",
    "make_entry",
    "markers_pb",
    "parse_batch",
    "parse_entry",
    "payload_of",
    "pb",
    "pending_ack_pb",
    "txnlog_pb",
    "unacked_indexes",
    "verify_entry",
]
