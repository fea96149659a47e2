"""The schema registry as the admin API (``/admin/v2/schemas``) sees it, in Pulsar's
JSON shapes.

A schema in an answer (Pulsar's ``GetSchemaResponse``)::

    {"version": 3, "type": "AVRO", "timestamp": 1700000000000,
     "data": "<the definition as text>", "properties": {"k": "v"}}

``data`` is the definition as UTF-8 text; a KEY_VALUE schema's is a JSON object
``{"key": ..., "value": ...}`` of its two definitions (each parsed JSON when it is
JSON, else its text), and an upload (Pulsar's ``PostSchemaPayload``:
``{"type", "schema", "properties"}``) of a KEY_VALUE schema uses the same form.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from quasar.errors import (
    REFUSED_SCHEMA_DEFINITION,
    BadRequestError,
    ResourceNotFoundError,
    tag_refusal,
)
from quasar.protocol.schema_data import (
    SchemaDataError,
    decode_key_value_schema,
    encode_key_value,
    schema_type_name,
    schema_type_of,
)

from .schema import SchemaInfo, SchemaRegistry, StoredSchema

__all__ = ["SchemaAdmin"]

TYPE_KEY_VALUE = 15


def _text(data: bytes) -> Any:
    """A sub-schema definition for a KEY_VALUE answer: JSON when it parses."""
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return data.decode("utf-8", errors="replace")


def _data_text(info: SchemaInfo) -> str:
    if info.type == TYPE_KEY_VALUE:
        try:
            kv = decode_key_value_schema(info.data, dict(info.properties))
        except SchemaDataError:
            return info.data.decode("utf-8", errors="replace")
        return json.dumps({"key": _text(kv.key_data), "value": _text(kv.value_data)})
    return info.data.decode("utf-8", errors="replace")


def schema_json(stored: StoredSchema) -> dict[str, Any]:
    """Pulsar's ``GetSchemaResponse`` of one version."""
    info = stored.info
    return {
        "version": stored.version,
        "type": schema_type_name(info.type),
        "timestamp": stored.timestamp,
        "data": _data_text(info),
        "properties": dict(info.properties),
    }


def _bad(message: str) -> BadRequestError:
    return tag_refusal(BadRequestError(message), REFUSED_SCHEMA_DEFINITION)


def _sub_schema_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()


def schema_of_payload(name: str, payload: Any) -> SchemaInfo:
    """A ``PostSchemaPayload`` as the schema it registers, named ``name``.

    Raises:
        BadRequestError: not a payload (tagged as a refusal of hostile input).
    """
    if not isinstance(payload, dict):
        raise _bad("The schema payload must be a JSON object")
    kind = payload.get("type")
    text = payload.get("schema", "")
    props = payload.get("properties") or {}
    if not isinstance(kind, str) or not isinstance(text, str) or not isinstance(props, dict):
        raise _bad("The schema payload needs a string type and schema and object properties")
    try:
        type_number = schema_type_of(kind)
    except SchemaDataError as e:
        raise _bad(str(e)) from None
    properties = tuple(sorted((str(k), str(v)) for k, v in props.items()))
    if type_number == TYPE_KEY_VALUE:
        try:
            halves = json.loads(text)
        except ValueError:
            raise _bad("A KEY_VALUE schema is a JSON object with key and value") from None
        if not isinstance(halves, dict):
            raise _bad("A KEY_VALUE schema is a JSON object with key and value")
        data = encode_key_value(
            _sub_schema_bytes(halves.get("key")), _sub_schema_bytes(halves.get("value"))
        )
        return SchemaInfo(name, type_number, data, properties)
    return SchemaInfo(name, type_number, text.encode(), properties)


class SchemaAdmin:
    """The admin operations on one broker's registry. ``key_of(topic)``: the
    registry key of a full topic name (partitions share their topic's)."""

    def __init__(self, registry: SchemaRegistry, key_of: Callable[[str], str]) -> None:
        self._registry = registry
        self._key_of = key_of

    @staticmethod
    def _name(topic: str) -> str:
        return topic.rsplit("/", 1)[-1]

    def get(self, topic: str, version: int | None = None) -> dict[str, Any]:
        """Raises: ResourceNotFoundError: no such (live) version."""
        key = self._key_of(topic)
        history = self._registry.history(key)
        if version is None:
            found = history[-1] if history else None
        else:
            found = history[version] if 0 <= version < len(history) else None
        if found is None or found.deleted:
            raise ResourceNotFoundError("Schema not found")
        return schema_json(found)

    def all_versions(self, topic: str) -> dict[str, Any]:
        """Pulsar's ``GetAllVersionsSchemaResponse``: the live versions."""
        live = self._registry.live(self._key_of(topic))
        return {"getSchemaResponses": [schema_json(s) for s in live]}

    def upload(self, topic: str, payload: Any) -> dict[str, Any]:
        """Pulsar's ``PostSchemaResponse``. An upload is an operator's act: the
        namespace's auto-update setting, which governs producers, does not apply.

        Raises:
            IncompatibleSchema (409): incompatible or malformed.
            BadRequestError: not a payload.
        """
        schema = schema_of_payload(self._name(topic), payload)
        version = self._registry.put_if_absent(self._key_of(topic), schema, producer=False)
        return {"version": {"version": version}}

    def delete(self, topic: str) -> dict[str, Any]:
        """Pulsar's ``DeleteSchemaResponse``.

        Raises:
            ResourceNotFoundError: no schema to delete.
        """
        return {"version": self._registry.delete(self._key_of(topic))}

    def compatibility(self, topic: str, payload: Any) -> dict[str, Any]:
        """Pulsar's ``IsCompatibilityResponse`` for a payload."""
        key = self._key_of(topic)
        schema = schema_of_payload(self._name(topic), payload)
        strategy = self._registry.policy(key).strategy
        return {
            "compatibility": self._registry.is_compatible(key, schema, strategy),
            "schemaCompatibilityStrategy": strategy,
        }

    def version_of(self, topic: str, payload: Any) -> dict[str, Any]:
        """Pulsar's ``LongSchemaVersion`` of an identical live version.

        Raises:
            ResourceNotFoundError: no live version is identical.
        """
        key = self._key_of(topic)
        schema = schema_of_payload(self._name(topic), payload)
        version = self._registry.version_of(key, schema)
        if version is None:
            raise ResourceNotFoundError("Schema not found")
        return {"version": version}
