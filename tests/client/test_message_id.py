"""quasar.client.MessageId, including interop with the official client's pulsar.MessageId.

The constructor takes ``(partition, ledger_id, entry_id, batch_index, batch_size,
topic)``, in the official client's order.
"""

from __future__ import annotations

import pulsar
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import quasar.client as qc
from quasar.client.message_id import MessageId
from quasar.protocol import pb

INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


def _official(mid: MessageId) -> pulsar.MessageId:
    return pulsar.MessageId(
        mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index()
    )


def test_public_name() -> None:
    assert qc.MessageId is MessageId
    assert qc.MessageId.earliest is MessageId.earliest


def test_reference_example() -> None:
    mid = MessageId(2, 10, 3, -1)
    assert mid.serialize().hex() == "080a10031802"
    assert mid.serialize() == pulsar.MessageId(2, 10, 3, -1).serialize()
    assert str(mid) == "(10,3,2,-1)"
    assert repr(mid) == "MessageId(10,3,2,-1)"
    assert MessageId.deserialize(mid.serialize()) == mid


def test_earliest_and_latest() -> None:
    assert MessageId.earliest == MessageId(-1, -1, -1, -1)
    assert MessageId.latest == MessageId(-1, INT64_MAX, INT64_MAX, -1)
    assert str(MessageId.earliest) == "(-1,-1,-1,-1)"
    assert str(MessageId.latest) == f"({INT64_MAX},{INT64_MAX},-1,-1)"
    assert str(MessageId.earliest) == str(pulsar.MessageId.earliest)
    assert str(MessageId.latest) == str(pulsar.MessageId.latest)
    assert MessageId.earliest.serialize() == pulsar.MessageId.earliest.serialize()
    assert MessageId.latest.serialize() == pulsar.MessageId.latest.serialize()
    assert MessageId.deserialize(MessageId.earliest.serialize()) == MessageId.earliest
    assert MessageId.deserialize(MessageId.latest.serialize()) == MessageId.latest
    assert MessageId.earliest < MessageId(-1, 0, 0) < MessageId.latest


def test_ordering_ignores_partition_and_batch_size() -> None:
    ids = [
        MessageId(-1, 2, 0),
        MessageId(0, 1, 5, 3),
        MessageId(7, 1, 5, 1),
        MessageId(-1, 1, 4),
    ]
    assert sorted(ids) == [
        MessageId(-1, 1, 4),
        MessageId(7, 1, 5, 1),
        MessageId(0, 1, 5, 3),
        MessageId(-1, 2, 0),
    ]
    assert (
        MessageId(-1, 1, 1, 0)
        < MessageId(-1, 1, 1, 1)
        < MessageId(-1, 1, 2)
        < MessageId(-1, 2, 0)
    )
    # A whole entry (batch index -1) sorts before its first batch member.
    assert MessageId(-1, 1, 5, batch_index=-1) < MessageId(-1, 1, 5, batch_index=0)
    assert MessageId(0, 1, 2, 1, batch_size=10) == MessageId(0, 1, 2, 1)
    assert MessageId(0, 1, 2, 1, topic="t") == MessageId(0, 1, 2, 1)
    assert len({MessageId(0, 1, 2, 1, 10), MessageId(0, 1, 2, 1, 0)}) == 1


def test_same_position_in_other_partition_is_not_equal() -> None:
    # Equality includes the partition. For equal positions the C++ operators say
    # neither a < b nor a <= b, yet a > b and a >= b (both ways round); quasar gives
    # the same answers so that code ported from `pulsar` behaves the same.
    a, b = MessageId(0, 1, 2), MessageId(1, 1, 2)
    pa, pb_ = _official(a), _official(b)
    assert a != b and pa != pb_
    assert (a < b, a <= b, a > b, a >= b) == (pa < pb_, pa <= pb_, pa > pb_, pa >= pb_)
    assert (a < b, a <= b, a > b, a >= b) == (False, False, True, True)
    assert (b < a, b <= a, b > a, b >= a) == (False, False, True, True)


def test_pb_conversion_reads_uint64_as_int64() -> None:
    data = pb.MessageIdData(ledgerId=UINT64_MAX, entryId=UINT64_MAX)
    assert MessageId.from_pb(data) == MessageId.earliest
    assert MessageId(-1, -1, -1).to_pb().ledgerId == UINT64_MAX
    assert MessageId(-1, -1, -1).to_pb().entryId == UINT64_MAX
    full = pb.MessageIdData.FromString(MessageId(1, 5, 6, 2, 3).serialize())
    assert (full.partition, full.batch_index, full.batch_size) == (1, 2, 3)
    back = MessageId.from_pb(full, topic="t")
    assert (back.partition(), back.ledger_id(), back.entry_id()) == (1, 5, 6)
    assert (back.batch_index(), back.batch_size(), back.topic_name()) == (2, 3, "t")
    # A batch size known from the entry's metadata wins over an absent wire field.
    assert (
        MessageId.from_pb(MessageId(-1, 5, 6).to_pb(), batch_size=4).batch_size() == 4
    )


def test_absent_optional_fields() -> None:
    bare = pb.MessageIdData.FromString(MessageId(-1, 5, 6).serialize())
    assert not bare.HasField("partition") and not bare.HasField("batch_index")
    assert not bare.HasField("batch_size")
    mid = MessageId.from_pb(pb.MessageIdData(ledgerId=5, entryId=6))
    assert (mid.partition(), mid.batch_index(), mid.batch_size()) == (-1, -1, 0)
    assert mid.topic_name() is None


def test_to_pb_carries_what_ack_seek_and_subscribe_need() -> None:
    # ACK, SEEK and REDELIVER carry ledger and entry only; SUBSCRIBE's start position
    # adds the batch index. Partition and batch size never go into these commands.
    mid = MessageId(1, 5, 6, 2, 3)
    plain = mid.to_pb()
    assert (plain.ledgerId, plain.entryId) == (5, 6)
    assert not plain.HasField("partition") and not plain.HasField("batch_index")
    assert not plain.HasField("batch_size")
    start = mid.to_pb(include_batch=True)
    assert (start.ledgerId, start.entryId, start.batch_index) == (5, 6, 2)
    assert not start.HasField("partition") and not start.HasField("batch_size")
    assert not MessageId(1, 5, 6).to_pb(include_batch=True).HasField("batch_index")


def test_batch_size_and_topic_round_trip() -> None:
    batch = MessageId(-1, 1, 1, 2, 5)
    again = MessageId.deserialize(batch.serialize(), topic="persistent://p/n/t")
    assert again.batch_size() == 5 and again.is_batch_member()
    assert again.topic_name() == "persistent://p/n/t"


@pytest.mark.parametrize("garbage", [b"\xff\xff", b"\x08\x01", b""])
def test_deserialize_rejects_garbage(garbage: bytes) -> None:
    # b"\x08\x01" has a ledgerId but no entryId; b"" has neither. The official client
    # raises ValueError for each, so quasar does too.
    with pytest.raises(ValueError):
        pulsar.MessageId.deserialize(garbage)
    with pytest.raises(ValueError, match="not a serialized message id"):
        MessageId.deserialize(garbage)


ids = st.builds(
    MessageId,
    st.integers(-1, 1000),
    st.one_of(st.just(-1), st.integers(0, INT64_MAX)),
    st.one_of(st.just(-1), st.integers(0, INT64_MAX)),
    st.integers(-1, 5000),
)


@settings(max_examples=200, deadline=None)
@given(ids)
def test_interop_with_official_client(mid: MessageId) -> None:
    theirs = _official(mid)
    assert theirs.serialize() == mid.serialize()
    assert str(theirs) == str(mid)
    back = pulsar.MessageId.deserialize(mid.serialize())
    assert (
        back.ledger_id(),
        back.entry_id(),
        back.partition(),
        back.batch_index(),
    ) == (
        mid.ledger_id(),
        mid.entry_id(),
        mid.partition(),
        mid.batch_index(),
    )
    assert MessageId.deserialize(theirs.serialize()) == mid
    assert MessageId.deserialize(mid.serialize()) == mid


@settings(max_examples=200, deadline=None)
@given(ids, ids, st.sampled_from(["any", "same partition", "same position"]))
def test_ordering_matches_official_client(a: MessageId, b: MessageId, how: str) -> None:
    if how == "same partition":
        b = MessageId(a.partition(), b.ledger_id(), b.entry_id(), b.batch_index())
    elif how == "same position":
        b = MessageId(b.partition(), a.ledger_id(), a.entry_id(), a.batch_index())
    pa, pb_ = _official(a), _official(b)
    assert (a < b) == (pa < pb_)
    assert (a > b) == (pa > pb_)
    assert (a <= b) == (pa <= pb_)
    assert (a >= b) == (pa >= pb_)
    assert (a == b) == (pa == pb_)
    assert (a != b) == (pa != pb_)
