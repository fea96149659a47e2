"""The broker's bounds on batch and ack-set claims, and their refusal counter."""

from __future__ import annotations

import pytest
import zstandard
from prometheus_client.registry import CollectorRegistry

from quasar.broker.compacted_ledger import CompactedRecord
from quasar.broker.compactor import BATCH_MESSAGES_TO_SPLIT_MAX, parse_input
from quasar.broker.entry_info import entry_info
from quasar.broker.input_bounds import InputBounds
from quasar.errors import NotAllowedError, RemoteProtocolError
from quasar.protocol import make_entry, pb
from quasar.protocol._wire import U32
from quasar.storage.api import Position

EMPTY_RECORD = U32.pack(2) + b"\x18\x00"


def refused(registry: CollectorRegistry, reason: str) -> float:
    value = registry.get_sample_value(
        "quasar_hostile_input_refused_total", {"reason": reason}
    )
    assert value is not None
    return value


def batch_entry(
    count: int, body: bytes, compression: int = pb.NONE, uncompressed: int | None = None
) -> bytes:
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0)
    md.num_messages_in_batch = count
    md.partition_key = "k"
    md.compression = compression
    if uncompressed is not None:
        md.uncompressed_size = uncompressed
    return make_entry(md, body)


def test_published_info_refuses_and_counts() -> None:
    registry = CollectorRegistry()
    bounds = InputBounds(1024, registry)
    assert refused(registry, "batch_size") == 0
    info = bounds.published_info(batch_entry(2, EMPTY_RECORD * 2), 2)
    assert (info.num_messages, info.is_batch) == (2, True)
    with pytest.raises(NotAllowedError, match="Batch claims 3 messages"):
        bounds.published_info(batch_entry(3, EMPTY_RECORD * 2), 3)
    with pytest.raises(NotAllowedError, match="more than maxMessageSize 1024"):
        bounds.published_info(batch_entry(2, b"x", pb.ZSTD, 2048), 2)
    with pytest.raises(RemoteProtocolError):
        bounds.published_info(b"\x00\x00\x00\x09garbage", 1)
    assert refused(registry, "batch_size") == 1
    assert refused(registry, "uncompressed_size") == 1


def test_stored_entries_with_absurd_counts_count_as_one_message() -> None:
    assert entry_info(batch_entry(-1_000_000, EMPTY_RECORD * 2)).num_messages == 1
    assert entry_info(batch_entry(2**31 - 1, EMPTY_RECORD * 2)).num_messages == 1


def test_ack_sets_are_bounded_by_their_batch() -> None:
    registry = CollectorRegistry()
    bounds = InputBounds(5 * 1024 * 1024, registry)
    pos = Position(1, 2)
    bounds.check_ack_sets([(pos, [-2] * 2), (pos, None), (pos, [1])], lambda _: 65)
    with pytest.raises(NotAllowedError, match="its batch of 10 needs at most 1"):
        bounds.check_ack_sets([(pos, [-2] * 2)], lambda _: 10)
    # Unknown size: what the largest accepted batch needs.
    bounds.check_ack_set(pos, [-2] * bounds.max_ack_set_words, None)
    with pytest.raises(NotAllowedError, match="any batch needs at most 13654"):
        bounds.check_ack_set(pos, [-2] * 100_000, None)
    # A stored size beyond any accepted batch is clamped to it.
    assert bounds.batch_size_bound(2**31 - 1) == bounds.max_batch_records
    assert refused(registry, "ack_set") == 2


def test_compaction_keeps_a_batch_claiming_too_much_whole_without_decompressing() -> None:
    registry = CollectorRegistry()
    bounds = InputBounds(1024 * 1024, registry)
    records = 10_000_000
    bomb = zstandard.ZstdCompressor().compress(EMPTY_RECORD * records)
    # Few enough messages to split, but a claim (and body) beyond the bound.
    record = CompactedRecord(
        Position(1, 0), batch_entry(90_000, bomb, pb.ZSTD, 6 * records), None
    )
    parsed = parse_input(record, bounds)
    assert (parsed.kind, parsed.members) == ("opaque", [])
    assert refused(registry, "decompressed_size") == 1
    # A claim within the bound whose body holds more stops at the claim.
    lying = CompactedRecord(
        Position(1, 1),
        batch_entry(1000, zstandard.ZstdCompressor(write_content_size=False).compress(
            EMPTY_RECORD * records), pb.ZSTD, 6000),
        None,
    )
    assert parse_input(lying, bounds).kind == "opaque"


def test_compaction_keeps_a_batch_of_too_many_messages_whole() -> None:
    registry = CollectorRegistry()
    bounds = InputBounds(5 * 1024 * 1024, registry)
    n = BATCH_MESSAGES_TO_SPLIT_MAX + 1
    body = zstandard.ZstdCompressor().compress(EMPTY_RECORD * n)
    record = CompactedRecord(Position(1, 0), batch_entry(n, body, pb.ZSTD, 6 * n), None)
    assert parse_input(record, bounds).kind == "opaque"
    assert parse_input(record, bounds, count=False).kind == "opaque"
    assert refused(registry, "compaction_batch_size") == 1
    n = BATCH_MESSAGES_TO_SPLIT_MAX
    body = zstandard.ZstdCompressor().compress(EMPTY_RECORD * n)
    record = CompactedRecord(Position(1, 1), batch_entry(n, body, pb.ZSTD, 6 * n), None)
    assert len(parse_input(record, bounds).members) == n
