"""Schemas, with the names of `pulsar.schema`: how values become payload bytes and
back, and what a producer or consumer registers with the broker.

* ``BytesSchema`` (the default), ``StringSchema``, ``JsonSchema``: ``schema_basic``;
* ``AvroSchema``: ``schema_avro``; ``ProtobufNativeSchema``: ``schema_protobuf``;
* ``KeyValueSchema`` and ``KeyValueEncodingType`` (Pulsar's Java names; `pulsar` has
  none): ``schema_kv``;
* ``Record`` and its field types: ``record``.

Pulsar's AUTO_PRODUCE_BYTES and AUTO_CONSUME schemas are not implemented by quasar's
client: ``AutoProduceBytesSchema`` and ``AutoConsumeSchema`` raise
``NotImplementedError`` when built.
"""

from __future__ import annotations

from typing import Any, NoReturn

from quasar.client.record import (
    Array,
    Boolean,
    Bytes,
    Double,
    Field,
    Float,
    Integer,
    Long,
    Map,
    Null,
    Record,
    String,
)
from quasar.client.schema_avro import AvroSchema
from quasar.client.schema_basic import (
    SCHEMA_TYPE_JSON,
    SCHEMA_TYPE_NONE,
    SCHEMA_TYPE_STRING,
    BytesSchema,
    JsonSchema,
    Schema,
    StringSchema,
)
from quasar.client.schema_kv import KeyValueEncodingType, KeyValueSchema
from quasar.client.schema_protobuf import ProtobufNativeSchema

__all__ = [
    "SCHEMA_TYPE_JSON",
    "SCHEMA_TYPE_NONE",
    "SCHEMA_TYPE_STRING",
    "Array",
    "AutoConsumeSchema",
    "AutoProduceBytesSchema",
    "AvroSchema",
    "Boolean",
    "Bytes",
    "BytesSchema",
    "Double",
    "Field",
    "Float",
    "Integer",
    "JsonSchema",
    "KeyValueEncodingType",
    "KeyValueSchema",
    "Long",
    "Map",
    "Null",
    "ProtobufNativeSchema",
    "Record",
    "Schema",
    "String",
    "StringSchema",
]


def _unsupported(name: str) -> NoReturn:
    raise NotImplementedError(
        f"{name} is not supported by quasar's client (nor by the official Python "
        "client); use the topic's own schema class"
    )


class AutoProduceBytesSchema(Schema):
    """Pulsar's AUTO_PRODUCE_BYTES: not supported (raises on construction)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _unsupported("AutoProduceBytesSchema")


class AutoConsumeSchema(Schema):
    """Pulsar's AUTO_CONSUME: not supported (raises on construction)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _unsupported("AutoConsumeSchema")
