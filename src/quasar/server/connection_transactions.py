"""The transactions one connection opened that may still be live, and their bound.

``maxActiveTransactionsPerCoordinator`` bounds a coordinator's live transactions, but
one connection could take all of them, and every other client's NEW_TXN would then be
refused until they time out. ``maxActiveTransactionsPerConnection`` (quasar's own key;
Pulsar has no such bound) leaves the rest to the others: a NEW_TXN on a connection that
already opened that many live transactions is refused with the coordinator limit's
error (``ReachMaxActiveTxn``: ``UnknownError`` on the wire, retryable once some of them
end) and counted in ``quasar_txn_refused_total{reason="max_active_transactions_per_
connection"}``.

A transaction outlives the connection that opened it (another connection may end it,
or its timeout does), so the set is not told when one ends: it asks whether each is
still live only when it is full, and forgets the ended ones then. That check costs
one dictionary lookup per remembered transaction, at most the limit, on a NEW_TXN
that arrives at the bound; the set never holds more than the limit.
"""

from __future__ import annotations

from collections.abc import Callable

from quasar.protocol.txn_id import TxnID
from quasar.transaction.errors import ReachMaxActiveTxn

__all__ = ["ConnectionTransactions"]


class ConnectionTransactions:
    """The live transactions a connection opened, at most ``limit`` (0: unlimited)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._opened: set[TxnID] = set()

    def __len__(self) -> int:
        return len(self._opened)

    def admit(self, is_live: Callable[[TxnID], bool]) -> None:
        """Check that one more transaction may be opened on this connection.

        ``is_live(txn)``: whether the transaction is still open, committing or aborting
        (one whose NEW_TXN failed to be written never was).

        Raises:
            ReachMaxActiveTxn: ``limit`` of this connection's transactions are live.
        """
        if self.limit and len(self._opened) >= self.limit:
            self._opened = {txn for txn in self._opened if is_live(txn)}
            if len(self._opened) >= self.limit:
                raise ReachMaxActiveTxn(
                    "Connection reached max active transactions limit "
                    f"(maxActiveTransactionsPerConnection {self.limit})"
                )

    def opened(self, txn: TxnID) -> None:
        """An admitted NEW_TXN opened ``txn``."""
        if self.limit:
            self._opened.add(txn)
