"""Schema registry: stored, versioned schemas per topic.

Schemas belong to the topic as users name it, so all partitions of a partitioned topic
share one history (as in Pulsar). Versions are numbered from 0 and travel on the wire as
8-byte big-endian integers (``schema_version`` in PRODUCER_SUCCESS, MessageMetadata and
GET_SCHEMA).

Compatibility: a schema identical to a stored version reuses that version. A schema of
the *same type* with a different definition becomes a new version. A schema of a
different type is ``IncompatibleSchema``. Producers without a schema (bytes) may write to
any topic, like Pulsar with ``schemaValidationEnforced=false``.

The namespace's ``schema_compatibility_strategy`` decides about a new version:
``ALWAYS_COMPATIBLE`` accepts any (a type change too), ``ALWAYS_INCOMPATIBLE`` refuses
every new version once the topic has one; the other strategies get the same-type rule
above, since full Avro/JSON evolution checks (BACKWARD/FORWARD/FULL) are not
implemented (see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass

from quasar.errors import IncompatibleSchema
from quasar.storage.api import MetadataStore

SCHEMA_ROOT = "/schemas"
SCHEMA_VERSIONS_MAX = 1000  # bound on versions kept per topic


@dataclass(frozen=True)
class SchemaInfo:
    name: str
    type: int
    data: bytes
    properties: tuple[tuple[str, str], ...]

    def same_definition(self, other: SchemaInfo) -> bool:
        return (self.type, self.data, self.properties) == (other.type, other.data, other.properties)


def encode_version(version: int) -> bytes:
    return struct.pack(">q", version)


def decode_version(raw: bytes) -> int | None:
    if len(raw) != 8:
        return None
    return int(struct.unpack(">q", raw)[0])


class SchemaRegistry:
    def __init__(
        self, store: MetadataStore, strategy_of: Callable[[str], str] | None = None
    ) -> None:
        """``strategy_of(topic_key)``: the compatibility strategy of the topic's
        namespace (Pulsar's names; UNDEFINED when not given)."""
        self._store = store
        self._strategy_of = strategy_of

    @staticmethod
    def _path(topic_key: str) -> str:
        return f"{SCHEMA_ROOT}/{topic_key}"

    def versions(self, topic_key: str) -> list[SchemaInfo]:
        found = self._store.get(self._path(topic_key))
        if found is None:
            return []
        out = []
        for item in json.loads(found.value):
            out.append(
                SchemaInfo(
                    item["name"],
                    item["type"],
                    base64.b64decode(item["data"]),
                    tuple((k, v) for k, v in item["properties"]),
                )
            )
        return out

    def get(self, topic_key: str, version: int | None = None) -> tuple[int, SchemaInfo] | None:
        versions = self.versions(topic_key)
        if not versions:
            return None
        if version is None:
            version = len(versions) - 1
        if not 0 <= version < len(versions):
            return None
        return version, versions[version]

    def check_compatible(self, topic_key: str, schema: SchemaInfo) -> int | None:
        """The version matching ``schema``, ``None`` if it would be new.

        Raises:
            IncompatibleSchema: its type differs from the latest stored schema.
        """
        versions = self.versions(topic_key)
        for i, existing in enumerate(versions):
            if existing.same_definition(schema):
                return i
        if not versions:
            return None
        strategy = "UNDEFINED" if self._strategy_of is None else self._strategy_of(topic_key)
        if strategy == "ALWAYS_INCOMPATIBLE":
            raise IncompatibleSchema(
                "The namespace's schema compatibility strategy is ALWAYS_INCOMPATIBLE: "
                "no new schema version is accepted"
            )
        if strategy != "ALWAYS_COMPATIBLE" and versions[-1].type != schema.type:
            raise IncompatibleSchema(
                f"Schema type {schema.type} is incompatible with the topic's "
                f"schema type {versions[-1].type}"
            )
        return None

    def put_if_absent(self, topic_key: str, schema: SchemaInfo) -> int:
        """Store ``schema`` unless an identical version exists; return its version.

        Raises:
            IncompatibleSchema: see ``check_compatible``.
        """
        version = self.check_compatible(topic_key, schema)
        if version is not None:
            return version
        path = self._path(topic_key)
        found = self._store.get(path)
        items = json.loads(found.value) if found else []
        if len(items) >= SCHEMA_VERSIONS_MAX:
            raise IncompatibleSchema("too many schema versions for this topic")
        items.append(
            {
                "name": schema.name,
                "type": schema.type,
                "data": base64.b64encode(schema.data).decode(),
                "properties": [list(p) for p in schema.properties],
            }
        )
        self._store.put(path, json.dumps(items).encode(), found.version if found else -1)
        return len(items) - 1

    def delete(self, topic_key: str) -> None:
        if self._store.get(self._path(topic_key)) is not None:
            self._store.delete(self._path(topic_key))
