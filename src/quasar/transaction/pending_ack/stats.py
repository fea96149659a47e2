"""Stats views of a pending-ack handle, shaped like Pulsar's admin answers.

* ``TransactionPendingAckStats``: ``{state, lowWaterMarks, ongoingTxnSize}``, plus
  quasar's counters (committed/aborted/conflicts/low-watermark aborts), bounds in use
  and a commit-latency histogram (Pulsar's ``pulsar_txn_tp_commit_latency``).
* ``TransactionInPendingAckStats``: ``{cumulativeAckPosition}`` for one transaction.
* ``PositionInPendingAckStats``: ``{state}`` for one entry (or batch member).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from enum import Enum

#: Upper bounds (ms) of the commit-latency buckets; the last bucket is "+Inf".
COMMIT_LATENCY_BUCKETS_MS: tuple[float, ...] = (5, 10, 20, 50, 100, 200, 500, 1000)


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
    commit_latency_ms: list[int] = field(
        default_factory=lambda: [0] * (len(COMMIT_LATENCY_BUCKETS_MS) + 1)
    )

    def observe_commit_latency(self, ms: float) -> None:
        self.commit_latency_ms[bisect.bisect_left(COMMIT_LATENCY_BUCKETS_MS, ms)] += 1

    def latency_view(self) -> dict[str, int]:
        labels = [f"{b:g}" for b in COMMIT_LATENCY_BUCKETS_MS] + ["+Inf"]
        return dict(zip(labels, self.commit_latency_ms, strict=True))
