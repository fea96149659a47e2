"""The bound on the live transactions one connection opened
(``maxActiveTransactionsPerConnection``, ``server/connection_transactions.py``)."""

from __future__ import annotations

import pytest

from quasar.protocol.txn_id import TxnID
from quasar.server.connection_transactions import ConnectionTransactions
from quasar.transaction.errors import ReachMaxActiveTxn


def test_the_limit_refuses_until_one_of_the_connections_transactions_ends() -> None:
    live: set[TxnID] = set()
    opened = ConnectionTransactions(limit=2)
    for seq in range(2):
        opened.admit(live.__contains__)
        live.add(TxnID(0, seq))
        opened.opened(TxnID(0, seq))
    with pytest.raises(ReachMaxActiveTxn, match="maxActiveTransactionsPerConnection 2"):
        opened.admit(live.__contains__)
    assert len(opened) == 2
    live.discard(TxnID(0, 0))  # ended, on this connection or another, or timed out
    opened.admit(live.__contains__)
    assert len(opened) == 1  # the ended one is forgotten
    assert ReachMaxActiveTxn.retryable


def test_it_asks_about_its_transactions_only_when_full() -> None:
    asked: list[TxnID] = []

    def is_live(txn: TxnID) -> bool:
        asked.append(txn)
        return True

    opened = ConnectionTransactions(limit=3)
    for seq in range(3):
        opened.admit(is_live)
        opened.opened(TxnID(0, seq))
    assert asked == []
    with pytest.raises(ReachMaxActiveTxn):
        opened.admit(is_live)
    assert sorted(asked) == [TxnID(0, 0), TxnID(0, 1), TxnID(0, 2)]


def test_zero_is_unlimited_and_remembers_nothing() -> None:
    opened = ConnectionTransactions(limit=0)
    for seq in range(10_000):
        opened.admit(lambda txn: True)
        opened.opened(TxnID(0, seq))
    assert len(opened) == 0
