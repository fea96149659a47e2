"""The public ``MessageId`` of the client, shaped like ``pulsar.MessageId``.

Accessors are methods (``ledger_id()``, ``entry_id()``, ...) as in `pulsar`. Ids order
by (ledger, entry, batch index), as the C++ client compares them; equality also
includes the partition. ``batch_size`` and the topic a consumer received the id on are
carried along but take no part in comparisons. The wire form (``MessageIdData``) is
built and parsed by :mod:`quasar.protocol.message_id`.

A chunked message's id is a :class:`ChunkMessageId`: the position of its last chunk
(what it compares and acknowledges by, as in Pulsar's ``ChunkMessageIdImpl``) with
its first chunk's beside it, printed ``first;last`` as `pulsar` prints one.
"""

from __future__ import annotations

import functools
from typing import ClassVar

from quasar.errors import RemoteProtocolError
from quasar.protocol import pb
from quasar.protocol.int64 import INT64_MAX
from quasar.protocol.message_id import (
    message_id_data,
    message_id_fields,
    parse_message_id_data,
)


@functools.total_ordering
class MessageId:
    """Where a message is stored: ``(ledger, entry, partition, batch_index)``."""

    __slots__ = (
        "_ledger",
        "_entry",
        "_partition",
        "_batch_index",
        "_batch_size",
        "_topic",
    )

    earliest: ClassVar[MessageId]
    latest: ClassVar[MessageId]

    def __init__(
        self,
        partition: int = -1,
        ledger_id: int = -1,
        entry_id: int = -1,
        batch_index: int = -1,
        batch_size: int = 0,
        topic: str | None = None,
    ) -> None:
        self._ledger = int(ledger_id)
        self._entry = int(entry_id)
        self._partition = int(partition)
        self._batch_index = int(batch_index)
        self._batch_size = int(batch_size)
        self._topic = topic

    def ledger_id(self) -> int:
        return self._ledger

    def entry_id(self) -> int:
        return self._entry

    def partition(self) -> int:
        return self._partition

    def batch_index(self) -> int:
        return self._batch_index

    def batch_size(self) -> int:
        return self._batch_size

    def topic_name(self) -> str | None:
        """The topic (or partition) a consumer received this id on, if known."""
        return self._topic

    @property
    def entry_key(self) -> tuple[int, int]:
        return (self._ledger, self._entry)

    def is_batch_member(self) -> bool:
        return self._batch_index >= 0 and self._batch_size > 0

    def with_topic(self, topic: str | None, partition: int | None = None) -> MessageId:
        return MessageId(
            self._partition if partition is None else partition,
            self._ledger,
            self._entry,
            self._batch_index,
            self._batch_size,
            topic,
        )

    # --- wire form -------------------------------------------------------------------

    def to_pb(self, include_batch: bool = False) -> pb.MessageIdData:
        """``MessageIdData`` with ledger and entry (what ACK/SEEK/REDELIVER carry).

        With ``include_batch`` the batch index is set too (SUBSCRIBE's start position).
        """
        return message_id_data(
            self._ledger,
            self._entry,
            batch_index=self._batch_index if include_batch else -1,
        )

    @classmethod
    def from_pb(
        cls, data: pb.MessageIdData, topic: str | None = None, batch_size: int = 0
    ) -> MessageId:
        """The id in ``data``; a non-zero ``batch_size`` overrides the one in ``data``."""
        ledger, entry, partition, batch_index, wire_batch_size = message_id_fields(data)
        return cls(
            partition, ledger, entry, batch_index, batch_size or wire_batch_size, topic
        )

    def serialize(self) -> bytes:
        """Protobuf ``MessageIdData`` bytes, as `pulsar` serializes an id."""
        return bytes(self._data().SerializeToString())

    def _data(self) -> pb.MessageIdData:
        return message_id_data(
            self._ledger,
            self._entry,
            self._partition,
            self._batch_index,
            self._batch_size,
        )

    @staticmethod
    def deserialize(message_id_bytes: bytes, topic: str | None = None) -> MessageId:
        """Inverse of :meth:`serialize`; also reads `pulsar`'s serialized ids.

        Raises:
            ValueError: the bytes are not a ``MessageIdData`` (the official client
                raises ``ValueError`` too, so code ported from it keeps working).
        """
        try:
            data = parse_message_id_data(message_id_bytes)
        except RemoteProtocolError as exc:
            raise ValueError(f"not a serialized message id: {exc}") from exc
        last = MessageId.from_pb(data, topic)
        if data.HasField("first_chunk_message_id"):
            first = MessageId.from_pb(data.first_chunk_message_id, topic)
            return ChunkMessageId(first.with_topic(topic, last.partition()), last)
        return last

    # --- comparison ------------------------------------------------------------------
    #
    # ``total_ordering`` derives ``<=`` as "< or ==", ``>`` as "not < and !=" and ``>=``
    # as "not <". For two ids at the same position in different partitions that gives
    # ``a < b`` and ``a <= b`` false but ``a > b`` and ``a >= b`` true, which is exactly
    # what the C++ client's operators answer; the tests compare every operator with
    # ``pulsar.MessageId``, so keep these four methods as they are.

    def _order_key(self) -> tuple[int, int, int]:
        return (self._ledger, self._entry, self._batch_index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return (
            self._order_key() == other._order_key()
            and self._partition == other._partition
        )

    def __lt__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._order_key() < other._order_key()

    def __hash__(self) -> int:
        return hash((self._ledger, self._entry, self._partition, self._batch_index))

    def __str__(self) -> str:
        return f"({self._ledger},{self._entry},{self._partition},{self._batch_index})"

    def __repr__(self) -> str:
        return f"MessageId{self}"


class ChunkMessageId(MessageId):
    """The id of a chunked message: its last chunk's position, and its first's.

    ``chunk_keys`` are the ``(ledger, entry)`` of every chunk the consumer received
    for the message, all acknowledged together; an id read back by ``deserialize``
    knows only its first and last chunk.
    """

    __slots__ = ("_first", "_chunk_keys")

    def __init__(
        self,
        first: MessageId,
        last: MessageId,
        chunk_keys: tuple[tuple[int, int], ...] = (),
    ) -> None:
        super().__init__(
            last.partition(), last.ledger_id(), last.entry_id(), -1, 0, last.topic_name()
        )
        self._first = first
        self._chunk_keys = chunk_keys or tuple(dict.fromkeys((first.entry_key, last.entry_key)))

    def first_chunk_message_id(self) -> MessageId:
        return self._first

    def last_chunk_message_id(self) -> MessageId:
        return MessageId(self._partition, self._ledger, self._entry, -1, 0, self._topic)

    @property
    def chunk_keys(self) -> tuple[tuple[int, int], ...]:
        return self._chunk_keys

    def with_topic(self, topic: str | None, partition: int | None = None) -> MessageId:
        return ChunkMessageId(
            self._first.with_topic(topic, partition),
            self.last_chunk_message_id().with_topic(topic, partition),
            self._chunk_keys,
        )

    def _data(self) -> pb.MessageIdData:
        data = super()._data()
        first = self._first
        data.first_chunk_message_id.CopyFrom(
            message_id_data(first.ledger_id(), first.entry_id(), first.partition())
        )
        return data

    def __str__(self) -> str:
        return f"{self._first};{super().__str__()}"

    def __repr__(self) -> str:
        return f"ChunkMessageId{self}"


MessageId.earliest = MessageId(-1, -1, -1, -1)
MessageId.latest = MessageId(-1, INT64_MAX, INT64_MAX, -1)
