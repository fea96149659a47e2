"""Recognising a transactional send that a producer sends again.

A producer re-sends every message that has no receipt when its connection drops: if
the broker stored the message but died before the receipt went out, the re-send
arrives at the restarted broker and, without this, is stored a second time; when the
transaction commits, readers see it twice (failure scenario 38: a transactional
re-send must be appended once whether or not deduplication is enabled).

So each partition remembers, for every open transaction, the highest sequence id it
accepted from each producer name. A send at or below it is a duplicate: it gets a
receipt and is not stored (as deduplication answers: message id (-1, -1)). The map is
rebuilt after a restart from the open transactions' entries, and a transaction's
entry is dropped when it ends here.
"""

from __future__ import annotations

from quasar.errors import RemoteProtocolError
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import ManagedLedger, Position

from .entry_info import entry_info

SCAN_BATCH_ENTRIES = 500


class TransactionalSends:
    def __init__(self) -> None:
        self._highest: dict[TxnID, dict[str, int]] = {}

    def is_duplicate(self, txn: TxnID, producer: str, sequence_id: int) -> bool:
        return sequence_id <= self._highest.get(txn, {}).get(producer, -1)

    def record(self, txn: TxnID, producer: str, highest_sequence_id: int) -> int:
        """Mark a send accepted; returns the previous mark (for ``restore``)."""
        marks = self._highest.setdefault(txn, {})
        previous = marks.get(producer, -1)
        if highest_sequence_id > previous:
            marks[producer] = highest_sequence_id
        return previous

    def restore(self, txn: TxnID, producer: str, previous: int) -> None:
        """The send was not stored after all: a re-send must be accepted again."""
        marks = self._highest.get(txn)
        if marks is not None:
            marks[producer] = previous

    def ended(self, txn: TxnID, still_open: set[TxnID]) -> None:
        """Forget ``txn`` and any transaction no longer open here (low-watermark aborts)."""
        self._highest.pop(txn, None)
        for other in [t for t in self._highest if t not in still_open]:
            del self._highest[other]

    async def rebuild(self, ledger: ManagedLedger, open_txns: dict[TxnID, Position]) -> None:
        """Recover the marks of the open transactions by reading their entries."""
        if not open_txns:
            return
        position = min(open_txns.values())
        while True:
            entries = await ledger.read_entries(position, SCAN_BATCH_ENTRIES)
            if not entries:
                return
            for e in entries:
                try:
                    info = entry_info(e.data)
                except RemoteProtocolError:
                    continue
                if info.txn is None or info.marker_type is not None:
                    continue
                txn = TxnID(*info.txn)
                if txn in open_txns:
                    self.record(
                        txn, info.producer_name, info.sequence_id + info.num_messages - 1
                    )
            position = ledger.next_position(entries[-1].position)
