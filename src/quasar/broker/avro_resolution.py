"""Avro schema resolution: can a reader schema read what a writer schema wrote?

These are the rules of the Avro specification's "Schema Resolution" section, which
Pulsar's Avro and JSON compatibility checks apply through Avro's own validator:

* primitives match themselves; the writer's ``int`` is read as ``long``, ``float``
  or ``double``, ``long`` as ``float`` or ``double``, ``float`` as ``double``, and
  ``string`` and ``bytes`` as each other (promotion);
* records, enums and fixed types match by full name (or a reader alias);
* a record reader reads each of its fields from the writer's field of that name (or
  alias), or from its default when the writer has no such field; writer fields the
  reader lacks are skipped;
* an enum reader knows every writer symbol, unless it has a default symbol;
* fixed types have the same size; arrays and maps resolve their items and values;
* a writer union resolves when every branch does; a reader union when one branch
  reads the writer.

Definitions are parsed with ``fastavro`` first, which refuses a malformed one.
"""

from __future__ import annotations

import json
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException

__all__ = ["AvroDefinitionError", "can_read", "parse_definition"]

_PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}
_NAMED = ("record", "error", "enum", "fixed")
_PRIMITIVES = frozenset(
    {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
)


class AvroDefinitionError(ValueError):
    """A schema definition that is not a valid Avro schema."""


class _Schema:
    """A parsed definition and its named types by full name."""

    def __init__(self, parsed: Any) -> None:
        self.root = parsed
        self.names: dict[str, Any] = {}
        self._collect(parsed)

    def _collect(self, node: Any) -> None:
        if isinstance(node, list):
            for branch in node:
                self._collect(branch)
        elif isinstance(node, dict):
            kind = node.get("type")
            if kind in _NAMED and "name" in node:
                self.names[node["name"]] = node
            if kind in ("record", "error"):
                for f in node.get("fields", []):
                    self._collect(f["type"])
            elif kind == "array":
                self._collect(node["items"])
            elif kind == "map":
                self._collect(node["values"])
            elif isinstance(kind, (dict, list)):
                self._collect(kind)

    def resolve(self, node: Any) -> Any:
        """A node with named-type references replaced by their definitions, and
        ``{"type": "int"}``-style wrappers of primitives unwrapped."""
        while True:
            if isinstance(node, str) and node not in _PRIMITIVES:
                found = self.names.get(node)
                if found is None:
                    raise AvroDefinitionError(f"Unknown Avro type: {node}")
                return found
            if isinstance(node, dict) and not isinstance(node.get("type"), str):
                node = node["type"]
                continue
            if isinstance(node, dict) and node.get("type") in _PRIMITIVES:
                return node["type"]
            return node


def parse_definition(data: bytes) -> Any:
    """The parsed Avro schema of a definition (JSON text).

    Raises:
        AvroDefinitionError: not JSON, or not a valid Avro schema.
    """
    # A definition comes from a peer: nesting deep enough to exhaust the parser's
    # recursion is refused like any other malformed definition.
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise AvroDefinitionError(f"Schema definition is not JSON: {e}") from None
    try:
        return fastavro.parse_schema(raw, _write_hint=False)
    except (
        SchemaParseException, ValueError, TypeError, KeyError, AttributeError, RecursionError
    ) as e:
        raise AvroDefinitionError(f"Invalid Avro schema: {e}") from None


def can_read(reader_definition: Any, writer_definition: Any) -> bool:
    """Whether data written with the writer (parsed) schema resolves against the
    reader (parsed) schema."""
    try:
        reader = _Schema(reader_definition)
        writer = _Schema(writer_definition)
        return _Resolver(reader, writer).reads(reader.root, writer.root)
    except RecursionError:
        # Deeper than the resolver can follow: not shown to be readable.
        return False


class _Resolver:
    def __init__(self, reader: _Schema, writer: _Schema) -> None:
        self._reader = reader
        self._writer = writer
        # Pairs of named types being compared: a recursive type resolves if nothing
        # else fails along the way.
        self._assumed: set[tuple[str, str]] = set()

    def reads(self, r_node: Any, w_node: Any) -> bool:
        r = self._reader.resolve(r_node)
        w = self._writer.resolve(w_node)
        if isinstance(w, list):
            return all(self.reads(r, branch) for branch in w)
        if isinstance(r, list):
            return any(self.reads(branch, w) for branch in r)
        if isinstance(r, str) or isinstance(w, str):
            if isinstance(r, str) and isinstance(w, str):
                return r == w or r in _PROMOTIONS.get(w, frozenset())
            return False
        kind = r["type"]
        w_kind = w["type"]
        if kind == "error":
            kind = "record"
        if w_kind == "error":
            w_kind = "record"
        if kind != w_kind:
            return False
        if kind == "array":
            return self.reads(r["items"], w["items"])
        if kind == "map":
            return self.reads(r["values"], w["values"])
        if not self._same_name(r, w):
            return False
        if kind == "fixed":
            return bool(r["size"] == w["size"])
        if kind == "enum":
            missing = set(w["symbols"]) - set(r["symbols"])
            return not missing or "default" in r
        return self._record_reads(r, w)

    @staticmethod
    def _same_name(r: dict[str, Any], w: dict[str, Any]) -> bool:
        if r["name"] == w["name"]:
            return True
        # Aliases are full names after fastavro's parse; compare unqualified too,
        # as Avro's validator accepts a reader alias naming the writer.
        aliases = set(r.get("aliases", []))
        short = w["name"].rsplit(".", 1)[-1]
        return w["name"] in aliases or short in {a.rsplit(".", 1)[-1] for a in aliases}

    def _record_reads(self, r: dict[str, Any], w: dict[str, Any]) -> bool:
        pair = (r["name"], w["name"])
        if pair in self._assumed:
            return True
        self._assumed.add(pair)
        writer_fields = {f["name"]: f for f in w.get("fields", [])}
        for field in r.get("fields", []):
            found = writer_fields.get(field["name"])
            if found is None:
                for alias in field.get("aliases", []):
                    found = writer_fields.get(alias)
                    if found is not None:
                        break
            if found is None:
                if "default" not in field:
                    return False
                continue
            if not self.reads(field["type"], found["type"]):
                return False
        return True
