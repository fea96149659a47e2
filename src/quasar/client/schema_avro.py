"""``AvroSchema``: records encoded in Avro's binary encoding with ``fastavro``, as
`pulsar`'s ``AvroSchema`` does."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro

from quasar.client.record import Record
from quasar.client.schema_basic import Schema

__all__ = ["SCHEMA_TYPE_AVRO", "AvroSchema"]

SCHEMA_TYPE_AVRO = 4


class AvroSchema(Schema):
    """Instances of a ``Record`` subclass (or dicts, given a definition) in Avro.

    ``AvroSchema(record_cls)`` takes the definition from the class;
    ``AvroSchema(None, schema_definition)`` takes an Avro schema (a dict) and
    encodes and decodes dicts.

    Raises:
        ValueError: neither is given, or the definition is not a valid Avro schema.
    """

    schema_type = SCHEMA_TYPE_AVRO
    name = "AVRO"

    def __init__(
        self, record_cls: type[Record] | None, schema_definition: dict[str, Any] | None = None
    ) -> None:
        if record_cls is None and schema_definition is None:
            raise ValueError("AvroSchema needs a record class or a schema definition")
        self._record_cls = record_cls
        definition = record_cls.schema() if record_cls is not None else schema_definition
        assert definition is not None
        self._definition = definition
        try:
            self._parsed = fastavro.parse_schema(definition)
        except Exception as e:  # fastavro raises several types for a bad schema
            raise ValueError(f"Invalid Avro schema: {e}") from None

    def definition(self) -> bytes:
        return json.dumps(self._definition, indent=True).encode()

    def _to_dict(self, obj: Any) -> Any:
        if isinstance(obj, Record):
            return {k: self._to_dict(v) for k, v in obj.to_dict().items()}
        if isinstance(obj, list):
            return [self._to_dict(v) for v in obj]
        if isinstance(obj, dict):
            return {k: self._to_dict(v) for k, v in obj.items()}
        return obj

    def encode(self, obj: Any) -> bytes:
        if self._record_cls is not None:
            if not isinstance(obj, self._record_cls):
                raise TypeError(
                    f"AvroSchema({self._record_cls.__name__}) cannot encode "
                    f"{type(obj).__name__}"
                )
        elif not isinstance(obj, dict):
            raise TypeError("AvroSchema with a definition encodes dicts")
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, self._parsed, self._to_dict(obj))
        return buffer.getvalue()

    def decode(self, data: bytes) -> Any:
        """The value, read with this schema (the writer's schema is assumed to be
        this one, as `pulsar` does without a schema download)."""
        value = fastavro.schemaless_reader(io.BytesIO(data), self._parsed)
        if self._record_cls is None:
            return value
        return self._record_cls(**value)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        name = self._record_cls.__name__ if self._record_cls else self._definition.get("name")
        return f"AvroSchema({name})"
