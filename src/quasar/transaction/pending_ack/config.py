"""The configuration section of the pending-ack handles (one per subscription).

Pulsar has no limits here (its maps grow with the workload, which PIP-153 and issue
#7680 report as OOMs); these bounds are quasar's own. They are tunables, without a
``broker.conf`` key yet; the key each should get is given below. Names follow the
transaction buffer's section.
"""

from __future__ import annotations

from dataclasses import dataclass

from quasar.config_schema import Section, at_least, tunable


@dataclass(frozen=True)
class PendingAckConfig(Section):
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

    max_ongoing_transactions: int = tunable(10_000, at_least(0))
    max_pending_positions: int = tunable(500_000, at_least(0))
    max_waiting_requests: int = tunable(2_000, at_least(1))
    max_ended_transactions: int = tunable(10_000, at_least(1))
    replay_read_entries: int = tunable(100, at_least(1))
    cursor_flush_retry_interval_ms: int = tunable(1_000, at_least(1))
    commit_flush_beside_record: bool = tunable(True)
