"""The broker's values read off Pulsar's wire messages, for the command handlers."""

from __future__ import annotations

from quasar.broker.schema import SchemaInfo
from quasar.errors import (
    REFUSED_CLIENT_NAME,
    REFUSED_NAMESPACE_NAME,
    REFUSED_SUBSCRIPTION_NAME,
    REFUSED_TOPIC_NAME,
    InvalidResourceError,
    InvalidTopicName,
    NotAllowedError,
    tag_refusal,
)
from quasar.protocol import TopicName, pb
from quasar.protocol.int64 import INT64_MAX, to_int64
from quasar.protocol.namespace_name import parse_namespace, parse_topic
from quasar.storage.api import Position, new_position

__all__ = [
    "CLIENT_GIVEN_NAME_BYTES_MAX",
    "SUBSCRIPTION_NAME_BYTES_MAX",
    "TOPIC_NAME_BYTES_MAX",
    "client_given_name",
    "subscription_name",
    "namespace_of",
    "position_of",
    "schema_info",
    "topic_of",
]

# Pulsar sets no length of its own on topic names (its metadata store's path limits
# apply); quasar bounds them so that a name costs little to parse, log and store.
TOPIC_NAME_BYTES_MAX = 4096
# Pulsar sets no length on subscription names; quasar bounds them so that a pending-ack
# log's name (topic, subscription and a suffix) stays far below any file-name limit
# of the storage that holds it.
SUBSCRIPTION_NAME_BYTES_MAX = 1024
# Producer and consumer names are kept per producer or consumer and shown in stats.
CLIENT_GIVEN_NAME_BYTES_MAX = 1024

# Every refusal below is tagged with its reason (quasar.errors.tag_refusal), for
# quasar_hostile_input_refused_total, counted where the request is answered.


def topic_of(raw: str) -> TopicName:
    """The topic a command names. quasar keeps V2 names only (``tenant/ns/topic``);
    a legacy V1 name (``tenant/cluster/ns/topic``) is refused like any invalid one,
    and so is a name longer than ``TOPIC_NAME_BYTES_MAX`` bytes in UTF-8.

    Raises:
        InvalidTopicName: answered on the request; the connection stays open.
    """
    size = _longer_than(raw, TOPIC_NAME_BYTES_MAX)
    if size is not None:
        raise tag_refusal(
            InvalidTopicName(f"Topic name of {size} bytes is longer than {TOPIC_NAME_BYTES_MAX}"),
            REFUSED_TOPIC_NAME,
        )
    try:
        return parse_topic(raw)
    except InvalidTopicName as e:
        tag_refusal(e, REFUSED_TOPIC_NAME)
        raise


def utf8_length(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (a lone surrogate, which protobuf never decodes,
    counts as its 3-byte encoding)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _longer_than(raw: str, limit: int) -> int | None:
    """``raw``'s UTF-8 size if it is over ``limit`` bytes, else None (a character
    takes at most 4 bytes: only long names need encoding to measure)."""
    if len(raw) <= limit // 4:
        return None
    size = utf8_length(raw)
    return size if size > limit else None


def subscription_name(raw: str) -> str:
    """A subscription name a command carries.

    Raises:
        InvalidTopicName: empty, or longer than ``SUBSCRIPTION_NAME_BYTES_MAX`` bytes.
    """
    if not raw:
        raise tag_refusal(InvalidTopicName("Empty subscription name"), REFUSED_SUBSCRIPTION_NAME)
    size = _longer_than(raw, SUBSCRIPTION_NAME_BYTES_MAX)
    if size is not None:
        raise tag_refusal(
            InvalidTopicName(
                f"Subscription name of {size} bytes is longer than {SUBSCRIPTION_NAME_BYTES_MAX}"
            ),
            REFUSED_SUBSCRIPTION_NAME,
        )
    return raw


def client_given_name(raw: str, what: str) -> str:
    """A producer or consumer name a client chose (``what`` says which).

    Raises:
        NotAllowedError: longer than ``CLIENT_GIVEN_NAME_BYTES_MAX`` bytes.
    """
    size = _longer_than(raw, CLIENT_GIVEN_NAME_BYTES_MAX)
    if size is not None:
        raise tag_refusal(
            NotAllowedError(
                f"{what} name of {size} bytes is longer than {CLIENT_GIVEN_NAME_BYTES_MAX}"
            ),
            REFUSED_CLIENT_NAME,
        )
    return raw


def namespace_of(raw: str) -> str:
    """The ``tenant/namespace`` a command names.

    Raises:
        InvalidTopicName: not a valid V2 namespace name (Pulsar's code for bad names).
    """
    try:
        parse_namespace(raw)
    except InvalidResourceError as e:
        raise tag_refusal(InvalidTopicName(str(e)), REFUSED_NAMESPACE_NAME) from None
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
