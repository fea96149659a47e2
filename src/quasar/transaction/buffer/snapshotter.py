"""Writing and reading segmented snapshots (layout in ``snapshot_format``).

The aborted set is a dict in abort-marker order. ``SnapshotWriter`` tracks which
prefix of it already sits in sealed segments (``covered``); everything after that
prefix goes into the index record, and once that tail reaches a segment's capacity
its first ``capacity`` ids are sealed into a new segment. A snapshot therefore costs
one index write (a few KB at most) plus, now and then, one segment write, however
many aborted ids the topic holds.

Write order keeps every durable index consistent: new segments first, then the index
that names them, then deletes of segments an index no longer names (listed as
``garbage`` in that index, so a crash between the two is repaired on recovery).

Everything a snapshot contains is captured synchronously by ``prepare`` at one
instant of the buffer's state; ``write`` then only does I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import islice

from quasar.errors import CorruptRecordError
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import Position

from ..crash_points import crash_point
from .snapshot_format import (
    SegmentRef,
    SnapshotIndex,
    SnapshotSegment,
    decode_index,
    decode_segment,
    encode_index,
    encode_segment,
    segment_capacity,
    segment_key,
)
from .snapshot_store import SnapshotStore
from .txn_state import AbortedTxn

log = logging.getLogger(__name__)

Aborted = list[tuple[TxnID, AbortedTxn]]


@dataclass
class _Segment:
    seq: int
    count: int  # ids written in it
    remaining: int  # of those, ids still in the in-memory aborted set
    last_marker: Position
    pending: Aborted | None  # its content until it is durably written


@dataclass(frozen=True)
class SnapshotPlan:
    segments: list[_Segment]  # to write before the index
    index: SnapshotIndex
    index_bytes: bytes


@dataclass(frozen=True)
class LoadedSnapshot:
    index: SnapshotIndex
    aborted: Aborted  # segments then unsealed ids, minus those whose ledger is gone
    survivors: list[int]  # per index segment: ids that are still retained


class SnapshotWriter:
    """Segment bookkeeping and the write sequence of one topic's snapshots."""

    def __init__(self, store: SnapshotStore, topic: str, segment_size_bytes: int) -> None:
        self._store = store
        self._topic = topic
        self.capacity = segment_capacity(segment_size_bytes, topic)
        self._segments: list[_Segment] = []
        self._covered = 0
        self._next_seq = 0
        self._garbage: list[int] = []
        self.segment_writes = 0
        self.index_writes = 0

    # ------------------------------------------------------------------ bookkeeping

    @property
    def sealed_segments(self) -> int:
        return len(self._segments)

    def unsealed_count(self, aborted_total: int) -> int:
        return aborted_total - self._covered

    def restore(self, loaded: LoadedSnapshot) -> None:
        """Continue from a recovered index (before any new write)."""
        assert not self._segments and self._covered == 0, "restore into a new writer"
        self._next_seq = loaded.index.next_segment_seq
        self._garbage = list(loaded.index.garbage)
        for ref, alive in zip(loaded.index.segments, loaded.survivors, strict=True):
            if alive == 0:
                self._garbage.append(ref.seq)
                continue
            self._segments.append(_Segment(ref.seq, ref.count, alive, ref.last_marker, None))
            self._covered += alive

    def on_trimmed(self, dropped: int) -> None:
        """``dropped`` ids left the front of the aborted set (their ledger is gone)."""
        while dropped and self._segments:
            seg = self._segments[0]
            take = min(dropped, seg.remaining)
            seg.remaining -= take
            self._covered -= take
            dropped -= take
            if seg.remaining == 0:
                self._segments.pop(0)
                # Deleting a key that was never written is harmless.
                self._garbage.append(seg.seq)

    def prepare(
        self,
        aborted: Mapping[TxnID, AbortedTxn],
        max_read_position: Position,
        low_watermarks: Mapping[int, int],
        now_ms: int,
    ) -> SnapshotPlan:
        """Seal full segments and build the index for the state as it is now."""
        tail: Aborted = list(islice(aborted.items(), self._covered, None))
        while len(tail) >= self.capacity:
            chunk, tail = tail[: self.capacity], tail[self.capacity :]
            last = max(a.marker for _, a in chunk)
            self._segments.append(_Segment(self._next_seq, len(chunk), len(chunk), last, chunk))
            self._next_seq += 1
            self._covered += len(chunk)
        index = SnapshotIndex(
            topic=self._topic,
            taken_at_ms=now_ms,
            max_read_position=max_read_position,
            next_segment_seq=self._next_seq,
            low_watermarks=sorted(low_watermarks.items()),
            segments=[SegmentRef(s.seq, s.count, s.last_marker) for s in self._segments],
            garbage=list(self._garbage),
            aborted=tail,
        )
        pending = [s for s in self._segments if s.pending is not None]
        return SnapshotPlan(pending, index, encode_index(index))

    # ------------------------------------------------------------------ I/O

    async def write(self, plan: SnapshotPlan) -> None:
        """Write the plan's new segments, then its index, then delete its garbage.

        Raises:
            Exception: from the store; what was not written is written again by the
                next snapshot.
        """
        for seg in plan.segments:
            if seg.pending is None:
                continue  # written by an earlier plan that failed later
            data = encode_segment(SnapshotSegment(self._topic, seg.seq, seg.pending))
            await self._store.write(segment_key(self._topic, seg.seq), data)
            seg.pending = None
            self.segment_writes += 1
        if plan.segments:
            # Segments are durable, the index naming them is not: recovery must
            # still find the previous index intact beside unreferenced segments.
            crash_point("tb.during_snapshot")
        await self._store.write(self._topic, plan.index_bytes)
        self.index_writes += 1
        for seq in plan.index.garbage:
            await self._store.delete(segment_key(self._topic, seq))
            if seq in self._garbage:
                self._garbage.remove(seq)

    async def delete_all(self) -> None:
        """Remove the index, then every segment it or this writer knows of.

        Raises:
            Exception: from the store.
        """
        raw = await self._store.read(self._topic)
        seqs = {s.seq for s in self._segments} | set(self._garbage)
        if raw is not None:
            index = decode_index(raw)
            seqs |= {s.seq for s in index.segments} | set(index.garbage)
        await self._store.delete(self._topic)
        for seq in sorted(seqs):
            await self._store.delete(segment_key(self._topic, seq))
        self._segments.clear()
        self._garbage.clear()
        self._covered = 0


async def load_snapshot(
    store: SnapshotStore, topic: str, ledger_exists: Callable[[int], bool]
) -> LoadedSnapshot | None:
    """Read ``topic``'s snapshot, or ``None`` if it has none.

    Aborted ids whose marker ledger no longer exists are dropped (retention deleted
    their data). A segment that is missing is tolerated only if its ids are all gone
    that way.

    Raises:
        CorruptRecordError: a record cannot be decoded, names another topic, or a
            segment still needed is missing or does not match its index entry.
        Exception: from the store.
    """
    raw = await store.read(topic)
    if raw is None:
        return None
    index = decode_index(raw)
    if index.topic != topic:
        raise CorruptRecordError(
            f"snapshot under key {topic!r} belongs to topic {index.topic!r}"
        )
    aborted: Aborted = []
    survivors: list[int] = []
    for ref in index.segments:
        raw_seg = await store.read(segment_key(topic, ref.seq))
        if raw_seg is None:
            if ledger_exists(ref.last_marker.ledger_id):
                raise CorruptRecordError(
                    f"snapshot segment {ref.seq} of {topic} is missing"
                )
            survivors.append(0)
            continue
        seg = decode_segment(raw_seg)
        if seg.topic != topic or seg.seq != ref.seq or len(seg.aborted) != ref.count:
            raise CorruptRecordError(
                f"snapshot segment {ref.seq} of {topic} does not match its index"
            )
        alive = [(t, a) for t, a in seg.aborted if ledger_exists(a.marker.ledger_id)]
        survivors.append(len(alive))
        aborted.extend(alive)
    aborted.extend((t, a) for t, a in index.aborted if ledger_exists(a.marker.ledger_id))
    return LoadedSnapshot(index, aborted, survivors)
