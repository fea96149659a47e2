"""Messages on their way out: the producer's view before they become SEND frames.

A single (unbatched) message becomes one entry whose ``MessageMetadata`` carries its
properties and keys. Batched messages become ``SingleMessageMetadata`` records inside
one entry (protocol §4.1); the outer metadata then copies the first message's keys and
replication settings, and carries ``num_messages_in_batch`` (its presence is what makes
the consumer treat the entry as a batch).

A message sent in a transaction carries the transaction (``txn``); its entry's
``MessageMetadata`` and its SEND then carry ``txnid_most_bits`` / ``txnid_least_bits``.
A batch holds messages of one transaction only, or of none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from quasar.protocol import pb
from quasar.protocol.batch import build_batch, encode_plain_batch

if TYPE_CHECKING:
    from quasar.client.transaction import TransactionImpl
    from quasar.client.txn_state import TxnID


@dataclass
class OutgoingMessage:
    """Everything ``send`` was given, with the content already encoded by the schema."""

    payload: bytes
    properties: dict[str, str] = field(default_factory=dict)
    partition_key: str | None = None
    ordering_key: bytes | None = None
    sequence_id: int | None = None
    replicate_to: list[str] = field(default_factory=list)
    event_time: int | None = None
    deliver_at_ms: int | None = None
    null_value: bool = False
    txn: TransactionImpl | None = None

    @property
    def txn_id(self) -> TxnID | None:
        return None if self.txn is None else self.txn.txn_id

    @property
    def routing_key(self) -> str | bytes | None:
        """Key used to choose a partition: the partition key, else the ordering key."""
        return self.partition_key or self.ordering_key or None

    @property
    def is_plain(self) -> bool:
        """True when its SingleMessageMetadata holds only payload_size and sequence_id."""
        return (
            not self.properties
            and self.partition_key is None
            and self.ordering_key is None
            and not self.event_time
            and not self.null_value
        )

    def fill_metadata(self, md: Any) -> None:
        """Per-message fields of an unbatched entry's ``MessageMetadata``."""
        for k, v in self.properties.items():
            md.properties.add(key=k, value=v)
        if self.partition_key is not None:
            md.partition_key = self.partition_key
        if self.ordering_key is not None:
            md.ordering_key = self.ordering_key
        if self.replicate_to:
            md.replicate_to.extend(self.replicate_to)
        if self.event_time:
            md.event_time = self.event_time
        if self.deliver_at_ms is not None:
            md.deliver_at_time = self.deliver_at_ms
        if self.null_value:
            md.null_value = True

    def single_metadata(self, sequence_id: int) -> Any:
        """The ``SingleMessageMetadata`` of this message inside a batch."""
        smm = pb.SingleMessageMetadata(
            payload_size=len(self.payload), sequence_id=sequence_id
        )
        for k, v in self.properties.items():
            smm.properties.add(key=k, value=v)
        if self.partition_key is not None:
            smm.partition_key = self.partition_key
        if self.ordering_key is not None:
            smm.ordering_key = self.ordering_key
        if self.event_time:
            smm.event_time = self.event_time
        if self.null_value:
            smm.null_value = True
        return smm


@dataclass
class BatchItem:
    message: OutgoingMessage
    sequence_id: int
    callback: Any


class BatchContainer:
    """Messages collected for one batch, bounded by count and payload bytes.

    A message that would push the batch over ``max_bytes`` must start a new batch
    (``has_space`` is False); a batch always accepts its first message, however large,
    so an oversized message is still sent (and rejected by size, if at all, alone).
    """

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max(1, max_messages)
        self.max_bytes = max(1, max_bytes)
        self.items: list[BatchItem] = []
        self.num_bytes = 0
        # Every message so far is plain (see OutgoingMessage.is_plain).
        self.plain = True

    def __len__(self) -> int:
        return len(self.items)

    def has_space(self, message: OutgoingMessage) -> bool:
        if not self.items:
            return True
        return (
            len(self.items) < self.max_messages
            and self.num_bytes + len(message.payload) <= self.max_bytes
        )

    def add(self, item: BatchItem) -> bool:
        """Add a message; True when the batch is now full and should be sent."""
        items = self.items
        items.append(item)
        message = item.message
        self.num_bytes += len(message.payload)
        if self.plain and not message.is_plain:
            self.plain = False
        return len(items) >= self.max_messages or self.num_bytes >= self.max_bytes

    def take(self) -> list[BatchItem]:
        items, self.items, self.num_bytes = self.items, [], 0
        self.plain = True
        return items


def batch_payload(items: list[BatchItem], plain: bool | None = None) -> bytes:
    """The uncompressed batch payload: ``[size][SingleMessageMetadata][payload]`` × N.

    ``plain``: whether every message is plain, if the caller knows (None: check).
    """
    if plain is None:
        plain = all(it.message.is_plain for it in items)
    if plain:
        # The common case, written without a protobuf object per message.
        return encode_plain_batch([(it.sequence_id, it.message.payload) for it in items])
    return build_batch(
        [
            (it.message.single_metadata(it.sequence_id), it.message.payload)
            for it in items
        ]
    )


def fill_batch_metadata(md: Any, items: list[BatchItem]) -> None:
    """Outer-metadata fields of a batch entry, copied from its first message."""
    first = items[0].message
    md.num_messages_in_batch = len(items)
    if first.partition_key is not None:
        md.partition_key = first.partition_key
    if first.ordering_key is not None:
        md.ordering_key = first.ordering_key
    if first.replicate_to:
        md.replicate_to.extend(first.replicate_to)
