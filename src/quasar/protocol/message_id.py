"""``MessageIdData``, the wire form of a message position, to and from plain integers.

A position is ``(ledger_id, entry_id, partition, batch_index, batch_size)``. Ledger and
entry ids are Java ``long``s where -1 means "none"; ``MessageIdData`` carries them in
``uint64`` fields, so they are converted with :mod:`quasar.protocol.int64` both ways.
The optional fields are written only when they differ from their defaults
(``partition`` -1, ``batch_index`` -1, ``batch_size`` 0), as the official client does,
so the serialized bytes equal those of ``pulsar.MessageId.serialize()``. The public id
type built on these functions is ``quasar.client.MessageId``.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from quasar.errors import RemoteProtocolError

from ._generated import pulsar_api_pb2 as pb
from .int64 import to_int64, to_uint64

__all__ = ["message_id_data", "message_id_fields", "parse_message_id_data"]


def message_id_data(
    ledger_id: int,
    entry_id: int,
    partition: int = -1,
    batch_index: int = -1,
    batch_size: int = 0,
) -> pb.MessageIdData:
    """The ``MessageIdData`` of a position; default-valued optional fields stay unset."""
    data = pb.MessageIdData(ledgerId=to_uint64(ledger_id), entryId=to_uint64(entry_id))
    if partition != -1:
        data.partition = partition
    if batch_index != -1:
        data.batch_index = batch_index
    if batch_size != 0:
        data.batch_size = batch_size
    return data


def message_id_fields(data: pb.MessageIdData) -> tuple[int, int, int, int, int]:
    """``(ledger_id, entry_id, partition, batch_index, batch_size)`` of ``data``.

    The ``uint64`` ids are read back as the int64 they stand for (``2**64 - 1`` is -1);
    absent optional fields read as their proto defaults (-1, -1, 0).
    """
    return (
        to_int64(data.ledgerId),
        to_int64(data.entryId),
        data.partition,
        data.batch_index,
        data.batch_size,
    )


def parse_message_id_data(raw: bytes) -> pb.MessageIdData:
    """Parse serialized ``MessageIdData`` (from quasar or from the official client).

    For a chunked id, the result is the id of the last chunk.

    Raises:
        RemoteProtocolError: ``raw`` is not a ``MessageIdData``, or lacks the required
            ``ledgerId`` or ``entryId``.
    """
    data = pb.MessageIdData()
    try:
        data.ParseFromString(raw)
    except DecodeError as exc:
        raise RemoteProtocolError(f"invalid serialized message id: {exc}") from exc
    if not data.IsInitialized():
        raise RemoteProtocolError("serialized message id lacks ledgerId or entryId")
    return data
