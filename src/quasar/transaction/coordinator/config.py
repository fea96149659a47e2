"""The configuration section of the transaction coordinators."""

from __future__ import annotations

from dataclasses import dataclass

from quasar.config_schema import Section, at_least, setting, tunable


@dataclass(frozen=True)
class CoordinatorConfig(Section):
    """Per-coordinator limits and intervals, and the terminated-transaction preserver
    (PIP-255, ``preserver.py``) each coordinator keeps.

    ``max_active_transactions_per_coordinator`` counts live transactions (OPEN,
    COMMITTING or ABORTING) plus NEW records in flight; a NEW_TXN over it fails with
    ``ReachMaxActiveTxn`` (retryable). A NEW_TXN asking for a timeout above
    ``transaction_max_timeout_millis`` fails with ``TransactionTimeoutTooLong``.
    ``replay_read_entries`` is the number of log entries read per request during
    recovery. The preserver keeps
    ``transaction_meta_persist_count`` ended transactions per owner role and client
    name, each for ``transaction_meta_persist_time_in_hour`` after its decision, and
    drops expired ones every ``transaction_meta_expire_check_interval_in_second``; an
    end waits at most ``preserver_flush_timeout_ms`` for the preserver's write, then
    fails with ``TransactionPreserverClosed`` (retryable) instead of hanging.
    """

    # Pulsar's key (broker.conf, PIP-154), whose default 0 leaves it unlimited: one
    # client could open transactions until the broker runs out of memory. quasar
    # bounds it by default with the value PIP-154 proposed; 0 still means unlimited.
    max_active_transactions_per_coordinator: int = setting(
        10_000, "maxActiveTransactionsPerCoordinator", at_least(0)
    )
    # quasar's own key (Pulsar has none): live transactions one connection may have
    # opened, so that one client cannot take every place the coordinator bound leaves
    # (server/connection_transactions.py). 0 = unlimited.
    max_active_transactions_per_connection: int = setting(
        1_000, "maxActiveTransactionsPerConnection", at_least(0)
    )
    # quasar's own key; Pulsar takes any timeout a client asks for. An open
    # transaction holds back what consumers of its partitions may read until it ends
    # or times out, so a client asking for years could stall them for years. A NEW_TXN
    # asking for more is refused (Kafka's transaction.max.timeout.ms does the same);
    # clamping it would silently abort the client's transaction earlier than asked.
    # The default leaves room for the Spark sink's 1 h default. 0 = unbounded.
    transaction_max_timeout_millis: int = setting(
        86_400_000, "transactionMaxTimeoutMillis", at_least(0)
    )
    # quasar's own key: the delay before a retryable end call to a partition or
    # subscription is sent again. Pulsar's coordinator retries every 1000 ms
    # (hard-coded).
    transaction_end_retry_interval_ms: int = setting(
        1000, "transactionEndRetryIntervalMs", at_least(1)
    )
    # PIP-255 proposes 0 (feature off). quasar turns it on because its Spark sink
    # relies on idempotent commit; 64 terminated transactions per owner and client
    # name cost a few hundred bytes each in memory. 0 = off.
    transaction_meta_persist_count: int = setting(
        64, "transactionMetaPersistCount", at_least(0)
    )
    # PIP-255 default: terminated-transaction metadata is kept 72 hours.
    transaction_meta_persist_time_in_hour: int = setting(
        72, "transactionMetaPersistTimeInHour", at_least(1)
    )
    # PIP-255 default: how often expired entries are dropped.
    transaction_meta_expire_check_interval_in_second: int = setting(
        300, "transactionMetaExpireCheckIntervalInSecond", at_least(1)
    )
    # Pulsar reads the log 100 entries at a time during recovery.
    replay_read_entries: int = tunable(100, at_least(1))
    preserver_flush_timeout_ms: int = tunable(10_000, at_least(1))
