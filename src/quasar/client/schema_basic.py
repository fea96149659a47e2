"""The schema base class and the schemas of plain values: bytes, strings, JSON.

``BytesSchema`` (the default) sends no schema to the broker, like `pulsar`.
``StringSchema`` sends ``Schema{type=String}``. ``JsonSchema(record_cls)`` sends
``Schema{type=Json}`` whose ``schema_data`` is an Avro record definition (from a
``Record`` class, or built from a dataclass's or annotated class's type annotations)
and encodes values as JSON objects. Definitions are JSON written as `pulsar` writes
them (``indent=True``), so both clients register byte-identical schemas for the same
class.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

from quasar.client.record import Record
from quasar.protocol import pb

# Schema.Type numbers on the wire.
SCHEMA_TYPE_NONE = 0
SCHEMA_TYPE_STRING = 1
SCHEMA_TYPE_JSON = 2


class Schema:
    """Base class: subclasses define ``encode``, ``decode`` and ``schema_info``."""

    schema_type: int = SCHEMA_TYPE_NONE
    name: str = "Bytes"

    def encode(self, obj: Any) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        raise NotImplementedError

    def definition(self) -> bytes:
        """The ``schema_data`` bytes sent to the broker."""
        return b""

    def properties(self) -> dict[str, str]:
        """The schema's properties sent to the broker."""
        return {}

    def schema_info(self) -> Any | None:
        """``pb.Schema`` for PRODUCER/SUBSCRIBE, or None when none is sent."""
        if self.schema_type == SCHEMA_TYPE_NONE:
            return None
        info = pb.Schema(
            name=self.name, schema_data=self.definition(), type=self.schema_type
        )
        for key, value in sorted(self.properties().items()):
            info.properties.add(key=key, value=value)
        return info

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class BytesSchema(Schema):
    """Payload bytes as they are (no schema on the wire)."""

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, (bytes, bytearray, memoryview)):
            raise TypeError(f"BytesSchema needs bytes, got {type(obj).__name__}")
        return bytes(obj)

    def decode(self, data: bytes) -> bytes:
        return data


class StringSchema(Schema):
    """UTF-8 strings."""

    schema_type = SCHEMA_TYPE_STRING
    name = "String"

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, str):
            raise TypeError(f"StringSchema needs str, got {type(obj).__name__}")
        return obj.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")


_AVRO_TYPES: dict[Any, str] = {
    str: "string",
    int: "long",
    float: "double",
    bool: "boolean",
    bytes: "bytes",
}


def _avro_type(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        members = [_avro_type(a) for a in args if a is not type(None)]
        return ["null", *members] if type(None) in args else members
    if origin in (list, tuple):
        return {"type": "array", "items": _avro_type(args[0]) if args else "string"}
    if origin is dict:
        return {
            "type": "map",
            "values": _avro_type(args[1]) if len(args) > 1 else "string",
        }
    return _AVRO_TYPES.get(annotation, "string")


class JsonSchema(Schema):
    """JSON objects mapped to instances of ``record_cls``.

    ``record_cls`` may be a dataclass, any class whose constructor takes its annotated
    fields as keyword arguments, or ``dict`` (values stay plain dicts).
    """

    schema_type = SCHEMA_TYPE_JSON

    def __init__(self, record_cls: type) -> None:
        self._record_cls = record_cls
        self.name = getattr(record_cls, "__name__", "Record")

    def _fields(self) -> dict[str, Any]:
        if self._record_cls is dict:
            return {}
        try:
            return typing.get_type_hints(self._record_cls)
        except Exception:  # unresolvable forward refs: fall back to raw annotations
            return dict(getattr(self._record_cls, "__annotations__", {}))

    def definition(self) -> bytes:
        if isinstance(self._record_cls, type) and issubclass(self._record_cls, Record):
            return json.dumps(self._record_cls.schema(), indent=True).encode()
        fields = [
            {"name": name, "type": _avro_type(annotation)}
            for name, annotation in self._fields().items()
            if not name.startswith("_")
        ]
        doc = {"type": "record", "name": self.name, "fields": fields}
        return json.dumps(doc, indent=True).encode()

    def encode(self, obj: Any) -> bytes:
        if isinstance(obj, Record):
            value = obj.to_dict()
        elif isinstance(obj, dict):
            value = obj
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            value = dataclasses.asdict(obj)
        elif isinstance(obj, self._record_cls):
            value = {k: v for k, v in vars(obj).items() if not k.startswith("_")}
        else:
            raise TypeError(
                f"JsonSchema({self.name}) cannot encode {type(obj).__name__}"
            )
        return json.dumps(value, separators=(",", ":")).encode()

    def decode(self, data: bytes) -> Any:
        value = json.loads(data)
        if self._record_cls is dict or not isinstance(value, dict):
            return value
        if isinstance(self._record_cls, type) and issubclass(self._record_cls, Record):
            # A newer writer may have fields this reader's class does not know.
            known = self._record_cls._fields
            value = {k: v for k, v in value.items() if k in known}
        return self._record_cls(**value)

    def __repr__(self) -> str:
        return f"JsonSchema({self.name})"
