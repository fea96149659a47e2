"""``MessageId``: the position of a message, as clients see it.

Compatible with the official client's ``pulsar.MessageId``: same string form
``(ledger,entry,partition,batch_index)``, same ordering (ledger, then entry, then batch
index), and ``serialize()`` produces the same ``MessageIdData`` bytes, so ids stored by
one can be read by the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from google.protobuf.message import DecodeError

from quasar.errors import RemoteProtocolError

from ._generated import pulsar_api_pb2 as pb
from .int64 import INT64_MAX, to_int64, to_uint64

__all__ = ["MessageId"]


@dataclass(frozen=True, slots=True)
class MessageId:
    """A message position: ``(ledger_id, entry_id, partition, batch_index)``.

    ``partition`` is the topic partition index (-1 when the topic is not
    partitioned), ``batch_index`` the index inside a batch entry (-1 for a
    non-batched entry), ``batch_size`` the number of messages in that batch (0 when
    unknown). Equality and hashing ignore ``batch_size``; ordering compares ledger,
    entry and batch index only, as the official client does.
    """

    ledger_id: int
    entry_id: int
    partition: int = -1
    batch_index: int = -1
    batch_size: int = field(default=0, compare=False)

    earliest: ClassVar[MessageId]
    latest: ClassVar[MessageId]

    def _key(self) -> tuple[int, int, int]:
        return (self.ledger_id, self.entry_id, self.batch_index)

    def __lt__(self, other: MessageId) -> bool:
        return self._key() < other._key()

    def __le__(self, other: MessageId) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: MessageId) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: MessageId) -> bool:
        return self._key() >= other._key()

    def __str__(self) -> str:
        return f"({self.ledger_id},{self.entry_id},{self.partition},{self.batch_index})"

    def to_pb(self) -> pb.MessageIdData:
        """Return the ``MessageIdData`` for this id.

        ``partition``, ``batch_index`` and ``batch_size`` are set only when they differ
        from their defaults (-1, -1, 0), as the official client does.
        """
        data = pb.MessageIdData(
            ledgerId=to_uint64(self.ledger_id), entryId=to_uint64(self.entry_id)
        )
        if self.partition != -1:
            data.partition = self.partition
        if self.batch_index != -1:
            data.batch_index = self.batch_index
        if self.batch_size != 0:
            data.batch_size = self.batch_size
        return data

    @classmethod
    def from_pb(cls, data: pb.MessageIdData) -> MessageId:
        """Build a ``MessageId`` from ``MessageIdData``, reading uint64 ids as int64."""
        return cls(
            to_int64(data.ledgerId),
            to_int64(data.entryId),
            data.partition,
            data.batch_index,
            data.batch_size,
        )

    def serialize(self) -> bytes:
        """Return the bytes ``pulsar.MessageId.deserialize()`` accepts."""
        return self.to_pb().SerializeToString()

    @classmethod
    def deserialize(cls, data: bytes) -> MessageId:
        """Parse bytes from ``serialize()`` or from ``pulsar.MessageId.serialize()``.

        For a chunked id, this is the id of the last chunk. Raises
        ``RemoteProtocolError`` if ``data`` is not a valid ``MessageIdData``.
        """
        msg = pb.MessageIdData()
        try:
            msg.ParseFromString(data)
        except DecodeError as exc:
            raise RemoteProtocolError(f"invalid serialized message id: {exc}") from exc
        if not msg.IsInitialized():
            raise RemoteProtocolError("serialized message id lacks ledgerId or entryId")
        return cls.from_pb(msg)


MessageId.earliest = MessageId(-1, -1, -1, -1)
MessageId.latest = MessageId(INT64_MAX, INT64_MAX, -1, -1)
