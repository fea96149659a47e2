"""The broker's values read off Pulsar's wire messages, for the command handlers."""

from __future__ import annotations

from quasar.broker.schema import SchemaInfo
from quasar.errors import InvalidResourceError, InvalidTopicName, NotAllowedError
from quasar.protocol import TopicName, pb
from quasar.protocol.int64 import INT64_MAX, to_int64
from quasar.protocol.namespace_name import parse_namespace, parse_topic
from quasar.storage.api import Position, new_position

__all__ = ["namespace_of", "persistent_topic_of", "position_of", "schema_info", "topic_of"]


def topic_of(raw: str) -> TopicName:
    """The topic a command names. quasar keeps V2 names only (``tenant/ns/topic``);
    a legacy V1 name (``tenant/cluster/ns/topic``) is refused like any invalid one.

    Raises:
        InvalidTopicName: answered on the request; the connection stays open.
    """
    return parse_topic(raw)


def persistent_topic_of(raw: str) -> TopicName:
    """``topic_of`` for a command that only a persistent topic can serve (a
    transaction's partitions and subscriptions: a commit could never reach another).

    Raises:
        InvalidTopicName: as ``topic_of``.
        NotAllowedError: a non-persistent topic, as PRODUCER and SUBSCRIBE answer it.
    """
    name = parse_topic(raw)
    if name.domain != "persistent":
        raise NotAllowedError("non-persistent topics are not supported by quasar")
    return name


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
