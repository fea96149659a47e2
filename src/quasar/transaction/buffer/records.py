"""What the transaction buffer sees in a topic entry, and the marker entries it writes.

The buffer keeps no log of its own: the topic's entries *are* its records. Each entry
is one of

* ``PLAIN``: a non-transactional message (no transaction ids in its metadata);
* ``TXN_DATA``: a message published in transaction ``txn``;
* ``COMMIT`` / ``ABORT``: a marker the buffer wrote (``marker_type`` 21 / 22 with the
  transaction ids, producer ``pulsar.txn.marker``, empty payload);
* ``OTHER_MARKER``: any other broker marker (replicated subscriptions, 10-13).

Live operations build the ``TbRecord`` they append; recovery rebuilds the same
record from the stored bytes with ``classify``; both then call
``BufferState.apply``.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from quasar.errors import NotAllowedError, RemoteProtocolError
from quasar.protocol import make_entry, markers_pb, parse_entry, pb
from quasar.protocol.txn_id import TxnID

from ..txn_status import TxnAction

MARKER_PRODUCER_NAME = "pulsar.txn.marker"
TXN_COMMIT = markers_pb.TXN_COMMIT  # 21
TXN_ABORT = markers_pb.TXN_ABORT  # 22


class RecordKind(Enum):
    PLAIN = "plain"
    TXN_DATA = "txn_data"
    COMMIT = "commit"
    ABORT = "abort"
    OTHER_MARKER = "other_marker"


class TbRecord(NamedTuple):
    """One entry as the transaction buffer understands it."""

    kind: RecordKind
    txn: TxnID | None = None


PLAIN = TbRecord(RecordKind.PLAIN)


def marker_record(txn: TxnID, action: TxnAction) -> TbRecord:
    kind = RecordKind.COMMIT if action is TxnAction.COMMIT else RecordKind.ABORT
    return TbRecord(kind, txn)


def make_marker(txn: TxnID, action: TxnAction, publish_time_ms: int) -> bytes:
    """The stored bytes of a commit or abort marker for ``txn``.

    The sequence id is 0: Pulsar writes -1, which does not fit the uint64 field, and
    deduplication ignores markers either way.
    """
    md = pb.MessageMetadata(
        producer_name=MARKER_PRODUCER_NAME,
        sequence_id=0,
        publish_time=publish_time_ms,
        marker_type=TXN_COMMIT if action is TxnAction.COMMIT else TXN_ABORT,
        txnid_most_bits=txn.most_bits,
        txnid_least_bits=txn.least_bits,
    )
    return make_entry(md, b"")


def _txn_of(md: pb.MessageMetadata) -> TxnID | None:
    # Pulsar treats an entry as transactional only with both halves present.
    if md.HasField("txnid_most_bits") and md.HasField("txnid_least_bits"):
        return TxnID(md.txnid_most_bits, md.txnid_least_bits)
    return None


def classify(data: bytes) -> TbRecord:
    """Read the record an entry stands for (recovery's view of an entry).

    An entry whose metadata cannot be decoded counts as ``PLAIN``: the dispatcher
    skips it as corrupt, and it cannot belong to a transaction we could end.
    """
    try:
        md = parse_entry(data, verify_checksum=False).metadata
    except RemoteProtocolError:
        return PLAIN
    txn = _txn_of(md)
    if md.HasField("marker_type"):
        if txn is not None and md.marker_type == TXN_COMMIT:
            return TbRecord(RecordKind.COMMIT, txn)
        if txn is not None and md.marker_type == TXN_ABORT:
            return TbRecord(RecordKind.ABORT, txn)
        return TbRecord(RecordKind.OTHER_MARKER)
    if txn is not None:
        return TbRecord(RecordKind.TXN_DATA, txn)
    return PLAIN


def check_client_entry(data: bytes, txn: TxnID | None) -> None:
    """Check that a client's entry says what the publish says.

    Recovery trusts the stored metadata, so an entry must carry transaction ids
    exactly when it is published in a transaction (and the same ids), and never a
    marker type.

    Raises:
        NotAllowedError: the metadata disagrees with the publish.
        RemoteProtocolError: the metadata cannot be decoded.
    """
    md = parse_entry(data, verify_checksum=False).metadata
    if md.HasField("marker_type"):
        raise NotAllowedError("clients may not publish marker entries")
    found = _txn_of(md)
    if found != txn:
        if txn is None:
            raise NotAllowedError(
                f"message carries transaction {found} but was not sent in a transaction"
            )
        raise NotAllowedError(
            f"message sent in transaction {txn} carries transaction ids {found}"
        )
