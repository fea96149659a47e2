"""Classifying stored entries, building markers, checking client entries."""

from __future__ import annotations

import pytest

from quasar.errors import NotAllowedError, RemoteProtocolError
from quasar.protocol import make_entry, parse_entry, pb
from quasar.transaction import TxnAction, TxnID
from quasar.transaction.buffer import (
    MARKER_PRODUCER_NAME,
    RecordKind,
    classify,
    make_marker,
)
from quasar.transaction.buffer.records import check_client_entry

from .helpers import entry

T = TxnID(3, 42)


def test_marker_layout() -> None:
    md = parse_entry(make_marker(T, TxnAction.ABORT, 1234)).metadata
    assert md.producer_name == MARKER_PRODUCER_NAME
    assert (md.marker_type, md.txnid_most_bits, md.txnid_least_bits) == (22, 3, 42)
    assert md.publish_time == 1234
    assert parse_entry(make_marker(T, TxnAction.COMMIT, 0)).metadata.marker_type == 21


def test_classify() -> None:
    assert classify(make_marker(T, TxnAction.COMMIT, 0)) == (RecordKind.COMMIT, T)
    assert classify(make_marker(T, TxnAction.ABORT, 0)) == (RecordKind.ABORT, T)
    assert classify(entry(b"x", T)) == (RecordKind.TXN_DATA, T)
    assert classify(entry(b"x")) == (RecordKind.PLAIN, None)
    other = pb.MessageMetadata(producer_name="b", sequence_id=0, publish_time=0, marker_type=10)
    assert classify(make_entry(other, b"")).kind is RecordKind.OTHER_MARKER
    # A txn marker type without ids is not a transaction marker.
    odd = pb.MessageMetadata(producer_name="b", sequence_id=0, publish_time=0, marker_type=22)
    assert classify(make_entry(odd, b"")).kind is RecordKind.OTHER_MARKER
    # Only one half of the id: not transactional (Pulsar checks both).
    half = pb.MessageMetadata(producer_name="b", sequence_id=0, publish_time=0, txnid_most_bits=1)
    assert classify(make_entry(half, b"")).kind is RecordKind.PLAIN
    assert classify(b"\x00\x00") == (RecordKind.PLAIN, None)


def test_check_client_entry() -> None:
    check_client_entry(entry(b"x", T), T)
    check_client_entry(entry(b"x"), None)
    with pytest.raises(NotAllowedError):
        check_client_entry(entry(b"x", T), None)
    with pytest.raises(NotAllowedError):
        check_client_entry(entry(b"x"), T)
    with pytest.raises(NotAllowedError):
        check_client_entry(make_marker(T, TxnAction.COMMIT, 0), T)
    with pytest.raises(RemoteProtocolError):
        check_client_entry(b"\x00\x00", None)
