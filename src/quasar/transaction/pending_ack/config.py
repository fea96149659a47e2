"""Settings of one pending-ack handle (plain values; the broker maps its config).

Pulsar has no limits here (its maps grow with the workload, which PIP-153 and issue
#7680 report as OOMs); these bounds are quasar's own. Names follow the transaction
buffer's config; the ``broker.conf``-style key each should get is given below.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PendingAckConfig:
    """Per-subscription bounds and intervals.

    * ``max_ongoing_transactions`` (``transactionPendingAckMaxOngoingTransactions``):
      transactions holding pending acks on one subscription; an ack that would add one
      more is refused with ``TooManyRequests`` (retryable: room frees as transactions
      end). 0 = no limit.
    * ``max_pending_positions`` (``transactionPendingAckMaxPendingPositions``): entries
      pending-acked by all transactions together; same refusal. 0 = no limit.
    * ``max_waiting_requests`` (``transactionPendingAckMaxWaitingRequests``): requests
      queued while the handle replays its log; more get ``ServiceNotReady``.
    * ``max_ended_transactions`` (``transactionPendingAckMaxEndedTransactions``):
      recently ended transactions remembered, so a repeated end is answered without a
      log write and a late ack is refused; the oldest are forgotten first (the low
      watermark still fences those).
    * ``replay_read_entries``: log entries per read during recovery (Pulsar: 100).
    * ``cursor_flush_retry_interval_ms``: after a commit's cursor flush failed, the
      delay before the handle tries again by itself (the coordinator retries too).
    * ``commit_flush_beside_record``: a commit flushes the cursor while its COMMIT
      record is being written (one storage round trip) rather than after it (two).
      Both orders are crash-safe; ``False`` keeps the record-first order, which the
      tests of that crash window use.
    """

    max_ongoing_transactions: int = 10_000
    max_pending_positions: int = 500_000
    max_waiting_requests: int = 2_000
    max_ended_transactions: int = 10_000
    replay_read_entries: int = 100
    cursor_flush_retry_interval_ms: int = 1_000
    commit_flush_beside_record: bool = True

    def __post_init__(self) -> None:
        for name in ("max_ongoing_transactions", "max_pending_positions"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = no limit)")
        for name in (
            "max_waiting_requests",
            "max_ended_transactions",
            "replay_read_entries",
            "cursor_flush_retry_interval_ms",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
