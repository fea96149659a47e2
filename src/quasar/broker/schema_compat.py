"""Schema compatibility: whether a new schema may join a topic's schema history.

A strategy (Pulsar's ``SchemaCompatibilityStrategy``) names who must read whom:

* ``BACKWARD``: the new schema reads data written with the latest one;
* ``FORWARD``: the latest schema reads data written with the new one;
* ``FULL``: both;
* the ``*_TRANSITIVE`` strategies hold the same against every version since the last
  deletion, not only the latest;
* ``ALWAYS_COMPATIBLE`` accepts any schema, ``ALWAYS_INCOMPATIBLE`` none.

"Reads" depends on the type. AVRO and JSON (whose definitions are Avro schemas) use
Avro's resolution rules (``avro_resolution.py``). KEY_VALUE checks its key and value
schemas apart, each by its own type. PROTOBUF_NATIVE schemas read each other when
their root message types have the same name (Pulsar's default check). Every other type
reads only an identical definition. Schemas of different types never read each other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from quasar.errors import (
    REFUSED_SCHEMA_DEFINITION,
    IncompatibleSchema,
    QuasarError,
    tag_refusal,
)
from quasar.protocol.schema_data import SchemaDataError, decode_key_value_schema

from .avro_resolution import AvroDefinitionError, can_read, parse_definition

__all__ = [
    "SchemaDefinition",
    "check_compatible",
    "check_consumer_compatible",
    "check_definition",
    "reads",
]

TYPE_JSON = 2
TYPE_AVRO = 4
TYPE_KEY_VALUE = 15
TYPE_PROTOBUF_NATIVE = 20
_AVRO_BASED = (TYPE_JSON, TYPE_AVRO)

@dataclass(frozen=True)
class SchemaDefinition:
    """What compatibility looks at: the type, its data and its properties."""

    type: int
    data: bytes
    properties: dict[str, str]


def _invalid(message: str) -> QuasarError:
    return tag_refusal(IncompatibleSchema(message), REFUSED_SCHEMA_DEFINITION)


def check_definition(schema: SchemaDefinition) -> None:
    """Refuse a definition that cannot be a schema of its type.

    Raises:
        IncompatibleSchema: an AVRO/JSON definition that is not an Avro schema, a
            malformed KEY_VALUE or PROTOBUF_NATIVE definition (tagged as a refusal of
            hostile input).
    """
    try:
        if schema.type in _AVRO_BASED:
            parse_definition(schema.data)
        elif schema.type == TYPE_KEY_VALUE:
            kv = decode_key_value_schema(schema.data, schema.properties)
            if TYPE_KEY_VALUE in (kv.key_type, kv.value_type):
                raise SchemaDataError("A KeyValue schema cannot contain a KeyValue schema")
            check_definition(SchemaDefinition(kv.key_type, kv.key_data, kv.key_properties))
            check_definition(
                SchemaDefinition(kv.value_type, kv.value_data, kv.value_properties)
            )
        elif schema.type == TYPE_PROTOBUF_NATIVE:
            _root_message(schema.data)
    except (AvroDefinitionError, SchemaDataError) as e:
        raise _invalid(str(e)) from None


def _root_message(data: bytes) -> str:
    try:
        found = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise SchemaDataError("PROTOBUF_NATIVE schema data is not JSON") from None
    name = found.get("rootMessageTypeName") if isinstance(found, dict) else None
    if not isinstance(name, str) or not name:
        raise SchemaDataError("PROTOBUF_NATIVE schema data has no rootMessageTypeName")
    return name


def reads(reader: SchemaDefinition, writer: SchemaDefinition) -> bool:
    """Whether a consumer with ``reader`` reads data written with ``writer``.

    Both definitions have passed ``check_definition``.
    """
    if reader.type != writer.type:
        return False
    if reader.type in _AVRO_BASED:
        return can_read(parse_definition(reader.data), parse_definition(writer.data))
    if reader.type == TYPE_KEY_VALUE:
        r = decode_key_value_schema(reader.data, reader.properties)
        w = decode_key_value_schema(writer.data, writer.properties)
        return r.encoding == w.encoding and reads(
            SchemaDefinition(r.key_type, r.key_data, r.key_properties),
            SchemaDefinition(w.key_type, w.key_data, w.key_properties),
        ) and reads(
            SchemaDefinition(r.value_type, r.value_data, r.value_properties),
            SchemaDefinition(w.value_type, w.value_data, w.value_properties),
        )
    if reader.type == TYPE_PROTOBUF_NATIVE:
        return _root_message(reader.data) == _root_message(writer.data)
    return reader.data == writer.data


def check_compatible(
    new: SchemaDefinition, history: Sequence[SchemaDefinition], strategy: str
) -> None:
    """Whether ``new`` may follow ``history`` (oldest first, since the last deletion)
    under ``strategy`` (never UNDEFINED: the caller resolves it first).

    Raises:
        IncompatibleSchema: it may not, with the reason.
    """
    if not history or strategy == "ALWAYS_COMPATIBLE":
        return
    if strategy == "ALWAYS_INCOMPATIBLE":
        raise IncompatibleSchema(
            "Schema compatibility strategy is ALWAYS_INCOMPATIBLE: no new schema is accepted"
        )
    against = history if strategy.endswith("_TRANSITIVE") else history[-1:]
    base = strategy.removesuffix("_TRANSITIVE")
    for existing in reversed(against):
        if existing.type != new.type:
            raise IncompatibleSchema(
                f"Incompatible schema: type {new.type} cannot follow type {existing.type}"
            )
        backward = base in ("BACKWARD", "FULL")
        forward = base in ("FORWARD", "FULL")
        if backward and not reads(new, existing):
            raise IncompatibleSchema(
                f"Incompatible schema under {strategy}: the new schema cannot read data "
                "written with an existing schema"
            )
        if forward and not reads(existing, new):
            raise IncompatibleSchema(
                f"Incompatible schema under {strategy}: an existing schema cannot read "
                "data written with the new schema"
            )


def check_consumer_compatible(
    reader: SchemaDefinition, history: Sequence[SchemaDefinition], strategy: str
) -> None:
    """Whether a consumer's schema reads the topic's schemas, as Pulsar decides it:
    BACKWARD against the latest under BACKWARD, FORWARD and FORWARD_TRANSITIVE, and
    BACKWARD against every version otherwise (ALWAYS_COMPATIBLE accepts any).

    Raises:
        IncompatibleSchema: it does not.
    """
    if strategy in ("BACKWARD", "FORWARD", "FORWARD_TRANSITIVE"):
        check_compatible(reader, history, "BACKWARD")
    elif strategy == "ALWAYS_COMPATIBLE":
        return
    else:
        check_compatible(reader, history, "BACKWARD_TRANSITIVE")
