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
    """

    max_active_transactions: int = 0
    end_retry_interval_ms: int = 1000
    replay_read_entries: int = 100
    # PIP-160 batched log writes (the broker's switch, thresholds and metrics for
    # coordinator logs); None: one record per entry.
    batched_log: BatchedLogControl | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.max_active_transactions < 0:
            raise ValueError("max_active_transactions must be >= 0 (0 = unlimited)")
        if self.end_retry_interval_ms < 1:
            raise ValueError("end_retry_interval_ms must be >= 1")
        if self.replay_read_entries < 1:
            raise ValueError("replay_read_entries must be >= 1")
