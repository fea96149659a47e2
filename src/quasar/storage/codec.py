"""Encoding of managed-ledger and cursor state kept in the metadata store.

Both are small JSON documents (readable with any SQLite shell) carrying a format
version ``v``; a reader refuses a version it does not know rather than guess.

Managed ledger (``/managed-ledgers/<name>``)::

    {"v": 1, "ledgers": [{"id": 7, "entries": 50000, "size": 51200000,
                          "ts": 1700000000000, "closed": true, "closed_at": 1700000600000}, ...]}

    "closed": false marks a ledger whose final length is not known yet (it was being
    written); on open it is scanned and its torn tail, if any, is truncated.

Cursor (``/managed-ledgers/<name>/<cursor>``)::

    {"v": 1, "md": [7, 41], "props": {"k": 1},
     "ranges": [[7, 43, 45], [7, 50, 50]],        # individually deleted, inclusive
     "batch": [[7, 42, [18446744073709551612]]]}  # remaining-unacked bitsets
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from quasar.errors import MetadataError
from quasar.storage.api import Position

FORMAT_VERSION = 1


@dataclass(frozen=True)
class LedgerRecord:
    """One ledger as persisted in the managed ledger's metadata."""

    ledger_id: int
    entries: int
    size: int
    timestamp_ms: int
    closed: bool
    closed_at_ms: int


@dataclass
class CursorRecord:
    """A durable cursor's persisted state."""

    mark_delete: Position
    properties: dict[str, int] = field(default_factory=dict)
    ranges: list[tuple[int, int, int]] = field(default_factory=list)
    batch: list[tuple[Position, list[int]]] = field(default_factory=list)


def encode_ledgers(ledgers: list[LedgerRecord]) -> bytes:
    doc = {
        "v": FORMAT_VERSION,
        "ledgers": [
            {
                "id": r.ledger_id,
                "entries": r.entries,
                "size": r.size,
                "ts": r.timestamp_ms,
                "closed": r.closed,
                "closed_at": r.closed_at_ms,
            }
            for r in ledgers
        ],
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_ledgers(data: bytes, what: str) -> list[LedgerRecord]:
    """Parse a managed ledger's ledger list.

    Raises:
        MetadataError: the document is malformed or of an unknown format version.
    """
    doc = _load(data, what)
    try:
        return [
            LedgerRecord(
                int(r["id"]),
                int(r["entries"]),
                int(r["size"]),
                int(r["ts"]),
                bool(r["closed"]),
                int(r.get("closed_at", 0)),
            )
            for r in doc["ledgers"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise MetadataError(f"malformed ledger list in {what}: {exc}") from exc


def encode_cursor(record: CursorRecord) -> bytes:
    doc = {
        "v": FORMAT_VERSION,
        "md": [record.mark_delete.ledger_id, record.mark_delete.entry_id],
        "props": record.properties,
        "ranges": [list(r) for r in record.ranges],
        "batch": [[p.ledger_id, p.entry_id, bits] for p, bits in record.batch],
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_cursor(data: bytes, what: str) -> CursorRecord:
    """Parse a cursor's persisted state.

    Raises:
        MetadataError: the document is malformed or of an unknown format version.
    """
    doc = _load(data, what)
    try:
        return CursorRecord(
            mark_delete=Position(int(doc["md"][0]), int(doc["md"][1])),
            properties={str(k): int(v) for k, v in doc.get("props", {}).items()},
            ranges=[(int(a), int(b), int(c)) for a, b, c in doc.get("ranges", [])],
            batch=[
                (Position(int(lid), int(eid)), [int(w) for w in bits])
                for lid, eid, bits in doc.get("batch", [])
            ],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MetadataError(f"malformed cursor state in {what}: {exc}") from exc


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise MetadataError(f"{what} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise MetadataError(f"{what} is not a JSON object")
    version = doc.get("v")
    if version != FORMAT_VERSION:
        raise MetadataError(f"{what} has unknown format version {version!r}")
    return doc
