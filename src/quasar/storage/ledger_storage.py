"""The seam between a managed ledger's bookkeeping and where entry bytes live.

``ManagedLedgerImpl`` (positions, cursors, trimming, metadata) is shared by both
implementations; only this interface differs: ``quasar.storage.file`` keeps ledgers in
files behind a group-commit writer, ``quasar.storage.memory`` keeps them in lists. So
the two implementations have the same semantics by construction, and the conformance
suite checks the storage underneath.

Ledger ids are unique within a storage (allocated from a global counter), so a storage
can be shared by every managed ledger of a factory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

# Called on the event loop when an append is durable (None) or has failed.
AppendDone = Callable[[BaseException | None], None]


class LedgerStorage(Protocol):
    def create_ledger(self, ledger_id: int) -> None:
        """Create an empty ledger, durably, ready for appends.

        Raises:
            PersistenceError: the ledger could not be created.
        """
        ...

    def recover_ledger(self, ledger_id: int) -> tuple[int, int]:
        """Open a ledger that was being written when the process stopped.

        Drops a torn tail (a partial last write) and returns ``(entries, size)``.

        Raises:
            CorruptRecordError: a damaged record is followed by a valid one, or the
                ledger's data is missing.
        """
        ...

    def fence_ledger(self, ledger_id: int) -> tuple[int, int]:
        """Open a ledger another writer may still be appending to (the topic's
        previous owner): fence it, then read its length, as BookKeeper's recovery
        open does. Returns ``(entries, size)``.

        After this returns, no append of the other writer to this ledger is
        acknowledged (its ``done`` gets ``LedgerFencedError``), and every append it
        did acknowledge is within the returned length.

        Raises:
            CorruptRecordError: as ``recover_ledger``.
            PersistenceError: the fence could not be made durable.
        """
        ...

    def is_fenced(self, ledger_id: int) -> bool:
        """True if a ledger of this managed ledger was fenced by another writer."""
        ...

    def open_ledger(self, ledger_id: int, entries: int, size: int) -> None:
        """Register a closed ledger of known length for reading."""
        ...

    def append(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        owner: object,
        done: AppendDone,
    ) -> None:
        """Queue ``data`` as entry ``entry_id``; ``done`` runs on the loop once durable.

        ``done`` callbacks run in append order. ``owner`` identifies the managed ledger
        (appends of one owner must become durable in order, even across ledgers).
        """
        ...

    def seal_ledger(self, ledger_id: int) -> None:
        """No more appends will be queued to this ledger."""
        ...

    def read(self, ledger_id: int, entry_id: int) -> bytes | None:
        """The bytes of a durable entry, or ``None`` if the ledger is gone.

        Raises:
            CorruptRecordError: the stored record fails its checksum.
        """
        ...

    def release_ledger(self, ledger_id: int) -> None:
        """Drop resources held for a ledger (its managed ledger closed); keep the data."""
        ...

    def delete_ledger(self, ledger_id: int) -> None:
        """Delete a ledger's data (it was trimmed or its managed ledger deleted)."""
        ...
