"""The broker's values read off Pulsar's wire messages, for the command handlers."""

from __future__ import annotations

from quasar.broker.schema import SchemaInfo
from quasar.protocol import pb
from quasar.protocol.int64 import INT64_MAX, to_int64
from quasar.storage.api import Position, new_position

__all__ = ["position_of", "schema_info"]

def position_of(mid: pb.MessageIdData) -> Position:
    """The stored position a message id names. Ledger and entry ids are int64 that
    the wire carries as uint64, so -1 (the earliest position) arrives as 2**64-1."""
    ledger, entry = mid.ledgerId, mid.entryId
    if ledger > INT64_MAX or entry > INT64_MAX:
        return Position(to_int64(ledger), to_int64(entry))
    return new_position((ledger, entry))


def schema_info(schema: pb.Schema) -> SchemaInfo:
    """The schema a PRODUCER, SUBSCRIBE or GET_OR_CREATE_SCHEMA carries."""
    return SchemaInfo(
        schema.name,
        int(schema.type),
        bytes(schema.schema_data),
        tuple((kv.key, kv.value) for kv in schema.properties),
    )
