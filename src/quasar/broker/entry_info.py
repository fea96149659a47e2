"""What the broker needs to know about a stored entry without decompressing it.

Entries are stored verbatim as the producer sent them (``[0x0e01][crc][metaSize][meta]
[payload]``). Dispatchers need a few fields of the outer, never-compressed
``MessageMetadata``: how many messages the entry holds (permits are counted in
messages), the routing key (Key_Shared), the publish time (seek by time), when it may be
delivered (delayed delivery), and whether it is a broker-written marker or part of a
transaction. Parsing the metadata is a few
microseconds with the upb backend, so it is done when needed rather than stored.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from quasar.protocol.batch_limits import is_partial_chunk, stored_batch_size
from quasar.protocol.entry import ParsedEntry, parse_entry
from quasar.storage.api import Position

# The broker keeps the parsed metadata of about as many entries as the entry cache
# (``managedLedgerCacheSizeMB``) can hold bytes of: one info per KiB of cache, never
# fewer than RECENT_INFOS_MIN. A consumer that falls behind by more entries than the
# info cache holds, yet still reads from the entry cache, would otherwise make the
# broker parse every entry's metadata a second time, which costs that consumer's
# catch-up about half again as much broker CPU.
RECENT_INFOS_MIN = 4096
ENTRY_CACHE_BYTES_PER_INFO = 1024
# A cache key is ``(ledger id << _ENTRY_BITS) | entry id``.
_ENTRY_BITS = 40


def info_capacity(entry_cache_bytes: int) -> int:
    """How many entries' parsed metadata to keep beside an entry cache of this size."""
    return max(RECENT_INFOS_MIN, entry_cache_bytes // ENTRY_CACHE_BYTES_PER_INFO)


# Not frozen: a frozen dataclass's __init__ goes through object.__setattr__ per field,
# ~2.5 us per published entry for nine fields. Instances are shared between the
# publish path and the dispatchers and are never mutated (dataclasses.replace makes
# a changed copy); unsafe_hash keeps them hashable as the frozen class was.
@dataclass(slots=True, unsafe_hash=True)
class EntryInfo:
    num_messages: int
    is_batch: bool
    key: bytes | None
    publish_time: int
    event_time: int
    marker_type: int | None
    txn: tuple[int, int] | None  # (most, least) when the entry belongs to a transaction
    producer_name: str
    sequence_id: int
    # A chunk other than the last of a chunked message: deduplication records a
    # chunked message's sequence id only with its last chunk.
    partial_chunk: bool = False
    # When a Shared or Key_Shared subscription may deliver it (ms since the epoch;
    # 0: at once). Of a batch, the outer metadata's: the entry is held back whole.
    deliver_at_time: int = 0


def entry_info(data: bytes) -> EntryInfo:
    """Extract the dispatch-relevant fields of a stored entry.

    A batch's message count is clamped to what its bytes can hold
    (``stored_batch_size``): entries stored before the broker checked it may claim
    any count.

    Raises:
        RemoteProtocolError: the stored bytes do not hold valid metadata (a corrupt
            entry; callers skip it and log rather than stall the subscription).
    """
    return info_of(parse_entry(data), len(data))


def info_of(parsed: ParsedEntry, entry_bytes: int, checked: bool = False) -> EntryInfo:
    """``entry_info`` of an entry already parsed (``entry_bytes``: its length).

    ``checked``: the batch size was already checked against the payload (a SEND's,
    by ``check_published``), so it is taken as is.
    """
    md = parsed.metadata
    is_batch = md.HasField("num_messages_in_batch")
    if md.HasField("ordering_key"):
        key: bytes | None = md.ordering_key
    elif md.HasField("partition_key"):
        key = md.partition_key.encode()
    else:
        key = None
    txn = None
    if md.HasField("txnid_most_bits") and md.HasField("txnid_least_bits"):
        txn = (md.txnid_most_bits, md.txnid_least_bits)
    # Positional, in field order (keyword arguments cost more on this hot path).
    return EntryInfo(
        (
            1 if not is_batch
            else md.num_messages_in_batch if checked
            else stored_batch_size(md, entry_bytes - parsed.payload_offset)
        ),
        is_batch,
        key,
        md.publish_time,
        md.event_time,
        md.marker_type if md.HasField("marker_type") else None,
        txn,
        md.producer_name,
        md.sequence_id,
        is_partial_chunk(md),
        md.deliver_at_time,
    )


class EntryInfoCache:
    """The parsed metadata of the most recently published entries of every topic.

    Tailing consumers get entries right after they are published; keeping their
    ``EntryInfo`` saves parsing the same metadata again at dispatch. One cache serves
    the whole broker, as the entry cache does, and evicts oldest first: ledger ids are
    unique across topics, so ``(ledger, entry)`` keys never collide. Keys are ints
    (never tracked by the garbage collector, unlike ``Position``).
    """

    def __init__(self, max_entries: int = RECENT_INFOS_MIN) -> None:
        self._max = max_entries
        self._infos: OrderedDict[int, EntryInfo] = OrderedDict()

    # Both run once per message: the key is computed inline, not by a helper.
    def put(self, position: Position, info: EntryInfo) -> None:
        infos = self._infos
        infos[(position.ledger_id << _ENTRY_BITS) | position.entry_id] = info
        if len(infos) > self._max:
            infos.popitem(last=False)

    def get(self, position: Position) -> EntryInfo | None:
        if position.entry_id < 0:
            return None
        return self._infos.get((position.ledger_id << _ENTRY_BITS) | position.entry_id)
