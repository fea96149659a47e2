"""``KeyValueSchema``: a key and a value, each with its own schema, in one message.

The names follow Pulsar's Java client (`pulsar`'s Python package has no KeyValue
schema). The schema and payload layouts are in ``quasar.protocol.schema_data``.
"""

from __future__ import annotations

import enum
from typing import Any

from quasar.client.schema_basic import Schema
from quasar.protocol.schema_data import (
    KV_INLINE,
    KV_SEPARATED,
    KeyValueSchemaData,
    decode_key_value,
    encode_key_value,
    encode_key_value_schema,
)

__all__ = ["SCHEMA_TYPE_KEY_VALUE", "KeyValueEncodingType", "KeyValueSchema"]

SCHEMA_TYPE_KEY_VALUE = 15


class KeyValueEncodingType(enum.Enum):
    """Where the key travels: in the payload beside the value (INLINE) or as the
    message key (SEPARATED)."""

    INLINE = KV_INLINE
    SEPARATED = KV_SEPARATED


class KeyValueSchema(Schema):
    """``(key, value)`` tuples, the key encoded by ``key_schema`` and the value by
    ``value_schema``.

    Raises:
        ValueError: ``SEPARATED`` encoding, which quasar's client does not support
            (the key would have to become the message key); a KeyValue sub-schema.
    """

    schema_type = SCHEMA_TYPE_KEY_VALUE
    name = "KeyValue"

    def __init__(
        self,
        key_schema: Schema,
        value_schema: Schema,
        encoding: KeyValueEncodingType = KeyValueEncodingType.INLINE,
    ) -> None:
        if encoding is not KeyValueEncodingType.INLINE:
            raise ValueError(
                "quasar's client supports KeyValue schemas with INLINE encoding only"
            )
        if isinstance(key_schema, KeyValueSchema) or isinstance(value_schema, KeyValueSchema):
            raise ValueError("A KeyValue schema cannot contain another KeyValue schema")
        self.key_schema = key_schema
        self.value_schema = value_schema
        self.encoding = encoding
        self._data, self._properties = encode_key_value_schema(
            KeyValueSchemaData(
                key_name=key_schema.name,
                key_type=key_schema.schema_type,
                key_data=key_schema.definition(),
                key_properties=key_schema.properties(),
                value_name=value_schema.name,
                value_type=value_schema.schema_type,
                value_data=value_schema.definition(),
                value_properties=value_schema.properties(),
                encoding=encoding.value,
            )
        )

    def definition(self) -> bytes:
        return self._data

    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, tuple) or len(obj) != 2:
            raise TypeError("KeyValueSchema encodes (key, value) tuples")
        key, value = obj
        return encode_key_value(
            None if key is None else self.key_schema.encode(key),
            None if value is None else self.value_schema.encode(value),
        )

    def decode(self, data: bytes) -> tuple[Any, Any]:
        """Raises: ValueError: the payload is not in the KeyValue layout."""
        key, value = decode_key_value(data)
        return (
            None if key is None else self.key_schema.decode(key),
            None if value is None else self.value_schema.decode(value),
        )

    def __repr__(self) -> str:
        return f"KeyValueSchema({self.key_schema!r}, {self.value_schema!r})"
