"""Schema registry: stored, versioned schemas per topic.

Schemas belong to the topic as users name it, so all partitions of a partitioned topic
share one history (as in Pulsar). Versions are numbered from 0 and travel on the wire as
8-byte big-endian integers (``schema_version`` in PRODUCER_SUCCESS, MessageMetadata and
GET_SCHEMA).

A topic's history is one metadata-store key, ``/schemas/<tenant>/<ns>/<domain>/<topic>``,
written (and fsynced) before any answer names a new version::

    {"v": 1,
     "versions": [{"name": str, "type": int, "data": base64, "properties": [[k, v]...],
                   "timestamp": epoch ms, "deleted": bool}, ...]}

The list index is the version. Deleting a topic's schema appends a *deleted* entry (a
tombstone, as Pulsar does): versions keep increasing, the deleted versions stay
readable by number, and compatibility looks only at the versions after the last
tombstone, so the next schema is accepted whatever it is. A history without the
``v`` key (a bare list) is read as version-1 entries without timestamps; an unknown
``v`` is refused (``MetadataError``) rather than misread.

Who may add what is the namespace's policy (``SchemaPolicy``): the compatibility
strategy (``schema_compat.py``), whether producers may add versions at all
(``isAllowAutoUpdateSchema``) and whether producers without a schema may write to a
topic that has one (``schemaValidationEnforced``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quasar.clock import Clock, SystemClock
from quasar.errors import (
    REFUSED_SCHEMA_VERSIONS,
    IncompatibleSchema,
    MetadataError,
    ResourceNotFoundError,
    tag_refusal,
)
from quasar.storage.api import MetadataStore

from .schema_compat import (
    SchemaDefinition,
    check_compatible,
    check_consumer_compatible,
    check_definition,
)

__all__ = [
    "SCHEMA_ROOT",
    "SchemaInfo",
    "SchemaPolicy",
    "SchemaRegistry",
    "StoredSchema",
    "decode_version",
    "encode_version",
]

SCHEMA_ROOT = "/schemas"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class SchemaInfo:
    name: str
    type: int
    data: bytes
    properties: tuple[tuple[str, str], ...]

    def same_definition(self, other: SchemaInfo) -> bool:
        return (self.type, self.data, dict(self.properties)) == (
            other.type,
            other.data,
            dict(other.properties),
        )

    def definition(self) -> SchemaDefinition:
        return SchemaDefinition(self.type, self.data, dict(self.properties))

    def schema_hash(self) -> str:
        """A digest of type and data, reported by the admin API as Pulsar's
        ``schemaHash``-like identity of a definition."""
        return hashlib.sha256(bytes([self.type & 0xFF]) + self.data).hexdigest()


@dataclass(frozen=True)
class StoredSchema:
    """One version of a topic's history."""

    version: int
    info: SchemaInfo
    timestamp: int
    deleted: bool = False


@dataclass(frozen=True)
class SchemaPolicy:
    """The schema rules of a topic's namespace, broker defaults applied."""

    strategy: str = "FULL"  # never UNDEFINED
    allow_auto_update: bool = True
    validation_enforced: bool = False


def encode_version(version: int) -> bytes:
    return struct.pack(">q", version)


def decode_version(raw: bytes) -> int | None:
    if len(raw) != 8:
        return None
    return int(struct.unpack(">q", raw)[0])


def _entry_json(stored: StoredSchema) -> dict[str, Any]:
    info = stored.info
    return {
        "name": info.name,
        "type": info.type,
        "data": base64.b64encode(info.data).decode(),
        "properties": [list(p) for p in info.properties],
        "timestamp": stored.timestamp,
        "deleted": stored.deleted,
    }


def _entry_of(version: int, item: dict[str, Any]) -> StoredSchema:
    info = SchemaInfo(
        item["name"],
        item["type"],
        base64.b64decode(item["data"]),
        tuple((k, v) for k, v in item["properties"]),
    )
    return StoredSchema(version, info, item.get("timestamp", 0), item.get("deleted", False))


class SchemaRegistry:
    """The schema histories of all topics, in the metadata store.

    ``policy_of(topic_key)`` gives the rules of the topic's namespace;
    ``max_versions`` bounds a topic's history (tombstones included).
    """

    def __init__(
        self,
        store: MetadataStore,
        policy_of: Callable[[str], SchemaPolicy] | None = None,
        max_versions: int = 1000,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._policy_of = policy_of or (lambda _key: SchemaPolicy())
        self._max_versions = max_versions
        self._clock: Clock = clock or SystemClock()

    @staticmethod
    def _path(topic_key: str) -> str:
        return f"{SCHEMA_ROOT}/{topic_key}"

    def policy(self, topic_key: str) -> SchemaPolicy:
        return self._policy_of(topic_key)

    # -- reading -----------------------------------------------------------------------
    def history(self, topic_key: str) -> list[StoredSchema]:
        """Every stored version, tombstones included, oldest first.

        Raises:
            MetadataError: the stored history is malformed or of an unknown format.
        """
        found = self._store.get(self._path(topic_key))
        if found is None:
            return []
        try:
            doc = json.loads(found.value)
            if isinstance(doc, dict) and doc.get("v") != FORMAT_VERSION:
                raise MetadataError(
                    f"schemas of {topic_key} have unknown format version {doc.get('v')!r}"
                )
            items = doc if isinstance(doc, list) else doc["versions"]
            return [_entry_of(i, item) for i, item in enumerate(items)]
        except (ValueError, KeyError, TypeError) as e:
            raise MetadataError(f"malformed schemas of {topic_key}: {e}") from e

    def live(self, topic_key: str) -> list[StoredSchema]:
        """The versions after the last deletion: what compatibility looks at."""
        history = self.history(topic_key)
        for i in range(len(history) - 1, -1, -1):
            if history[i].deleted:
                return history[i + 1 :]
        return history

    def latest(self, topic_key: str) -> StoredSchema | None:
        """The newest version, None if there is none or it was deleted."""
        history = self.history(topic_key)
        if not history or history[-1].deleted:
            return None
        return history[-1]

    def get(self, topic_key: str, version: int | None = None) -> tuple[int, SchemaInfo] | None:
        """A version (None: the latest) that exists and is not a tombstone."""
        if version is None:
            found = self.latest(topic_key)
        else:
            history = self.history(topic_key)
            found = history[version] if 0 <= version < len(history) else None
        if found is None or found.deleted:
            return None
        return found.version, found.info

    def version_of(self, topic_key: str, schema: SchemaInfo) -> int | None:
        """The live version identical to ``schema``, if any."""
        for stored in self.live(topic_key):
            if stored.info.same_definition(schema):
                return stored.version
        return None

    # -- checking ------------------------------------------------------------------------
    def is_compatible(self, topic_key: str, schema: SchemaInfo, strategy: str | None = None) -> bool:
        """Whether ``schema`` could be added now (the admin API's compatibility test).

        Raises:
            IncompatibleSchema: the definition is malformed.
        """
        check_definition(schema.definition())
        if self.version_of(topic_key, schema) is not None:
            return True
        try:
            check_compatible(
                schema.definition(),
                [s.info.definition() for s in self.live(topic_key)],
                strategy or self.policy(topic_key).strategy,
            )
        except IncompatibleSchema:
            return False
        return True

    def check_consumer(self, topic_key: str, schema: SchemaInfo) -> None:
        """Whether a consumer with ``schema`` reads the topic's schemas.

        Raises:
            IncompatibleSchema: it does not, or the definition is malformed.
        """
        check_definition(schema.definition())
        if self.version_of(topic_key, schema) is not None:
            return
        check_consumer_compatible(
            schema.definition(),
            [s.info.definition() for s in self.live(topic_key)],
            self.policy(topic_key).strategy,
        )

    def check_schemaless_producer(self, topic_key: str) -> None:
        """A producer without a schema: refused when the namespace enforces schema
        validation and the topic has one.

        Raises:
            IncompatibleSchema: refused.
        """
        if self.policy(topic_key).validation_enforced and self.latest(topic_key) is not None:
            raise IncompatibleSchema(
                "Producers cannot connect or send message without a schema to topics "
                "with a schema if SchemaValidationEnforced is enabled"
            )

    # -- writing -----------------------------------------------------------------------
    def put_if_absent(self, topic_key: str, schema: SchemaInfo, producer: bool = True) -> int:
        """The version of ``schema``: an identical live version, or a new one added
        after the compatibility check. ``producer``: a producer (or GET_OR_CREATE)
        asks, which the namespace's ``isAllowAutoUpdateSchema`` may forbid once the
        topic has a schema.

        Raises:
            IncompatibleSchema: incompatible, malformed, auto-update forbidden, or
                the topic's history is full.
        """
        check_definition(schema.definition())
        version = self.version_of(topic_key, schema)
        if version is not None:
            return version
        policy = self.policy(topic_key)
        live = self.live(topic_key)
        if producer and live and not policy.allow_auto_update:
            raise IncompatibleSchema("Schema not found and schema auto updating is disabled.")
        check_compatible(
            schema.definition(), [s.info.definition() for s in live], policy.strategy
        )
        return self._append(topic_key, schema, deleted=False)

    def add_for_consumer(self, topic_key: str, schema: SchemaInfo) -> None:
        """A consumer's schema on a topic without one (Pulsar adds it when the topic
        is idle), after the consumer check.

        Raises:
            IncompatibleSchema: see ``check_consumer`` and ``put_if_absent``.
        """
        self.check_consumer(topic_key, schema)
        if self.latest(topic_key) is None:
            self.put_if_absent(topic_key, schema, producer=False)

    def delete(self, topic_key: str) -> int:
        """Soft-delete the topic's schema: append a tombstone; its version.

        Raises:
            ResourceNotFoundError: the topic has no schema (or it is already deleted).
        """
        latest = self.latest(topic_key)
        if latest is None:
            raise ResourceNotFoundError("Schema not found")
        return self._append(topic_key, latest.info, deleted=True)

    def remove_all(self, topic_key: str) -> None:
        """Forget the topic's history (the topic itself is deleted)."""
        if self._store.get(self._path(topic_key)) is not None:
            self._store.delete(self._path(topic_key))

    def _append(self, topic_key: str, schema: SchemaInfo, deleted: bool) -> int:
        path = self._path(topic_key)
        found = self._store.get(path)
        history = self.history(topic_key)
        if len(history) >= self._max_versions:
            raise tag_refusal(
                IncompatibleSchema(
                    f"The topic has {len(history)} schema versions, the most "
                    "maxSchemaVersionsPerTopic allows"
                ),
                REFUSED_SCHEMA_VERSIONS,
            )
        stored = StoredSchema(len(history), schema, self._clock.wall_ms(), deleted)
        doc = {
            "v": FORMAT_VERSION,
            "versions": [_entry_json(s) for s in history] + [_entry_json(stored)],
        }
        # The expected version makes a concurrent writer's lost update a BadVersion.
        self._store.put(path, json.dumps(doc).encode(), found.version if found else -1)
        return stored.version
