"""MessageIdData to and from plain integers. The public id type built on these
functions, and its interop with pulsar.MessageId, is tested in
tests/client/test_message_id.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quasar.errors import RemoteProtocolError
from quasar.protocol import pb
from quasar.protocol.message_id import (
    message_id_data,
    message_id_fields,
    parse_message_id_data,
)

INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


def test_reference_example() -> None:
    assert message_id_data(10, 3, 2).SerializeToString().hex() == "080a10031802"


def test_uint64_ids_read_as_int64() -> None:
    data = message_id_data(-1, INT64_MAX)
    assert (data.ledgerId, data.entryId) == (UINT64_MAX, INT64_MAX)
    wire = pb.MessageIdData(ledgerId=UINT64_MAX, entryId=UINT64_MAX)
    assert message_id_fields(wire) == (-1, -1, -1, -1, 0)


def test_only_non_default_optional_fields_are_written() -> None:
    bare = message_id_data(5, 6)
    assert not bare.HasField("partition") and not bare.HasField("batch_index")
    assert not bare.HasField("batch_size")
    full = message_id_data(5, 6, 1, 2, 3)
    assert (full.partition, full.batch_index, full.batch_size) == (1, 2, 3)
    assert message_id_fields(full) == (5, 6, 1, 2, 3)


@pytest.mark.parametrize("garbage", [b"\xff\xff", b""])
def test_parse_rejects_garbage(garbage: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_message_id_data(garbage)


def test_parse_rejects_missing_required_ids() -> None:
    with pytest.raises(RemoteProtocolError, match="lacks ledgerId or entryId"):
        parse_message_id_data(b"\x08\x01")  # a ledgerId, no entryId
    with pytest.raises(RemoteProtocolError, match="lacks ledgerId or entryId"):
        parse_message_id_data(b"\x10\x01")  # an entryId, no ledgerId


positions = st.tuples(
    st.one_of(st.just(-1), st.integers(0, INT64_MAX)),
    st.one_of(st.just(-1), st.integers(0, INT64_MAX)),
    st.integers(-1, 1000),
    st.integers(-1, 5000),
    st.integers(0, 5000),
)


@given(positions)
def test_round_trip(position: tuple[int, int, int, int, int]) -> None:
    raw = message_id_data(*position).SerializeToString()
    assert message_id_fields(parse_message_id_data(raw)) == position
