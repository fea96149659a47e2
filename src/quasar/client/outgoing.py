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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from quasar.client.transaction import TransactionImpl
from quasar.protocol import pb
from quasar.protocol.batch import build_batch, encode_plain_batch
from quasar.protocol.txn_id import TxnID

_NO_PROPERTIES: Mapping[str, str] = MappingProxyType({})


class OutgoingMessage:
    """Everything ``send`` was given, with the content already encoded by the schema.

    A plain class whose unset fields fall back to class-level defaults: most messages
    carry a payload and nothing else, and constructing one is on the per-message
    path. Fields are not meant to change after construction (``is_plain`` is
    computed once).
    """

    properties: Mapping[str, str] = _NO_PROPERTIES
    partition_key: str | None = None
    ordering_key: bytes | None = None
    sequence_id: int | None = None
    replicate_to: Sequence[str] = ()
    event_time: int | None = None
    deliver_at_ms: int | None = None
    null_value: bool = False
    txn: TransactionImpl | None = None
    # True when its SingleMessageMetadata holds only payload_size and sequence_id.
    is_plain: bool = True

    def __init__(
        self,
        payload: bytes,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | None = None,
        sequence_id: int | None = None,
        replicate_to: Sequence[str] | None = None,
        event_time: int | None = None,
        deliver_at_ms: int | None = None,
        null_value: bool = False,
        txn: TransactionImpl | None = None,
    ) -> None:
        self.payload = payload
        if properties:
            self.properties = properties
            self.is_plain = False
        if partition_key is not None:
            self.partition_key = partition_key
            self.is_plain = False
        if ordering_key is not None:
            self.ordering_key = ordering_key
            self.is_plain = False
        if sequence_id is not None:
            self.sequence_id = sequence_id
        if replicate_to:
            self.replicate_to = replicate_to
        if event_time is not None:
            self.event_time = event_time
            if event_time:
                self.is_plain = False
        if deliver_at_ms is not None:
            self.deliver_at_ms = deliver_at_ms
        if null_value:
            self.null_value = True
            self.is_plain = False
        if txn is not None:
            self.txn = txn

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"OutgoingMessage({fields})"

    @property
    def txn_id(self) -> TxnID | None:
        return None if self.txn is None else self.txn.txn_id

    @property
    def routing_key(self) -> str | bytes | None:
        """Key used to choose a partition: the partition key, else the ordering key."""
        return self.partition_key or self.ordering_key or None

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


@dataclass(slots=True)
class Batch:
    """The messages of one batch entry, in order, with their sequence ids and
    completion callbacks (parallel lists: no object per message)."""

    messages: list[OutgoingMessage] = field(default_factory=list)
    sequence_ids: list[int] = field(default_factory=list)
    callbacks: list[Any] = field(default_factory=list)
    # Every message is plain (see OutgoingMessage.is_plain).
    plain: bool = True
    # The messages' payload bytes (what they reserved of the client's memory).
    payload_bytes: int = 0

    def __len__(self) -> int:
        return len(self.messages)

    def append(self, message: OutgoingMessage, sequence_id: int, callback: Any) -> None:
        self.messages.append(message)
        self.sequence_ids.append(sequence_id)
        self.callbacks.append(callback)
        if not message.is_plain:
            self.plain = False


class BatchContainer:
    """Messages collected for one batch, bounded by count and payload bytes.

    A message that would push the batch over ``max_bytes`` must start a new batch
    (``has_space`` is False); a batch always accepts its first message, however large,
    so an oversized message is still sent (and rejected by size, if at all, alone).
    """

    __slots__ = ("max_messages", "max_bytes", "batch", "num_bytes")

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max(1, max_messages)
        self.max_bytes = max(1, max_bytes)
        self.batch = Batch()
        self.num_bytes = 0

    def __len__(self) -> int:
        return len(self.batch.messages)

    def has_space(self, message: OutgoingMessage) -> bool:
        count = len(self.batch.messages)
        return not count or (
            count < self.max_messages
            and self.num_bytes + len(message.payload) <= self.max_bytes
        )

    def add(self, message: OutgoingMessage, sequence_id: int, callback: Any) -> bool:
        """Add a message; True when the batch is now full and should be sent."""
        batch = self.batch
        batch.append(message, sequence_id, callback)
        self.num_bytes += len(message.payload)
        return (
            len(batch.messages) >= self.max_messages or self.num_bytes >= self.max_bytes
        )

    def take(self) -> Batch:
        batch, self.batch = self.batch, Batch()
        batch.payload_bytes, self.num_bytes = self.num_bytes, 0
        return batch


def batch_payload(batch: Batch) -> bytes:
    """The uncompressed batch payload: ``[size][SingleMessageMetadata][payload]`` × N."""
    if batch.plain:
        # The common case, written without a protobuf object per message.
        return encode_plain_batch(
            batch.sequence_ids, [m.payload for m in batch.messages]
        )
    return build_batch(
        [
            (m.single_metadata(seq), m.payload)
            for m, seq in zip(batch.messages, batch.sequence_ids, strict=True)
        ]
    )


def fill_batch_metadata(md: Any, batch: Batch) -> None:
    """Outer-metadata fields of a batch entry, copied from its first message."""
    first = batch.messages[0]
    md.num_messages_in_batch = len(batch)
    if first.partition_key is not None:
        md.partition_key = first.partition_key
    if first.ordering_key is not None:
        md.ordering_key = first.ordering_key
    if first.replicate_to:
        md.replicate_to.extend(first.replicate_to)
