"""Errors the transaction package adds to ``quasar.errors``."""

from __future__ import annotations

from quasar.errors import BrokerError, ServerError


class ReachMaxActiveTxn(BrokerError):
    """NEW_TXN refused: ``max_active_transactions_per_coordinator`` are live already.

    Pulsar raises ``ReachMaxActiveTxnException`` ("New txn op reach max active txn!
    tcId : N"), which its broker maps to no specific ``ServerError``, so clients see
    ``UnknownError`` with that message. quasar keeps the wire code and marks it
    retryable (the same request succeeds once some transactions end), as the failure
    catalogue recommends (scenario 12).
    """

    code = ServerError.UnknownError
    http_status = 503
    retryable = True
