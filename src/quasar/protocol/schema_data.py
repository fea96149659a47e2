"""Schema types and the KeyValue encodings, shared by the broker and the client.

Schema types travel as ``Schema.Type`` numbers on the wire and as Pulsar's
``SchemaType`` names in the admin API (``"AVRO"``, ``"KEY_VALUE"`` ...).

A KeyValue schema (type 15) carries two schemas in one. Its ``schema_data`` is::

    +----------------+-----------------+------------------+-------------------+
    | int32 key_len  | key schema data | int32 value_len  | value schema data |
    +----------------+-----------------+------------------+-------------------+

(big-endian lengths; -1 stands for "no data"), and its properties name the two
halves and the payload layout:

    key.schema.name / key.schema.type / key.schema.properties (a JSON object)
    value.schema.name / value.schema.type / value.schema.properties
    kv.encoding.type = INLINE | SEPARATED

A KeyValue *payload* has the same two-length layout with the encoded key and value
(INLINE); with SEPARATED the payload is the value alone and the key travels, base64,
as the message's partition key.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

__all__ = [
    "KV_ENCODING_PROPERTY",
    "KV_INLINE",
    "KV_SEPARATED",
    "SCHEMA_TYPE_NAMES",
    "SCHEMA_TYPES_BY_NAME",
    "KeyValueSchemaData",
    "SchemaDataError",
    "decode_key_value",
    "decode_key_value_schema",
    "encode_key_value",
    "encode_key_value_schema",
    "schema_type_name",
    "schema_type_of",
]

# Pulsar's SchemaType names by wire number (Schema.Type).
SCHEMA_TYPE_NAMES: dict[int, str] = {
    0: "NONE", 1: "STRING", 2: "JSON", 3: "PROTOBUF", 4: "AVRO", 5: "BOOLEAN",
    6: "INT8", 7: "INT16", 8: "INT32", 9: "INT64", 10: "FLOAT", 11: "DOUBLE",
    12: "DATE", 13: "TIME", 14: "TIMESTAMP", 15: "KEY_VALUE", 16: "INSTANT",
    17: "LOCAL_DATE", 18: "LOCAL_TIME", 19: "LOCAL_DATE_TIME", 20: "PROTOBUF_NATIVE",
}
SCHEMA_TYPES_BY_NAME: dict[str, int] = {v: k for k, v in SCHEMA_TYPE_NAMES.items()}
# Pulsar's BYTES is "no schema" on the wire.
SCHEMA_TYPES_BY_NAME["BYTES"] = 0

KV_ENCODING_PROPERTY = "kv.encoding.type"
KV_INLINE = "INLINE"
KV_SEPARATED = "SEPARATED"

_LEN = struct.Struct(">i")


class SchemaDataError(ValueError):
    """Schema data or a KeyValue payload that does not decode."""


def schema_type_name(type_number: int) -> str:
    """Pulsar's name of a wire schema type (unknown numbers keep their number)."""
    return SCHEMA_TYPE_NAMES.get(type_number, str(type_number))


def schema_type_of(name: str) -> int:
    """The wire number of a Pulsar schema type name.

    Raises:
        SchemaDataError: no such type.
    """
    try:
        return SCHEMA_TYPES_BY_NAME[name.upper()]
    except KeyError:
        raise SchemaDataError(f"Unknown schema type: {name!r}") from None


def encode_key_value(key: bytes | None, value: bytes | None) -> bytes:
    """Two byte strings in the KeyValue layout (None is written as length -1)."""
    out = bytearray()
    for part in (key, value):
        if part is None:
            out += _LEN.pack(-1)
        else:
            out += _LEN.pack(len(part)) + part
    return bytes(out)


def decode_key_value(data: bytes) -> tuple[bytes | None, bytes | None]:
    """The key and value of the KeyValue layout.

    Raises:
        SchemaDataError: the lengths do not fit the data.
    """
    parts: list[bytes | None] = []
    offset = 0
    for _ in range(2):
        if offset + 4 > len(data):
            raise SchemaDataError("KeyValue data is truncated")
        (length,) = _LEN.unpack_from(data, offset)
        offset += 4
        if length < 0:
            parts.append(None)
            continue
        if offset + length > len(data):
            raise SchemaDataError("KeyValue length is beyond the data")
        parts.append(bytes(data[offset : offset + length]))
        offset += length
    return parts[0], parts[1]


@dataclass(frozen=True)
class KeyValueSchemaData:
    """The two halves of a KeyValue schema: each a (name, type number, data,
    properties) and the payload encoding."""

    key_name: str
    key_type: int
    key_data: bytes
    key_properties: dict[str, str]
    value_name: str
    value_type: int
    value_data: bytes
    value_properties: dict[str, str]
    encoding: str = KV_INLINE


def encode_key_value_schema(kv: KeyValueSchemaData) -> tuple[bytes, dict[str, str]]:
    """``schema_data`` and properties of a KeyValue schema."""
    data = encode_key_value(kv.key_data, kv.value_data)
    properties = {
        "key.schema.name": kv.key_name,
        "key.schema.type": schema_type_name(kv.key_type),
        "key.schema.properties": json.dumps(kv.key_properties, sort_keys=True),
        "value.schema.name": kv.value_name,
        "value.schema.type": schema_type_name(kv.value_type),
        "value.schema.properties": json.dumps(kv.value_properties, sort_keys=True),
        KV_ENCODING_PROPERTY: kv.encoding,
    }
    return data, properties


def _properties(raw: str | None) -> dict[str, str]:
    if not raw:
        return {}
    try:
        found = json.loads(raw)
    except ValueError:
        raise SchemaDataError("KeyValue sub-schema properties are not JSON") from None
    if not isinstance(found, dict):
        raise SchemaDataError("KeyValue sub-schema properties are not a JSON object")
    return {str(k): str(v) for k, v in found.items()}


def decode_key_value_schema(data: bytes, properties: dict[str, str]) -> KeyValueSchemaData:
    """The halves of a KeyValue schema. A half without a type property is BYTES, as
    Pulsar reads old KeyValue schemas.

    Raises:
        SchemaDataError: malformed data, an unknown sub-schema type or encoding.
    """
    key, value = decode_key_value(data)
    encoding = properties.get(KV_ENCODING_PROPERTY, KV_INLINE).upper()
    if encoding not in (KV_INLINE, KV_SEPARATED):
        raise SchemaDataError(f"Unknown KeyValue encoding: {encoding!r}")
    return KeyValueSchemaData(
        key_name=properties.get("key.schema.name", ""),
        key_type=schema_type_of(properties.get("key.schema.type", "BYTES")),
        key_data=key or b"",
        key_properties=_properties(properties.get("key.schema.properties")),
        value_name=properties.get("value.schema.name", ""),
        value_type=schema_type_of(properties.get("value.schema.type", "BYTES")),
        value_data=value or b"",
        value_properties=_properties(properties.get("value.schema.properties")),
        encoding=encoding,
    )
