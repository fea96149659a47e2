"""Counters of what the transaction bounds refuse, and of participants an end skipped.

A transaction may only name participants its end can reach: ADD_PARTITION_TO_TXN and
ADD_SUBSCRIPTION_TO_TXN refuse the others (``server/txn_participants.py``), and NEW_TXN
is refused over ``maxActiveTransactionsPerCoordinator``,
``maxActiveTransactionsPerConnection`` or ``transactionMaxTimeoutMillis``. Each refusal is counted in
``quasar_txn_refused_total{reason}``.

A participant that became unreachable for good after it was added (its namespace or
topic deleted, or a name registered before these checks existed) is answered with
``TopicNotFound``, which the coordinator counts as ended, so that the transaction still
reaches COMMITTED or ABORTED; Pulsar's receiving broker answers a deleted topic's end
with success to the same effect. Each such participant is counted in
``quasar_txn_end_participant_skipped_total{reason}`` and logged.
"""

from __future__ import annotations

from prometheus_client import Counter
from prometheus_client.registry import CollectorRegistry

from quasar.errors import InvalidTopicName, NotAllowedError, TopicNotFound

__all__ = [
    "INVALID_NAME",
    "MAX_ACTIVE",
    "MAX_ACTIVE_PER_CONNECTION",
    "NOT_ALLOWED",
    "NOT_FOUND",
    "REFUSED_METRIC",
    "SKIPPED_METRIC",
    "TIMEOUT",
    "TxnLimitMetrics",
    "reason_of",
]

REFUSED_METRIC = "quasar_txn_refused"
SKIPPED_METRIC = "quasar_txn_end_participant_skipped"

# Why a participant is refused at ADD time, or skipped at the end.
INVALID_NAME = "invalid_name"  # not a V2 name, or a name over its length bound
NOT_FOUND = "not_found"  # namespace (or, for a subscription, topic) does not exist
NOT_ALLOWED = "not_allowed"  # non-persistent, or a partitioned topic's base name
_PARTICIPANT_REASONS = (INVALID_NAME, NOT_FOUND, NOT_ALLOWED)
# Why a NEW_TXN is refused.
MAX_ACTIVE = "max_active_transactions"
MAX_ACTIVE_PER_CONNECTION = "max_active_transactions_per_connection"
TIMEOUT = "timeout"
_REASONS = (*_PARTICIPANT_REASONS, MAX_ACTIVE, MAX_ACTIVE_PER_CONNECTION, TIMEOUT)


def reason_of(error: BaseException) -> str:
    """The reason label of a participant refusal raised as ``error``."""
    if isinstance(error, InvalidTopicName):
        return INVALID_NAME
    if isinstance(error, TopicNotFound):
        return NOT_FOUND
    assert isinstance(error, NotAllowedError), error
    return NOT_ALLOWED


class TxnLimitMetrics:
    """The two counters, on the broker's registry (None: a private one, for tests)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self._refused = Counter(
            REFUSED_METRIC,
            "Transaction requests refused by a bound: NEW_TXN over the active or "
            "timeout limit, participants the end of the transaction could not reach",
            ["reason"],
            registry=registry,
        )
        self._skipped = Counter(
            SKIPPED_METRIC,
            "Participants an end counted as done because they can no longer be "
            "reached (deleted, or a name quasar does not serve)",
            ["reason"],
            registry=registry,
        )
        for reason in _REASONS:  # every series exists from the start, at 0
            self._refused.labels(reason)
        for reason in _PARTICIPANT_REASONS:
            self._skipped.labels(reason)

    def refused(self, reason: str) -> None:
        self._refused.labels(reason).inc()

    def skipped(self, reason: str) -> None:
        self._skipped.labels(reason).inc()
