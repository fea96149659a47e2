"""The two-phase compactor: the latest message per key, up to a horizon.

Input, in original-position order: the records of the previous compacted ledger (if
any), then the topic's entries after the previous horizon up to the new horizon.
Reading the previous compacted ledger instead of the topic from the start is what lets
ledgers before a horizon be trimmed: after the first compaction, the topic only has to
keep what came after the last horizon.

Phase one reads the input and maps every key to the id ``(position, batch index)`` of
its latest message; a tombstone removes the key. Phase two reads the input again and
writes, in order, every entry holding at least one message that is still the latest
for its key. Two passes keep memory to one map entry per live key instead of holding
the retained data; that map is the one structure not bounded by a setting (Pulsar's
compactor has the same bound: the table's key set must fit in memory).

Pulsar's rules:

* a message without a key (``partition_key`` absent or ``null_partition_key``) does
  not affect any key; it is dropped (``topicCompactionRetainNullKey=false``, Pulsar's
  default since 3.2) or retained as it is, empty or not (``true``);
* a message with an empty payload or ``null_value`` is a tombstone: it removes its key
  and is not retained itself;
* broker markers and messages of aborted transactions are skipped;
* a batch is split: messages that are not the latest for their key are replaced by a
  ``compacted_out`` placeholder (metadata without properties, empty payload) so the
  retained ones keep their batch index; the rebuilt batch is compressed again with the
  entry's codec. A batch kept whole is stored unchanged;
* an encrypted batch cannot be split: it counts as one message with its outer key;
* a batch that cannot be decompressed or parsed is kept whole (as Pulsar does), so
  compaction never silently drops data it cannot read;
* chunks of chunked messages are not retained (Pulsar does not compact them either).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from quasar.errors import RemoteProtocolError
from quasar.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    build_batch,
    compress,
    decompress,
    is_acked,
    make_entry,
    parse_batch,
    parse_entry,
    pb,
)
from quasar.protocol.ack_set import indexes_to_words
from quasar.protocol.batch_limits import (
    REFUSED_COMPACTION_BATCH_SIZE,
    REFUSED_DECOMPRESSED_SIZE,
)
from quasar.protocol.compression import UncompressedSizeTooLarge
from quasar.storage.api import ManagedLedger, ManagedLedgerFactory, Position

from .compacted_ledger import (
    INDEX_INTERVAL_RECORDS,
    CompactedLedger,
    CompactedRecord,
    encode_record,
)
from .entry_info import EntryInfo, entry_info
from .input_bounds import InputBounds

log = logging.getLogger(__name__)

READ_BATCH_ENTRIES = 500  # entries per read of the input
PENDING_WRITES_MAX = 256  # appends to the compacted ledger in flight at once
# Splitting a batch costs about 8 us and 700 bytes per message, all on the event loop.
# A batch of more messages than this is kept whole, unread, like one that cannot be
# parsed (clients batch 1000 messages by default), so that one small, highly
# compressible entry cannot hold the loop for seconds or take hundreds of MB.
BATCH_MESSAGES_TO_SPLIT_MAX = 100_000
# Compaction gives other work on the loop a turn after splitting this many messages.
MESSAGES_PER_LOOP_TURN = 10_000

MessageId = tuple[Position, int]  # (position, batch index; 0 for a single message)


@dataclass(frozen=True)
class _Message:
    index: int
    key: str | None
    tombstone: bool


@dataclass
class _Parsed:
    """One input entry, split into the messages compaction looks at.

    ``kind``: ``single`` (one message), ``batch`` (split into ``members``), ``opaque``
    (kept whole, unread) or ``skip`` (never retained).
    """

    kind: str
    messages: list[_Message] = field(default_factory=list)
    metadata: pb.MessageMetadata | None = None
    members: list[tuple[pb.SingleMessageMetadata, bytes]] = field(default_factory=list)


@dataclass
class CompactionResult:
    """A finished compacted ledger, not yet made current."""

    ledger: ManagedLedger
    index: list[tuple[Position, Position]]
    records: int
    messages_kept: int
    messages_removed: int


def _key(has_key: bool, key: str, null_key: bool) -> str | None:
    return key if has_key and not null_key else None


def parse_input(
    record: CompactedRecord, bounds: InputBounds | None = None, count: bool = True
) -> _Parsed:
    """Split an input entry into messages (only those still alive in ``record``).

    A batch is decompressed only when its ``uncompressed_size`` is within
    ``maxMessageSize`` (``bounds``'s, else the default), and never beyond that size;
    one that claims more, or holds more than ``BATCH_MESSAGES_TO_SPLIT_MAX`` messages,
    is kept whole, unread, like any batch that cannot be split. ``count``: whether
    to count such a batch in ``bounds`` (once per compaction: the first phase).
    """
    try:
        parsed = parse_entry(record.data, verify_checksum=False)
    except RemoteProtocolError:
        log.warning("compaction: skipping unreadable entry %s", record.position)
        return _Parsed("skip")
    md = parsed.metadata
    if md.HasField("marker_type") or md.num_chunks_from_msg > 1:
        return _Parsed("skip")
    outer_key = _key(md.HasField("partition_key"), md.partition_key, md.null_partition_key)
    if not md.HasField("num_messages_in_batch") or len(md.encryption_keys) > 0:
        size = (
            md.uncompressed_size
            if md.compression != pb.NONE
            else len(record.data) - parsed.payload_offset
        )
        empty = size == 0 and len(md.encryption_keys) == 0
        return _Parsed("single", [_Message(0, outer_key, md.null_value or empty)], md)
    if md.num_messages_in_batch > BATCH_MESSAGES_TO_SPLIT_MAX:
        if bounds is not None and count:
            bounds.count(REFUSED_COMPACTION_BATCH_SIZE)
        log.warning("compaction: keeping batch %s of %d messages whole, not splitting it",
                    record.position, md.num_messages_in_batch)
        return _Parsed("opaque", metadata=md)
    try:
        payload = record.data[parsed.payload_offset :]
        if md.compression != pb.NONE:
            limit = (
                bounds.max_uncompressed_size if bounds is not None
                else DEFAULT_MAX_MESSAGE_SIZE
            )
            payload = decompress(md.compression, payload, md.uncompressed_size, limit)
        members = parse_batch(payload, md.num_messages_in_batch)
    except UncompressedSizeTooLarge as exc:
        if bounds is not None and count:
            bounds.count(REFUSED_DECOMPRESSED_SIZE)
        log.warning("compaction: keeping batch %s whole, not decompressing it: %s",
                    record.position, exc)
        return _Parsed("opaque", metadata=md)
    except RemoteProtocolError as exc:
        log.warning("compaction: keeping batch %s whole, cannot split it: %s",
                    record.position, exc)
        return _Parsed("opaque", metadata=md)
    messages = [
        _Message(
            i,
            _key(smd.HasField("partition_key"), smd.partition_key, smd.null_partition_key),
            smd.null_value or len(body) == 0,
        )
        for i, (smd, body) in enumerate(members)
        if not smd.compacted_out
        and (record.retained is None or not is_acked(record.retained, i))
    ]
    return _Parsed("batch", messages, md, members)


def rebuild_batch(
    metadata: pb.MessageMetadata,
    members: list[tuple[pb.SingleMessageMetadata, bytes]],
    keep: set[int],
) -> bytes:
    """A stored entry holding the same batch with the messages not in ``keep``
    replaced by ``compacted_out`` placeholders (same batch size and indexes)."""
    items: list[tuple[pb.SingleMessageMetadata, bytes]] = []
    for i, (smd, body) in enumerate(members):
        if i in keep:
            items.append((smd, body))
            continue
        dead = pb.SingleMessageMetadata()
        dead.CopyFrom(smd)
        # The placeholder carries no data: a tombstoned value must really be gone.
        dead.ClearField("properties")
        dead.compacted_out = True
        dead.payload_size = 0
        items.append((dead, b""))
    raw = build_batch(items)
    md = pb.MessageMetadata()
    md.CopyFrom(metadata)
    if metadata.compression != pb.NONE:
        payload = compress(metadata.compression, raw)
        md.uncompressed_size = len(raw)
    else:
        payload = raw
        if md.HasField("uncompressed_size"):
            md.uncompressed_size = len(raw)
    return make_entry(md, payload)


def retained_mask(batch_size: int, keep: set[int]) -> list[int] | None:
    """The ack-set-layout mask of ``keep``; ``None`` when every message is kept."""
    if len(keep) == batch_size:
        return None
    return indexes_to_words(keep, batch_size)


class TwoPhaseCompactor:
    """Computes and writes one compacted ledger (see the module docstring)."""

    def __init__(
        self,
        topic_ledger: ManagedLedger,
        factory: ManagedLedgerFactory,
        is_aborted: Callable[[EntryInfo, Position], bool],
        bounds: InputBounds | None = None,
        *,
        retain_null_key: bool = False,
    ) -> None:
        self._topic = topic_ledger
        self._factory = factory
        self._is_aborted = is_aborted
        self._bounds = bounds
        self._retain_null_key = retain_null_key

    async def _inputs(
        self,
        horizon: Position,
        previous: CompactedLedger | None,
        previous_horizon: Position | None,
    ) -> AsyncIterator[CompactedRecord]:
        if previous is not None:
            async for record in previous.records():
                yield record
        ml = self._topic
        position = (
            Position(previous_horizon.ledger_id, previous_horizon.entry_id + 1)
            if previous_horizon is not None
            else ml.first_position
        )
        while True:
            entries = await ml.read_entries(position, READ_BATCH_ENTRIES)
            if not entries:
                return
            for e in entries:
                if e.position > horizon:
                    return
                try:
                    info = entry_info(e.data)
                except RemoteProtocolError:
                    log.warning("compaction: skipping unreadable entry %s", e.position)
                    continue
                if info.marker_type is None and not self._is_aborted(info, e.position):
                    yield CompactedRecord(e.position, e.data, None)
            position = ml.next_position(entries[-1].position)

    async def compact(
        self,
        horizon: Position,
        previous: CompactedLedger | None,
        previous_horizon: Position | None,
        output_name: str,
    ) -> CompactionResult:
        """Write the compacted ledger ``output_name`` for everything up to ``horizon``.

        The caller makes it current; on failure the partial ledger is deleted.

        Raises:
            PersistenceError, ManagedLedgerClosed, CorruptRecordError: storage failed.
        """
        latest: dict[str, MessageId] = {}
        seen = 0
        turns = _LoopTurns()
        async for record in self._inputs(horizon, previous, previous_horizon):
            parsed = parse_input(record, self._bounds)
            await turns.after(len(parsed.members))
            for m in parsed.messages:
                # Every message counts: one not kept is a removed event (Pulsar counts
                # dropped keyless messages too).
                seen += 1
                if m.key is None:
                    continue
                if m.tombstone:
                    latest.pop(m.key, None)
                else:
                    latest[m.key] = (record.position, m.index)
        output = await self._factory.open(output_name)
        try:
            return await self._write(output, horizon, previous, previous_horizon,
                                     latest, seen)
        except BaseException:
            await _discard(self._factory, output)
            raise

    async def _write(
        self,
        output: ManagedLedger,
        horizon: Position,
        previous: CompactedLedger | None,
        previous_horizon: Position | None,
        latest: dict[str, MessageId],
        seen: int,
    ) -> CompactionResult:
        pending: list[asyncio.Future[Position]] = []
        index_points: list[tuple[Position, asyncio.Future[Position]]] = []
        records = kept = 0
        turns = _LoopTurns()
        async for record in self._inputs(horizon, previous, previous_horizon):
            parsed = parse_input(record, self._bounds, count=False)
            await turns.after(len(parsed.members))
            if parsed.kind == "skip":
                continue
            if parsed.kind == "opaque":
                data, mask = record.data, record.retained
            else:
                keep = {
                    m.index
                    for m in parsed.messages
                    if (m.key is None and self._retain_null_key)
                    or (m.key is not None
                        and latest.get(m.key) == (record.position, m.index))
                }
                if not keep:
                    continue
                kept += len(keep)
                data, mask = self._retained_entry(record, parsed, keep)
            fut = output.add_entry(encode_record(record.position, data, mask))
            if records % INDEX_INTERVAL_RECORDS == 0:
                index_points.append((record.position, fut))
            records += 1
            pending.append(fut)
            if len(pending) >= PENDING_WRITES_MAX:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
        return CompactionResult(
            output,
            [(original, fut.result()) for original, fut in index_points],
            records,
            kept,
            seen - kept,
        )

    @staticmethod
    def _retained_entry(
        record: CompactedRecord, parsed: _Parsed, keep: set[int]
    ) -> tuple[bytes, list[int] | None]:
        if parsed.kind == "single" or parsed.metadata is None or not parsed.members:
            return record.data, None  # a single message, or an encrypted batch
        alive = {m.index for m in parsed.messages}
        size = len(parsed.members)
        # Messages already dropped by an earlier compaction are placeholders already,
        # so an entry whose surviving messages are all kept is written unchanged.
        data = (
            record.data
            if keep == alive
            else rebuild_batch(parsed.metadata, parsed.members, keep)
        )
        return data, retained_mask(size, keep)


class _LoopTurns:
    """Gives the event loop a turn after every ``MESSAGES_PER_LOOP_TURN`` messages
    split, so a compaction does not hold other clients up for long."""

    def __init__(self) -> None:
        self._since = 0

    async def after(self, messages: int) -> None:
        self._since += messages
        if self._since >= MESSAGES_PER_LOOP_TURN:
            self._since = 0
            await asyncio.sleep(0)


async def _discard(factory: ManagedLedgerFactory, ledger: ManagedLedger) -> None:
    """Delete a partial compacted ledger (best effort: an orphan is cleaned up later)."""
    try:
        await factory.delete(ledger.name)
    except Exception:
        log.exception("could not delete partial compacted ledger %s", ledger.name)
