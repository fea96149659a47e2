"""Errors the transaction package adds to ``quasar.errors``."""

from __future__ import annotations

from quasar.errors import BrokerError, NotAllowedError, ServerError, TransactionNotFound


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


class TransactionTimeoutTooLong(NotAllowedError):  # type: ignore[misc, valid-type]
    """NEW_TXN refused: it asks for a timeout above ``transaction_max_timeout_millis``.

    Pulsar has no such bound; quasar refuses as Kafka does (``transaction.max.timeout.
    ms``, InvalidTransactionTimeout) rather than clamp, so a client never learns
    only from an early abort that its timeout was not granted. On the wire it is
    ``NotAllowedError``, not retryable: the same request fails again.
    """


class TransactionNotOwned(TransactionNotFound):  # type: ignore[misc, valid-type]
    """A caller that is neither the transaction's owner nor a super-user asked to act
    on it. On the wire it is ``TransactionNotFound``, as Pulsar answers, so that a role
    learns nothing about another role's transactions; the broker logs it as a refusal.
    """
