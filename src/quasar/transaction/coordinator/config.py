"""Settings of one transaction coordinator (plain values; the broker maps its config)."""

from __future__ import annotations

from dataclasses import dataclass, field

from quasar.transaction.batched_log import BatchedLogControl


@dataclass(frozen=True)
class CoordinatorConfig:
    """Per-coordinator limits and intervals.

    ``max_active_transactions``: Pulsar's ``maxActiveTransactionsPerCoordinator``;
    live transactions (OPEN, COMMITTING or ABORTING) plus NEW records in flight; 0 means
    unlimited. ``end_retry_interval_ms``: quasar's
    ``transactionEndRetryIntervalMs`` (Pulsar hard-codes 1000 ms); the delay before a
    retryable end call to a partition or subscription is sent again.
    ``replay_read_entries``: log entries read per request during recovery (Pulsar: 100).

    The terminated-transaction preserver (PIP-255, ``preserver.py``):
    ``meta_persist_count`` (``transactionMetaPersistCount``) ended transactions kept
    per client name, 0 = off; ``meta_persist_time_hours``
    (``transactionMetaPersistTimeInHour``) how long one is kept after its decision;
    ``meta_expire_check_interval_s`` (``transactionMetaExpireCheckIntervalInSecond``)
    how often expired ones are dropped; ``preserver_flush_timeout_ms`` (quasar's own)
    how long an end waits for the preserver's write before it fails with
    ``TransactionPreserverClosed`` (retryable) instead of hanging.
    """

    max_active_transactions: int = 0
    end_retry_interval_ms: int = 1000
    replay_read_entries: int = 100
    # PIP-160 batched log writes (the broker's switch, thresholds and metrics for
    # coordinator logs); None: one record per entry.
    batched_log: BatchedLogControl | None = field(default=None, compare=False)
    meta_persist_count: int = 64
    meta_persist_time_hours: int = 72
    meta_expire_check_interval_s: int = 300
    preserver_flush_timeout_ms: int = 10_000

    def __post_init__(self) -> None:
        if self.max_active_transactions < 0:
            raise ValueError("max_active_transactions must be >= 0 (0 = unlimited)")
        if self.end_retry_interval_ms < 1:
            raise ValueError("end_retry_interval_ms must be >= 1")
        if self.replay_read_entries < 1:
            raise ValueError("replay_read_entries must be >= 1")
        if self.meta_persist_count < 0:
            raise ValueError("meta_persist_count must be >= 0 (0 = off)")
        if self.meta_persist_time_hours < 1:
            raise ValueError("meta_persist_time_hours must be >= 1")
        if self.meta_expire_check_interval_s < 1:
            raise ValueError("meta_expire_check_interval_s must be >= 1")
        if self.preserver_flush_timeout_ms < 1:
            raise ValueError("preserver_flush_timeout_ms must be >= 1")
