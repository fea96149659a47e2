"""The broker's values read off Pulsar's wire messages, for the command handlers."""

from __future__ import annotations

from quasar.broker.schema import SchemaInfo
from quasar.errors import InvalidResourceError, InvalidTopicName
from quasar.protocol import TopicName, pb
from quasar.protocol.int64 import INT64_MAX, to_int64
from quasar.protocol.namespace_name import parse_namespace, parse_topic
from quasar.storage.api import Position, new_position

__all__ = [
    "TOPIC_NAME_BYTES_MAX",
    "namespace_of",
    "position_of",
    "schema_info",
    "topic_of",
]

# Pulsar sets no length of its own on topic names (its metadata store's path limits
# apply); quasar bounds them so that a name costs little to parse, log and store.
TOPIC_NAME_BYTES_MAX = 4096


def topic_of(raw: str) -> TopicName:
    """The topic a command names. quasar keeps V2 names only (``tenant/ns/topic``);
    a legacy V1 name (``tenant/cluster/ns/topic``) is refused like any invalid one,
    and so is a name longer than ``TOPIC_NAME_BYTES_MAX`` bytes in UTF-8.

    Raises:
        InvalidTopicName: answered on the request; the connection stays open.
    """
    # A character takes at most 4 bytes: only long names need encoding to measure.
    if len(raw) > TOPIC_NAME_BYTES_MAX // 4 and utf8_length(raw) > TOPIC_NAME_BYTES_MAX:
        raise InvalidTopicName(
            f"Topic name of {utf8_length(raw)} bytes is longer than {TOPIC_NAME_BYTES_MAX}"
        )
    return parse_topic(raw)


def utf8_length(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (a lone surrogate, which protobuf never decodes,
    counts as its 3-byte encoding)."""
    return len(text.encode("utf-8", "surrogatepass"))


def namespace_of(raw: str) -> str:
    """The ``tenant/namespace`` a command names.

    Raises:
        InvalidTopicName: not a valid V2 namespace name (Pulsar's code for bad names).
    """
    try:
        parse_namespace(raw)
    except InvalidResourceError as e:
        raise InvalidTopicName(str(e)) from None
    return raw


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
