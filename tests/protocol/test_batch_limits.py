"""What a message's outer metadata may claim: checked without decompressing."""

from __future__ import annotations

import pytest

from quasar.protocol import pb
from quasar.protocol.batch_limits import (
    REFUSED_BATCH_SIZE,
    REFUSED_CHUNK,
    REFUSED_UNCOMPRESSED_SIZE,
    ack_set_words_max,
    batch_records_max,
    check_published,
    is_partial_chunk,
    stored_batch_size,
)

MAX = 5 * 1024 * 1024


def md(
    batch: int | None = None, compression: int = pb.NONE, uncompressed: int | None = None
) -> pb.MessageMetadata:
    m = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0)
    if batch is not None:
        m.num_messages_in_batch = batch
    m.compression = compression
    if uncompressed is not None:
        m.uncompressed_size = uncompressed
    return m


def test_records_and_words() -> None:
    assert batch_records_max(5) == 0
    assert batch_records_max(6) == 1
    assert batch_records_max(MAX) == 873_813
    assert batch_records_max(-1) == 0
    assert [ack_set_words_max(n) for n in (0, 1, 64, 65, 873_813)] == [0, 1, 1, 2, 13_654]


@pytest.mark.parametrize(
    ("metadata", "payload", "num", "reason"),
    [
        (md(), 10, 1, None),
        (md(2), 12, 2, None),
        (md(3), 12, 3, REFUSED_BATCH_SIZE),  # 12 bytes hold two records
        (md(0), 12, 1, REFUSED_BATCH_SIZE),
        (md(-1_000_000), 12, 1, REFUSED_BATCH_SIZE),
        (md(2**31 - 1), 100, 1, REFUSED_BATCH_SIZE),
        (md(2), 12, -1_000_000, REFUSED_BATCH_SIZE),
        (md(2), 12, 0, REFUSED_BATCH_SIZE),
        (md(2), 12, 3, REFUSED_BATCH_SIZE),
        (md(), 3, 1, None),  # a small single message
        (md(), 3, 2, REFUSED_BATCH_SIZE),
        # Compressed: the claimed uncompressed size bounds the records.
        (md(10_000_000, pb.ZSTD, 60_000_000), 5_500, 10_000_000, REFUSED_UNCOMPRESSED_SIZE),
        (md(None, pb.ZLIB, 2**31), 1 << 20, 1, REFUSED_UNCOMPRESSED_SIZE),
        (md(800_000, pb.ZSTD, 4_800_000), 100, 800_000, None),
        (md(800_001, pb.ZSTD, 4_800_000), 100, 800_001, REFUSED_BATCH_SIZE),
        (md(2, pb.ZSTD), 100, 2, REFUSED_BATCH_SIZE),  # no uncompressed_size at all
    ],
)
def test_check_published(
    metadata: pb.MessageMetadata, payload: int, num: int, reason: str | None
) -> None:
    refusal = check_published(metadata, payload, num, MAX)
    assert (refusal.reason if refusal else None) == reason


def test_a_chunk_may_claim_the_whole_message_size() -> None:
    chunk = md(None, pb.ZSTD, 50 * 1024 * 1024)
    chunk.num_chunks_from_msg, chunk.chunk_id = 12, 0
    assert check_published(chunk, MAX, 1, MAX) is None


@pytest.mark.parametrize(
    ("metadata", "payload", "count"),
    [
        (md(2), 12, 2),
        (md(-1_000_000), 12, 1),
        (md(0), 12, 1),
        (md(2**31 - 1), 100, 1),
        (md(3, pb.LZ4, 18), 10, 3),
        (md(4, pb.LZ4, 18), 10, 1),
    ],
)
def test_stored_batch_size_counts_an_absurd_claim_as_one(
    metadata: pb.MessageMetadata, payload: int, count: int
) -> None:
    assert stored_batch_size(metadata, payload) == count


def chunk_md(chunk_id: int, num_chunks: int, batch: int | None = None) -> pb.MessageMetadata:
    m = md(batch)
    m.uuid, m.chunk_id, m.num_chunks_from_msg = "p-0", chunk_id, num_chunks
    return m


@pytest.mark.parametrize(
    ("metadata", "num", "reason"),
    [
        (chunk_md(0, 3), 1, None),
        (chunk_md(2, 3), 1, None),
        (chunk_md(3, 3), 1, REFUSED_CHUNK),  # beyond the last chunk
        (chunk_md(-1, 3), 1, REFUSED_CHUNK),
        (chunk_md(0, -2), 1, REFUSED_CHUNK),
        (chunk_md(0, 3, batch=2), 2, REFUSED_CHUNK),  # chunks are never batched
        (chunk_md(0, 3), 2, REFUSED_CHUNK),
        (chunk_md(0, 1), 1, None),  # one chunk: a plain message
    ],
)
def test_chunk_claims(metadata: pb.MessageMetadata, num: int, reason: str | None) -> None:
    refusal = check_published(metadata, 12, num, MAX)
    assert (refusal.reason if refusal else None) == reason


def test_only_chunks_before_the_last_are_partial() -> None:
    assert [is_partial_chunk(chunk_md(i, 3)) for i in range(3)] == [True, True, False]
    assert is_partial_chunk(md()) is False
