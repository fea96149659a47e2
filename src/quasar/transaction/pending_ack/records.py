"""Records of the pending-ack log, and how one managed-ledger entry holds them.

Entry layout::

    single record   [PendingAckMetadataEntry protobuf]
    batch (PIP-160) [u16 magic 0x0E01][u16 version 1][BatchedPendingAckMetadataEntry]

    PendingAckMetadataEntry (pending_ack.proto)
      1 pending_ack_op    ACK=1 | COMMIT=2 | ABORT=3
      2 ack_type          CommandAck.AckType: Individual=0 | Cumulative=1
      3 txnid_least_bits
      4 txnid_most_bits
      5 pending_ack_metadata  (ACK only; one per position)
          1 ledgerId  2 entryId
          3 ack_set   members still unacked after this ack (BitSet words); absent for
                      a whole-entry ack
          4 batch_size

A single record starts with a protobuf field tag (``0x08`` for field 1), never
``0x0E`` (field 1 with the invalid wire type 6), so the first two bytes tell the two
layouts apart. quasar writes single records only; reading both lets batched writing
be switched on later without a format change (the same prefix as the coordinator
log). The format has no version field of its own: a change to it is a new protobuf
field, or a new batch version.

Live requests and replay both turn protobuf into ``PendingAckRecord`` here, so the
state code never sees a half-valid record: whatever this module cannot make sense of
is a ``CorruptRecordError``, and recovery stops on it rather than skip acks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from google.protobuf.message import DecodeError

from quasar.errors import CorruptRecordError
from quasar.protocol import pb, pending_ack_pb
from quasar.protocol.batch_limits import ack_set_words_max
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import Position

from ..batched_log.entry_format import (
    batched_payload,
    encode_batched_entry,
    is_batched_entry,
)

_Entry = pending_ack_pb.PendingAckMetadataEntry


class PendingAckOp(IntEnum):
    """``PendingAckOp`` of ``pending_ack.proto``."""

    ACK = pending_ack_pb.ACK
    COMMIT = pending_ack_pb.COMMIT
    ABORT = pending_ack_pb.ABORT


class AckType(IntEnum):
    """``CommandAck.AckType``."""

    INDIVIDUAL = pb.CommandAck.Individual
    CUMULATIVE = pb.CommandAck.Cumulative


@dataclass(frozen=True)
class AckedPosition:
    """One acknowledged entry, as the client sent it.

    ``ack_set``: for a batch-index ack, the members still unacked after it (wire
    words); ``None`` for the whole entry. ``batch_size``: the entry's member count if
    known.
    """

    position: Position
    ack_set: tuple[int, ...] | None = None
    batch_size: int | None = None


@dataclass(frozen=True)
class PendingAckRecord:
    """One log record; ``positions`` is empty for COMMIT and ABORT."""

    op: PendingAckOp
    ack_type: AckType
    txn_id: TxnID
    positions: tuple[AckedPosition, ...] = ()

    def __post_init__(self) -> None:
        if self.op is PendingAckOp.ACK:
            assert self.positions, "an ACK record names at least one position"
            assert self.ack_type is AckType.INDIVIDUAL or len(self.positions) == 1, (
                "a cumulative ACK names exactly one position"
            )
        else:
            assert not self.positions, "COMMIT and ABORT carry no positions"


def encode_record(record: PendingAckRecord) -> bytes:
    """One record as a single-record entry."""
    return _to_proto(record).SerializeToString()


def encode_batch(records: list[PendingAckRecord]) -> bytes:
    """Several records as one batched entry (PIP-160 layout, ``batched_log``)."""
    return encode_batched_entry([encode_record(r) for r in records])


def decode_entry(data: bytes, batch_size_max: int | None = None) -> list[PendingAckRecord]:
    """The records of one entry, in order.

    ``batch_size_max``: the most members a batch the broker accepts can hold. The
    broker bounds every acknowledgement by it before writing, so a record claiming
    more (or an ack set longer than such a batch needs) was not written by this
    broker's rules; replaying it would allocate a mask of that many bits.

    Raises:
        CorruptRecordError: not a record or batch of this format, or a record that
            this module would never have written (no op, an ACK without positions,
            a cumulative ACK with several, COMMIT/ABORT with positions, a batch size
            or ack set beyond ``batch_size_max``).
    """
    try:
        if is_batched_entry(data):
            batch = pending_ack_pb.BatchedPendingAckMetadataEntry()
            batch.ParseFromString(batched_payload(data))
            entries = list(batch.pending_ack_logs)
        else:
            entry = _Entry()
            entry.ParseFromString(data)
            entries = [entry]
    except DecodeError as exc:
        raise CorruptRecordError(f"undecodable pending-ack log entry: {exc}") from exc
    records = [_from_proto(e) for e in entries]
    if batch_size_max is not None:
        for record in records:
            _check_batch_claims(record, batch_size_max)
    return records


def _check_batch_claims(record: PendingAckRecord, batch_size_max: int) -> None:
    words_max = ack_set_words_max(batch_size_max)
    for acked in record.positions:
        if acked.batch_size is not None and not 0 <= acked.batch_size <= batch_size_max:
            raise CorruptRecordError(
                f"pending-ack record at {acked.position} claims a batch of "
                f"{acked.batch_size} messages; a batch holds at most {batch_size_max}"
            )
        if acked.ack_set is not None and len(acked.ack_set) > words_max:
            raise CorruptRecordError(
                f"pending-ack record at {acked.position} has an ack set of "
                f"{len(acked.ack_set)} words; a batch needs at most {words_max}"
            )


def _to_proto(record: PendingAckRecord) -> _Entry:
    entry = _Entry(
        pending_ack_op=int(record.op),  # type: ignore[arg-type]
        ack_type=int(record.ack_type),  # type: ignore[arg-type]
        txnid_least_bits=record.txn_id.least_bits,
        txnid_most_bits=record.txn_id.most_bits,
    )
    for acked in record.positions:
        meta = entry.pending_ack_metadata.add()
        meta.ledgerId = acked.position.ledger_id
        meta.entryId = acked.position.entry_id
        if acked.ack_set is not None:
            meta.ack_set.extend(acked.ack_set)
        if acked.batch_size is not None:
            meta.batch_size = acked.batch_size
    return entry


def _from_proto(entry: _Entry) -> PendingAckRecord:
    if not entry.HasField("pending_ack_op") or not entry.HasField("ack_type"):
        raise CorruptRecordError("pending-ack record without an op or ack type")
    if not (entry.HasField("txnid_most_bits") and entry.HasField("txnid_least_bits")):
        raise CorruptRecordError("pending-ack record without a transaction id")
    op = PendingAckOp(entry.pending_ack_op)
    ack_type = AckType(entry.ack_type)
    positions = tuple(
        AckedPosition(
            Position(m.ledgerId, m.entryId),
            tuple(m.ack_set) if len(m.ack_set) else None,
            m.batch_size if m.HasField("batch_size") else None,
        )
        for m in entry.pending_ack_metadata
    )
    if op is PendingAckOp.ACK and not positions:
        raise CorruptRecordError("pending-ack ACK record without positions")
    if op is PendingAckOp.ACK and ack_type is AckType.CUMULATIVE and len(positions) != 1:
        raise CorruptRecordError(f"cumulative ACK record with {len(positions)} positions")
    if op is not PendingAckOp.ACK and positions:
        raise CorruptRecordError(f"pending-ack {op.name} record with positions")
    return PendingAckRecord(
        op, ack_type, TxnID(entry.txnid_most_bits, entry.txnid_least_bits), positions
    )
