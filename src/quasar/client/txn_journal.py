"""The client's transaction journal: what a commit or abort was about to ask.

With ``Client(..., transaction_journal_dir=DIR)``, ``commit()`` / ``abort()`` record the
transaction in DIR *before* the first END_TXN goes out, and remove the record once
the coordinator gave a definite answer (success, or a definite refusal). A process
killed in between leaves the record behind; after a restart
``client.unfinished_transactions()`` lists it and
``client.resume_transaction(entry.txn_id).commit()`` (or ``.abort()``) asks the
coordinator again, which answers from the transaction's state or from its preserver
(PIP-255). A transaction that was still OPEN when the process died is not recorded:
it never asked to end, so its coordinator aborts it at its timeout.

On disk: one file per transaction, so a record is replaced or removed without
rewriting the others::

    DIR/
      txn-<most>-<least>.json       one record (complete: written by rename)
      .txn-<most>-<least>.json.tmp  a write in progress (ignored; a torn one is left
                                    by a kill and overwritten by the next write)

    txn-<most>-<least>.json = one JSON object, UTF-8:
      {
        "format": 1,                   bumped on any change of these fields
        "txn_id": [most, least],       the coordinator's TxnID
        "action": "commit" | "abort",  what the client asked (the last asked wins)
        "client_name": "...",          the name the END_TXN carried (PIP-255)
        "recorded_at_ms": 1700000000000  wall clock when written
      }

A record is written to the temporary name, fsynced, renamed over the final name and
the directory fsynced, so after a crash a record is either absent or complete, and
present whenever an END_TXN may have been sent. Removal is a plain unlink: a record
that survives a crash after its definite answer only costs one more END_TXN, which the
coordinator answers the same way again.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from quasar.protocol.txn_id import TxnID

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
ACTIONS = ("commit", "abort")
_NAME = re.compile(r"^txn-(\d+)-(\d+)\.json$")


@dataclass(frozen=True)
class JournalEntry:
    """A transaction a client asked to end and did not hear a definite answer for."""

    txn_id: TxnID
    action: str  # "commit" or "abort"
    client_name: str
    recorded_at_ms: int


class TransactionJournal:
    """The records in one directory (created on first use). Blocking file I/O: the
    asyncio client calls :meth:`record` and :meth:`remove` in an executor."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _path(self, txn_id: TxnID) -> Path:
        return self.directory / f"txn-{txn_id.most_bits}-{txn_id.least_bits}.json"

    def record(self, txn_id: TxnID, action: str, client_name: str) -> JournalEntry:
        """Durably write (or replace) the record of ``txn_id``.

        Raises:
            ValueError: ``action`` is not "commit" or "abort" (a bug of the caller).
            OSError: the directory cannot be written (the END_TXN is then not sent).
        """
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
        entry = JournalEntry(
            TxnID(int(txn_id[0]), int(txn_id[1])),
            action,
            client_name,
            int(time.time() * 1000),
        )
        body = json.dumps(
            {
                "format": FORMAT_VERSION,
                "txn_id": [entry.txn_id.most_bits, entry.txn_id.least_bits],
                "action": action,
                "client_name": client_name,
                "recorded_at_ms": entry.recorded_at_ms,
            },
            sort_keys=True,
        ).encode()
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self._path(entry.txn_id)
        tmp = final.with_name(f".{final.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        self._sync_directory()
        return entry

    def remove(self, txn_id: TxnID) -> None:
        """Forget ``txn_id`` (no error if it has no record)."""
        try:
            self._path(TxnID(int(txn_id[0]), int(txn_id[1]))).unlink()
        except FileNotFoundError:
            pass

    def get(self, txn_id: TxnID) -> JournalEntry | None:
        """The record of ``txn_id``, or None."""
        return self._load(self._path(TxnID(int(txn_id[0]), int(txn_id[1]))))

    def entries(self) -> list[JournalEntry]:
        """Every complete record, oldest first. Unreadable files are logged and
        skipped (never raised: a restarted application must be able to list the
        rest)."""
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            if _NAME.match(name):
                entry = self._load(self.directory / name)
                if entry is not None:
                    found.append(entry)
        found.sort(key=lambda e: (e.recorded_at_ms, e.txn_id))
        return found

    def _load(self, path: Path) -> JournalEntry | None:
        try:
            data = json.loads(path.read_bytes())
            if data.get("format") != FORMAT_VERSION or data["action"] not in ACTIONS:
                raise ValueError(f"format {data.get('format')!r}")
            most, least = data["txn_id"]
            return JournalEntry(
                TxnID(int(most), int(least)),
                str(data["action"]),
                str(data["client_name"]),
                int(data["recorded_at_ms"]),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("transaction journal: skipping unreadable %s: %s", path, exc)
            return None

    def _sync_directory(self) -> None:
        # The rename is durable only once the directory entry is.
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = ["FORMAT_VERSION", "JournalEntry", "TransactionJournal"]
