"""Batch payloads."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quasar.errors import LocalProtocolError, RemoteProtocolError
from quasar.protocol import batch as batch_module
from quasar.protocol import build_batch, parse_batch, pb


def items(n: int) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    return [
        (
            pb.SingleMessageMetadata(
                payload_size=i * 3,
                sequence_id=100 + i,
                partition_key=f"k{i}",
                properties=[pb.KeyValue(key="i", value=str(i))],
            ),
            b"abc" * i,
        )
        for i in range(n)
    ]


def test_layout() -> None:
    meta = pb.SingleMessageMetadata(payload_size=2, sequence_id=5)
    raw = meta.SerializeToString()
    assert build_batch([(meta, b"hi")]) == struct.pack(">I", len(raw)) + raw + b"hi"


def test_roundtrip() -> None:
    batch = items(5)
    assert parse_batch(build_batch(batch), 5) == batch


def test_payload_size_is_filled_in_without_touching_the_argument() -> None:
    meta = pb.SingleMessageMetadata(sequence_id=1)
    [(parsed, body)] = parse_batch(build_batch([(meta, b"xyz")]), 1)
    assert parsed.payload_size == 3 and body == b"xyz"
    assert not meta.HasField("payload_size")


def test_inconsistent_payload_size_is_local_error() -> None:
    with pytest.raises(LocalProtocolError):
        build_batch([(pb.SingleMessageMetadata(payload_size=9), b"xyz")])


def test_empty_batch() -> None:
    assert parse_batch(b"", 0) == []
    assert build_batch([]) == b""


def test_every_truncation_raises() -> None:
    data = build_batch(items(4))
    for cut in range(len(data)):
        with pytest.raises(RemoteProtocolError):
            parse_batch(data[:cut], 4)


@pytest.mark.parametrize(
    ("data", "count"),
    [
        (b"", 1),
        (build_batch(items(2)), 3),  # fewer messages than announced
        (build_batch(items(2)), 1),  # stray bytes left over
        (build_batch(items(1)), -1),
        (struct.pack(">I", 0), 1),  # metadata without payload_size
        (struct.pack(">I", 3) + b"\xff\xff\xff", 1),
        (struct.pack(">I", 0xFFFFFFFF) + b"x", 1),
        (struct.pack(">I", 2) + b"\x18\x7f", 1),  # payload_size 127 > what is left
    ],
)
def test_malformed(data: bytes, count: int) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_batch(data, count)


def test_negative_payload_size() -> None:
    meta = pb.SingleMessageMetadata(payload_size=-1).SerializeToString()
    with pytest.raises(RemoteProtocolError):
        parse_batch(struct.pack(">I", len(meta)) + meta, 1)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(-2, 20))
def test_garbage_only_raises_remote_protocol_error(data: bytes, count: int) -> None:
    try:
        result = parse_batch(data, count)
    except RemoteProtocolError:
        return
    assert len(result) == count


# --- fast paths: hand-written plain records must equal protobuf's ---------------------

from quasar.protocol.batch import encode_plain_batch, split_batch  # noqa: E402

_seq = st.integers(min_value=0, max_value=(1 << 64) - 1)


def _expected_plain_batch(pairs: list[tuple[int, bytes]]) -> bytes:
    return build_batch(
        [
            (pb.SingleMessageMetadata(payload_size=len(body), sequence_id=seq), body)
            for seq, body in pairs
        ]
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_seq, st.binary(max_size=300)), max_size=8))
def test_encode_plain_batch_equals_build_batch(pairs: list[tuple[int, bytes]]) -> None:
    seqs, bodies = [s for s, _ in pairs], [b for _, b in pairs]
    assert encode_plain_batch(seqs, bodies) == _expected_plain_batch(pairs)


@settings(max_examples=200, deadline=None)
@given(_seq, st.integers(1, 300), st.sampled_from([0, 1, 5, 1024]))
def test_encode_plain_batch_of_a_sequence_run(first: int, count: int, size: int) -> None:
    # A producer's batch: consecutive ids (across 128-id blocks and varint lengths),
    # equal sizes.
    seqs = [s for s in range(first, first + count) if s < 1 << 64]
    bodies = [bytes([i % 256]) * size for i in range(len(seqs))]
    expected = _expected_plain_batch(list(zip(seqs, bodies, strict=True)))
    assert encode_plain_batch(seqs, bodies) == expected
    # The producer's bulk path passes the run as a range.
    run = range(first, first + len(seqs))
    assert encode_plain_batch(run, bodies) == expected


def test_encode_plain_batch_rejects_bad_sequence_ids() -> None:
    with pytest.raises(LocalProtocolError):
        encode_plain_batch(range(-1, 1), [b"a", b"b"])
    with pytest.raises(LocalProtocolError):
        encode_plain_batch(range(1 << 64, (1 << 64) - 2, -1), [b"a", b"b"])
    with pytest.raises(LocalProtocolError):
        encode_plain_batch([-1], [b"x"])
    with pytest.raises(LocalProtocolError):
        encode_plain_batch([1 << 64], [b"x"])
    with pytest.raises(LocalProtocolError):
        encode_plain_batch([1, 2], [b"x"])


def _records(*kinds: str) -> st.SearchStrategy[list[tuple[int | None, bytes, str]]]:
    """Up to 8 batch records: (sequence id or none, payload, metadata kind)."""
    return st.lists(
        st.tuples(st.one_of(st.none(), _seq), st.binary(max_size=300), st.sampled_from(kinds)),
        max_size=8,
    )


def _batch_of(
    records: list[tuple[int | None, bytes, str]],
) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    """The records as (SingleMessageMetadata, payload) pairs, metadata by kind."""
    batch = []
    for seq, body, kind in records:
        meta = pb.SingleMessageMetadata(payload_size=len(body))
        if seq is not None:
            meta.sequence_id = seq
        if kind == "key":
            meta.partition_key = "k"
        elif kind == "event":
            meta.event_time = 7
        elif kind == "null":
            meta.null_value = True
        batch.append((meta, body))
    return batch


@settings(max_examples=200, deadline=None)
@given(_records("plain", "key", "event", "null"))
def test_split_batch_matches_parse_batch(
    records: list[tuple[int | None, bytes, str]],
) -> None:
    batch = _batch_of(records)
    raw = build_batch(batch)
    split = split_batch(raw, len(batch))
    assert [body for _, body in split] == [body for _, body in parse_batch(raw, len(batch))]
    for (meta, _), (orig, _) in zip(split, batch, strict=True):
        plain = orig.ListFields() and {f.name for f, _ in orig.ListFields()} <= {
            "payload_size",
            "sequence_id",
        }
        if plain:
            assert meta is None
        else:
            assert meta == orig


@pytest.mark.parametrize(
    "meta",
    [
        b"\x18\x03\x40",  # sequence id cut short
        b"\x18\x03\x40\x80",  # unterminated varint
        b"\x18\x03\x40\x01\x01",  # trailing byte
        b"\x18\xff\xff\xff\xff\x0f",  # payload_size beyond int32 (negative)
        b"\x18",
        b"",
    ],
)
def test_split_batch_falls_back_or_rejects_like_parse_batch(meta: bytes) -> None:
    raw = struct.pack(">I", len(meta)) + meta + b"abc"
    try:
        expected = parse_batch(raw, 1)
    except RemoteProtocolError:
        with pytest.raises(RemoteProtocolError):
            split_batch(raw, 1)
        return
    [(parsed, body)] = split_batch(raw, 1)
    assert (parsed, body) == expected[0] or (parsed is None and body == expected[0][1])


@settings(max_examples=200, deadline=None)
@given(_seq, st.integers(1, 300), st.binary(max_size=12))
def test_split_batch_of_a_producer_batch(first: int, count: int, tail: bytes) -> None:
    # Records sharing "18 <size> 40" take the look-alike fast path; the last one's
    # sequence id is replaced by arbitrary bytes, which must be judged as before.
    seqs = [s for s in range(first, first + count) if s < 1 << 64]
    bodies = [b"x" * 5] * len(seqs)
    good = encode_plain_batch(seqs, bodies)
    bad_meta = b"\x18\x05\x40" + tail
    raw = good + struct.pack(">I", len(bad_meta)) + bad_meta + b"x" * 5
    got = _assert_split_like_parse(raw, len(seqs) + 1)
    if got:
        assert all(meta is None for meta, _ in got[:-1])


def _assert_split_like_parse(
    raw: bytes, count: int
) -> list[tuple[pb.SingleMessageMetadata | None, bytes]]:
    """split_batch rejects what parse_batch rejects, else returns the same bodies and
    each metadata parsed or (plain) None. Returns split_batch's result ([] if both
    rejected the input)."""
    try:
        expected = parse_batch(raw, count)
    except RemoteProtocolError:
        with pytest.raises(RemoteProtocolError):
            split_batch(raw, count)
        return []
    got = split_batch(raw, count)
    assert [b for _, b in got] == [b for _, b in expected]
    for (meta, _), (orig, _) in zip(got, expected, strict=True):
        assert meta is None or meta == orig
    return got


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(min_value=0, max_value=4))
def test_split_batch_agrees_with_parse_batch_on_garbage(raw: bytes, count: int) -> None:
    _assert_split_like_parse(raw, count)


# --- the C extension _batchsplit against the Python code -----------------------------


def _python_split(
    raw: bytes, count: int
) -> list[tuple[pb.SingleMessageMetadata | None, bytes]] | RemoteProtocolError:
    """split_batch without the extension (its error instead of raising it)."""
    native, batch_module._batchsplit = batch_module._batchsplit, None
    try:
        return split_batch(raw, count)
    except RemoteProtocolError as exc:
        return exc
    finally:
        batch_module._batchsplit = native


def _assert_native_agrees(raw: bytes, count: int) -> None:
    """The extension returns exactly what the Python code does for an all-plain,
    well-formed batch, and None (decline) for everything else."""
    assert batch_module._batchsplit is not None
    native = batch_module._batchsplit.split_plain(raw, count)
    python = _python_split(raw, count)
    all_plain = not isinstance(python, RemoteProtocolError) and all(
        meta is None for meta, _ in python
    )
    if all_plain:
        assert native == python
    else:
        assert native is None


def test_the_batch_extension_is_built() -> None:
    # `make test` installs with a C compiler; without the extension every batched
    # message costs a consumer about 1 us more, silently.
    assert batch_module._batchsplit is not None


@settings(max_examples=200, deadline=None)
@given(_records("plain", "plain", "plain", "key"))
def test_native_split_matches_python(records: list[tuple[int | None, bytes, str]]) -> None:
    batch = _batch_of(records)
    raw = build_batch(batch)
    _assert_native_agrees(raw, len(batch))
    for cut in (1, 4, 7):  # truncated, and with stray bytes
        _assert_native_agrees(raw[:-cut], len(batch))
        _assert_native_agrees(raw + b"\0" * cut, len(batch))
    _assert_native_agrees(raw, len(batch) + 1)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(min_value=-1, max_value=4))
def test_native_split_declines_garbage_like_python(raw: bytes, count: int) -> None:
    if count < 0:
        assert batch_module._batchsplit is not None
        assert batch_module._batchsplit.split_plain(raw, count) is None
        return
    _assert_native_agrees(raw, count)


@pytest.mark.parametrize(
    "meta",
    [
        b"\x18\x03\x40",
        b"\x18\x03\x40\x80",
        b"\x18\x03\x40\x01\x01",
        b"\x18\xff\xff\xff\xff\x0f",
        b"\x18\x80\x80\x80\x80\x80\x01",  # a six-byte payload_size
        b"\x18\x03\x40" + b"\x81" * 10 + b"\x01",  # an eleven-byte sequence id
        b"\x18\x03\x40" + b"\x81" * 9 + b"\x01",  # ten bytes: still one varint
        b"\x18\x03",
        b"\x18",
        b"",
    ],
)
def test_native_split_edge_records(meta: bytes) -> None:
    _assert_native_agrees(struct.pack(">I", len(meta)) + meta + b"abc", 1)
    _assert_native_agrees(struct.pack(">I", 0xFFFFFFFF) + meta, 1)


def test_native_split_of_a_large_producer_batch() -> None:
    seqs = list(range((1 << 40) - 500, (1 << 40) + 500))
    raw = encode_plain_batch(seqs, [bytes([i % 251]) * 1024 for i in range(1000)])
    _assert_native_agrees(raw, 1000)
    assert [len(body) for _, body in split_batch(raw, 1000)] == [1024] * 1000
