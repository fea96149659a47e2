"""A managed ledger's state in the metadata store, and its recovery on open.

Layout (names are escaped into single path segments)::

    /managed-ledgers/<name>            ledger list (codec.encode_ledgers)
    /managed-ledgers/<name>/<cursor>   one durable cursor (codec.encode_cursor)

Every write is a compare-and-set on the version last seen, so a second owner of the
same managed ledger (two brokers on one metadata store) fails with ``BadVersion``
instead of silently overwriting.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from urllib.parse import quote, unquote

from quasar.clock import Clock
from quasar.errors import NotFound
from quasar.storage import codec
from quasar.storage.api import MetadataStore
from quasar.storage.ledger_list import LedgerState
from quasar.storage.ledger_storage import LedgerStorage

log = logging.getLogger(__name__)

ROOT = "/managed-ledgers"


def ledger_path(name: str) -> str:
    """Metadata path of a managed ledger (its name is one path segment, escaped)."""
    return f"{ROOT}/{quote(name, safe='')}"


class LedgerMetadata:
    """Reads and writes one managed ledger's keys."""

    def __init__(self, metadata: MetadataStore, name: str) -> None:
        self._metadata = metadata
        self.path = ledger_path(name)
        self._version: int | None = None  # of the ledger list; None: not written yet

    def load_ledgers(self) -> list[codec.LedgerRecord]:
        """The persisted ledger list (empty for a new managed ledger).

        Raises:
            MetadataError: the document is unreadable.
        """
        found = self._metadata.get(self.path)
        if found is None:
            return []
        self._version = found.version
        return codec.decode_ledgers(found.value, self.path)

    def save_ledgers(self, ledgers: Iterable[LedgerState]) -> None:
        """Persist the ledger list; a ledger is "closed" once its length is final.

        Raises:
            BadVersion: someone else wrote the list since we read it.
            MetadataError: the store failed.
        """
        records = [
            codec.LedgerRecord(
                s.ledger_id,
                s.entries,
                s.size,
                s.timestamp_ms,
                s.complete,
                s.closed_at_ms,
            )
            for s in ledgers
        ]
        expected = -1 if self._version is None else self._version
        self._version = self._metadata.put(
            self.path, codec.encode_ledgers(records), expected
        )

    def load_cursors(self) -> list[tuple[str, codec.CursorRecord, int]]:
        """Every durable cursor as ``(name, state, metadata version)``."""
        out = []
        for child in self._metadata.children(self.path):
            path = f"{self.path}/{child}"
            found = self._metadata.get(path)
            if found is not None:
                out.append(
                    (
                        unquote(child),
                        codec.decode_cursor(found.value, path),
                        found.version,
                    )
                )
        return out

    def cursor_path(self, name: str) -> str:
        return f"{self.path}/{quote(name, safe='')}"

    def put_cursor(self, name: str, data: bytes, version: int | None) -> int:
        """Write a cursor's state (``version`` None: must not exist yet)."""
        return self._metadata.put(
            self.cursor_path(name), data, -1 if version is None else version
        )

    def delete_cursor(self, name: str) -> None:
        try:
            self._metadata.delete(f"{self.path}/{quote(name, safe='')}")
        except NotFound:
            pass

    def delete_all(self) -> None:
        self._metadata.delete_recursive(self.path)


def restore_ledger(
    rec: codec.LedgerRecord,
    storage: LedgerStorage,
    clock: Clock,
    owner: str,
    *,
    fence: bool = False,
) -> LedgerState:
    """Reopen one persisted ledger: closed ones as recorded, others by recovery scan
    (``fence``: fence it first, another broker may still be writing it).

    Raises:
        CorruptRecordError: the ledger's data is damaged or missing.
        PersistenceError: the fence could not be made durable.
    """
    if rec.closed:
        storage.open_ledger(rec.ledger_id, rec.entries, rec.size)
        entries, size, closed_at = rec.entries, rec.size, rec.closed_at_ms
    else:
        if fence:
            entries, size = storage.fence_ledger(rec.ledger_id)
        else:
            entries, size = storage.recover_ledger(rec.ledger_id)
        closed_at = clock.wall_ms()
        log.info(
            "%s: %s ledger %d with %d entries",
            owner, "fenced and recovered" if fence else "recovered", rec.ledger_id, entries,
        )
    return LedgerState(
        rec.ledger_id,
        rec.timestamp_ms,
        entries=entries,
        size=size,
        assigned=entries,
        assigned_size=size,
        sealed=True,
        closed_at_ms=closed_at,
    )
