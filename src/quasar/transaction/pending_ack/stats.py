"""Stats views of a pending-ack handle, shaped like Pulsar's admin answers.

* ``TransactionPendingAckStats``: ``{state, lowWaterMarks, ongoingTxnSize}``, plus
  quasar's counters (committed/aborted/conflicts/low-watermark aborts), bounds in use
  and a commit-latency histogram (Pulsar's ``pulsar_txn_tp_commit_latency``).
* ``TransactionInPendingAckStats``: ``{cumulativeAckPosition}`` for one transaction.
* ``PositionInPendingAckStats``: ``{state}`` for one entry (or batch member).
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

#: Upper bounds (ms) of the commit-latency buckets; the last bucket is "+Inf".
COMMIT_LATENCY_BUCKETS_MS: tuple[float, ...] = (5, 10, 20, 50, 100, 200, 500, 1000)
#: Commit latencies kept per subscription for the summary's quantiles.
COMMIT_LATENCY_SAMPLES_MAX = 1024


class PositionInPendingAckState(Enum):
    """Pulsar's ``PositionInPendingAckStats.State`` values."""

    PENDING_ACK = "PendingAck"  # held by an open transaction
    MARK_DELETE = "MarkDelete"  # already acknowledged on the subscription cursor
    NOT_IN_PENDING_ACK = "NotInPendingAck"
    PENDING_ACK_NOT_READY = "PendingAckNotReady"  # the handle is not Ready
    INVALID_POSITION = "InvalidPosition"


@dataclass
class PendingAckCounters:
    """Monotonic counters and the commit-latency histogram of one handle."""

    committed: int = 0
    aborted: int = 0
    low_watermark_aborted: int = 0
    conflicts: int = 0
    # Ends whose action contradicts what this handle already did for the transaction
    # (see PendingAckHandle._end); should stay 0.
    contradicting_ends: int = 0
    # Ends that failed (the coordinator retries them): Pulsar's status="failed".
    commit_failed: int = 0
    abort_failed: int = 0
    commit_latency_ms: list[int] = field(
        default_factory=lambda: [0] * (len(COMMIT_LATENCY_BUCKETS_MS) + 1)
    )
    # The most recent commit latencies, for the quantiles of Pulsar's
    # ``pulsar_txn_tp_commit_latency`` summary; bounded, so a busy subscription keeps
    # a recent window rather than its whole history.
    recent_commit_latencies_ms: deque[float] = field(
        default_factory=lambda: deque(maxlen=COMMIT_LATENCY_SAMPLES_MAX)
    )
    commit_latency_sum_ms: float = 0.0

    def observe_commit_latency(self, ms: float) -> None:
        self.commit_latency_ms[bisect.bisect_left(COMMIT_LATENCY_BUCKETS_MS, ms)] += 1
        self.recent_commit_latencies_ms.append(ms)
        self.commit_latency_sum_ms += ms

    def latency_view(self) -> dict[str, int]:
        labels = [f"{b:g}" for b in COMMIT_LATENCY_BUCKETS_MS] + ["+Inf"]
        return dict(zip(labels, self.commit_latency_ms, strict=True))
