# Frame layout of the Pulsar binary protocol (all integers big-endian):
#
#   simple command:
#   +-----------+-------------+-------------+
#   | totalSize | commandSize | BaseCommand |      totalSize = 4 + commandSize
#   |    u32    |     u32     |  protobuf   |
#   +-----------+-------------+-------------+
#
#   payload command (SEND from a client, MESSAGE from the broker):
#   +-----------+-------------+-------------+
#   | totalSize | commandSize | BaseCommand |      totalSize = bytes after itself
#   +-----------+-------------+-------------+
#   | 0x0e02 u16 | size u32 | BrokerEntryMetadata |   optional, MESSAGE only
#   +------------+----------+---------------------+
#   | 0x0e01 u16 | crc32c u32 |                      optional (protocol >= v6)
#   +------------+------------+-----------------+---------------+
#   | metadataSize u32 | MessageMetadata        | payload ...   |
#   +------------------+------------------------+---------------+
#                     ^ the crc32c covers from metadataSize to the end of the frame
#
#   Frame.payload is everything from the 0x0e01 magic (or from metadataSize when
#   there is no checksum) to the end of the frame: exactly the bytes the broker
#   stores as a ledger entry and later forwards unchanged after a MESSAGE command.
"""Sans-IO frame codec: bytes in, ``Frame`` objects out; commands in, bytes out.

Nothing here touches a socket, awaits or sleeps; the connection code feeds received
bytes to a ``FrameDecoder`` and writes what the encoders return.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import EncodeError

from quasar.errors import (
    FrameTooLarge,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)

from ._generated import pulsar_api_pb2 as pb
from ._wire import (
    KEEP_GIL,
    MAGIC_BROKER_ENTRY_METADATA,
    MAGIC_CRC32C,
    MAX_U32,
    U16,
    U32,
    U32X2,
    BytesLike,
    crc32c_c,
)
from .entry import make_entry

__all__ = [
    "EAGER_FLUSH_BYTES",
    "Frame",
    "FrameDecoder",
    "encode_command",
    "encode_message",
    "encode_payload_command",
]

_SEND = pb.BaseCommand.SEND
_MESSAGE = pb.BaseCommand.MESSAGE

# Outgoing bytes a connection writes at once instead of at the end of its loop
# iteration (both ends coalesce small frames per iteration: a syscall per frame costs
# more than building it). A process that fills batch after batch in one iteration (a
# producer per worker, flushed by one timer; a dispatcher serving many consumers)
# would otherwise hold them all back until the last one is built, leaving the peer
# idle and then handing it one burst; past this size a write is cheap next to the
# work it lets the peer start. `quasar perf transaction --txn-disable -nmp 50 -c 64`
# ran 12-28 % more loops per second with it.
EAGER_FLUSH_BYTES = 32 * 1024

# A buffer holding a partial frame is compacted (consumed bytes dropped) once the
# consumed prefix is at least this large and no smaller than the unconsumed rest, so
# a frame arriving in many small reads is never moved more than a few times.
_COMPACT_BYTES = 64 * 1024


def _sub_message_fields() -> dict[int, tuple[str, bool]]:
    """Map each command type to (its BaseCommand field, whether it must be present).

    A sub-message that has required fields must be present: without it the command
    would be read as all defaults. PING and PONG, whose messages are empty, may be
    absent.
    """
    base = pb.BaseCommand.DESCRIPTOR
    table: dict[int, tuple[str, bool]] = {}
    for value in base.enum_types_by_name["Type"].values:
        fld = base.fields_by_number[value.number]
        assert fld.message_type is not None, fld.name
        needed = any(f.is_required for f in fld.message_type.fields)
        table[value.number] = (fld.name, needed)
    return table


_SUB_FIELDS = _sub_message_fields()
_parse_command = pb.BaseCommand.FromString


@dataclass(slots=True)
class Frame:
    """One decoded frame.

    ``payload`` is set for SEND and MESSAGE only: the stored-entry bytes (see the
    layout above). ``checksum_ok`` is None when the payload has no checksum, else
    whether the CRC-32C matched; a mismatch is reported, not raised, because the broker
    must answer ``SEND_ERROR{ChecksumError}`` for that one message and keep the
    connection. ``broker_entry_metadata`` holds the serialized ``BrokerEntryMetadata``
    when a 0x0e02 block preceded the payload.
    """

    command: pb.BaseCommand
    payload: bytes | None = None
    checksum_ok: bool | None = None
    broker_entry_metadata: bytes | None = None

    @property
    def type(self) -> int:
        """The command type (a ``BaseCommand.Type`` value)."""
        return self.command.type


class FrameDecoder:
    """Incremental decoder of the byte stream from one peer.

    Feed it whatever the transport delivered; it returns the frames completed so far
    (at most ``limit`` of them, the rest staying buffered as bytes until asked for)
    and buffers the rest. After it has raised once, the stream is out of sync and the
    decoder refuses further input: the caller must close the connection.
    """

    __slots__ = ("_max_frame_bytes", "_buf", "_pos", "_failed")

    def __init__(self, max_frame_bytes: int) -> None:
        """``max_frame_bytes`` bounds a whole frame, its 4-byte size field included
        (the Java broker uses ``maxMessageSize + FRAME_PADDING``).

        Raises ``ValueError`` if it is too small to hold any frame.
        """
        if max_frame_bytes < 8:
            raise ValueError(f"max_frame_bytes must be >= 8, got {max_frame_bytes}")
        self._max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0  # start of unconsumed bytes in _buf
        self._failed: ProtocolError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf) - self._pos

    def discard(self) -> None:
        """Free what is buffered and refuse further input: the connection is gone.

        The buffer is released here rather than with the decoder, which its owner
        may keep alive in a reference cycle until the next garbage collection.
        """
        self._buf = bytearray()
        self._pos = 0
        if self._failed is None:
            self._failed = RemoteProtocolError("frame decoder discarded")

    @property
    def has_frame(self) -> bool:
        """Whether the next call has a frame to decode without more bytes: a whole
        frame left buffered by a ``limit`` (or the size of one it will refuse)."""
        end = len(self._buf)
        pos = self._pos
        if end - pos < 4 or self._failed is not None:
            return False
        total: int = U32.unpack_from(self._buf, pos)[0]
        return total + 4 > self._max_frame_bytes or pos + 4 + total <= end

    def feed(self, data: BytesLike, limit: int | None = None) -> list[Frame]:
        """Add received bytes and return the frames they complete, in order.

        ``limit`` bounds the frames decoded by this call; whole frames beyond it stay
        buffered as bytes (``has_frame``) for a later call, which may pass empty
        ``data``. A large read of small frames then holds its bytes, not thousands of
        decoded commands at once.

        Raises ``FrameTooLarge`` as soon as a frame's declared size exceeds the limit,
        and ``RemoteProtocolError`` for a malformed frame (commandSize beyond the frame,
        an undecodable or incomplete BaseCommand, an unknown command type, a payload
        command without metadata). Frames completed earlier in the same call are
        dropped with the error (the connection is closing anyway). Once it has
        raised, every later call raises ``RemoteProtocolError`` too.

        The decoder keeps no reference to ``data``: a transport may reuse its read
        buffer as soon as this returns.
        """
        if self._failed is not None:
            raise RemoteProtocolError(
                "frame decoder already failed; close the connection"
            )
        try:
            return self._feed(data, limit)
        except ProtocolError as exc:
            self._failed = exc
            raise

    def _feed(self, data: BytesLike, limit: int | None) -> list[Frame]:
        buf = self._buf
        src: BytesLike
        if self._pos == len(buf):
            # Nothing buffered: decode straight from the caller's bytes and keep only
            # an incomplete tail, instead of copying everything into the buffer first.
            buf.clear()
            src, pos = data, 0
        else:
            buf += data
            src, pos = buf, self._pos
        frames: list[Frame] = []
        end = len(src)
        max_bytes = self._max_frame_bytes
        room = -1 if limit is None else limit
        with memoryview(src) as view:
            while end - pos >= 4 and room:
                total = U32.unpack_from(view, pos)[0]
                if total + 4 > max_bytes:
                    raise FrameTooLarge(
                        f"frame of {total + 4} bytes exceeds the limit of {max_bytes}"
                    )
                frame_end = pos + 4 + total
                if frame_end > end:
                    break
                frames.append(_decode_frame(view, pos + 4, frame_end))
                pos = frame_end
                room -= 1
        # The view is released here: a bytearray cannot change size while exported.
        if src is not buf:
            if pos < end:
                buf += data[pos:]
            pos = 0
        elif pos == end:
            buf.clear()
            pos = 0
        elif pos >= _COMPACT_BYTES and pos >= end - pos:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return frames


def _decode_frame(view: memoryview, start: int, end: int) -> Frame:
    """Decode the frame occupying ``view[start:end]`` (after its totalSize field)."""
    if end - start < 4:
        raise RemoteProtocolError(f"frame of {end - start} bytes has no commandSize")
    cmd_size = U32.unpack_from(view, start)[0]
    cmd_end = start + 4 + cmd_size
    if cmd_end > end:
        raise RemoteProtocolError(
            f"commandSize {cmd_size} exceeds the frame ({end - start - 4} bytes left)"
        )
    try:
        # upb accepts any buffer here, which saves a copy; the stubs only say bytes.
        command = _parse_command(view[start + 4 : cmd_end])  # type: ignore[arg-type]
    except Exception as exc:
        # upb signals malformed input with DecodeError; nothing promises it never
        # raises anything else, and to us any failure means the peer sent garbage.
        raise RemoteProtocolError(f"undecodable BaseCommand: {exc}") from exc
    if not command.HasField("type"):
        # A type value this schema does not know lands in unknown fields (proto2
        # closed enum), so it shows up here as a missing type.
        raise RemoteProtocolError("BaseCommand with a missing or unknown type")
    kind = command.type
    name, needed = _SUB_FIELDS[kind]
    if needed and not command.HasField(name):
        raise RemoteProtocolError(
            f"{pb.BaseCommand.Type.Name(kind)} without its {name} field"
        )
    # Only the sub-message named by the type is ever read, so only it has to be
    # complete; checking it alone costs half of checking the whole BaseCommand.
    sub = getattr(command, name)
    if not sub.IsInitialized():
        missing = ", ".join(sub.FindInitializationErrors())
        raise RemoteProtocolError(f"{name} lacks required fields: {missing}")
    if kind != _SEND and kind != _MESSAGE:
        # Other commands carry nothing after the BaseCommand; like the Java broker we
        # ignore any bytes that follow.
        return Frame(command)
    return _decode_payload(command, view, cmd_end, end)


def _decode_payload(
    command: pb.BaseCommand, view: memoryview, pos: int, end: int
) -> Frame:
    broker_entry_metadata: bytes | None = None
    if end - pos >= 2 and U16.unpack_from(view, pos)[0] == MAGIC_BROKER_ENTRY_METADATA:
        if end - pos < 6:
            raise RemoteProtocolError("truncated broker entry metadata header")
        size = U32.unpack_from(view, pos + 2)[0]
        meta_end = pos + 6 + size
        if meta_end > end:
            raise RemoteProtocolError(
                f"broker entry metadata of {size} bytes overruns the frame"
            )
        broker_entry_metadata = bytes(view[pos + 6 : meta_end])
        pos = meta_end
    checksum_ok: bool | None = None
    if end - pos >= 2 and U16.unpack_from(view, pos)[0] == MAGIC_CRC32C:
        if end - pos < 10:
            raise RemoteProtocolError("payload too short for checksum and metadataSize")
        checksum_ok = (
            crc32c_c(view[pos + 6 : end], 0, KEEP_GIL) == U32.unpack_from(view, pos + 2)[0]
        )
    elif end - pos < 4:
        raise RemoteProtocolError("payload command without message metadata")
    return Frame(command, bytes(view[pos:end]), checksum_ok, broker_entry_metadata)


def _serialize(command: pb.BaseCommand) -> bytes:
    try:
        return command.SerializeToString()
    except EncodeError as exc:
        raise LocalProtocolError(f"cannot encode command: {exc}") from exc


def encode_command(cmd: pb.BaseCommand) -> bytes:
    """Frame a command that has no payload.

    Raises ``LocalProtocolError`` if a required field is not set.
    """
    body = _serialize(cmd)
    size = len(body)
    return U32X2.pack(size + 4, size) + body


def encode_payload_command(cmd: pb.BaseCommand, entry: BytesLike) -> bytes:
    """Frame a SEND or MESSAGE command followed by a stored entry.

    ``entry`` is ``[0x0e01][crc][metadataSize][metadata][payload]`` or its
    checksum-less form, forwarded unchanged. Raises ``LocalProtocolError`` if a
    required field is not set or the frame would not fit a u32 size.
    """
    body = _serialize(cmd)
    size = len(body)
    total = 4 + size + len(entry)
    if total > MAX_U32:
        raise LocalProtocolError(f"frame of {total} bytes does not fit a u32 size")
    return b"".join((U32X2.pack(total, size), body, entry))


def encode_message(
    cmd: pb.BaseCommand,
    metadata: pb.MessageMetadata,
    payload: BytesLike,
    checksum: bool = True,
) -> bytes:
    """Frame a payload command from metadata and payload (what a client sends).

    With ``checksum`` the CRC-32C header is added (clients do so when the broker's
    protocol version is >= 6). Raises ``LocalProtocolError`` if a required field of
    ``cmd`` or ``metadata`` is not set.
    """
    return encode_payload_command(cmd, make_entry(metadata, payload, checksum))
