"""Settings of one topic partition's transaction buffer (the broker maps its config)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransactionBufferConfig:
    """Limits and intervals; names follow Pulsar's broker.conf keys where one exists.

    * ``snapshot_max_transaction_count`` (transactionBufferSnapshotMaxTransactionCount):
      after an end, a snapshot is taken once this many changes (max read position
      moves, aborted-set changes) accumulated since the last one.
    * ``snapshot_min_time_ms`` (transactionBufferSnapshotMinTimeInMillis): a timer
      with this period takes a snapshot if anything changed since the last one.
    * ``snapshot_segment_size_bytes`` (transactionBufferSnapshotSegmentSize): the
      largest snapshot record; once the aborted ids do not fit in one, full segments
      are sealed and written under their own keys (see ``snapshot_format``).
    * ``max_ongoing_transactions``: open transactions this partition tracks; the first
      append of one more is refused with ``TooManyRequests`` (retryable). 0 = no limit.
    * ``max_aborted_transactions``: aborted ids kept in memory (they leave when
      retention deletes the ledger of their abort marker). At the limit, *new*
      transactions are refused with ``TooManyRequests``; aborts are never refused,
      since refusing one would stall the partition. 0 = no limit.
    * ``max_ended_transactions``: recently ended ids remembered so a repeated end is
      answered without a second marker and a late send is refused. Ids at or below
      their coordinator's low watermark leave first; past the limit the oldest leave
      (the low watermark still fences them, as in Pulsar).
    * ``replay_read_entries``: entries per read during recovery (Pulsar: 100).
    * ``verify_client_entries``: check that entries from clients carry transaction
      ids exactly when they are transactional and never a marker type, so no client
      can forge a marker that recovery would believe.
    """

    snapshot_max_transaction_count: int = 1000
    snapshot_min_time_ms: int = 5000
    snapshot_segment_size_bytes: int = 262_144
    max_ongoing_transactions: int = 100_000
    max_aborted_transactions: int = 1_000_000
    max_ended_transactions: int = 50_000
    replay_read_entries: int = 100
    verify_client_entries: bool = True

    def __post_init__(self) -> None:
        if self.snapshot_max_transaction_count < 1:
            raise ValueError("snapshot_max_transaction_count must be >= 1")
        if self.snapshot_min_time_ms < 1:
            raise ValueError("snapshot_min_time_ms must be >= 1")
        # Room for the segment header, a long topic name and at least one id.
        if self.snapshot_segment_size_bytes < 1024:
            raise ValueError("snapshot_segment_size_bytes must be >= 1024")
        for name in ("max_ongoing_transactions", "max_aborted_transactions"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = no limit)")
        if self.max_ended_transactions < 1:
            raise ValueError("max_ended_transactions must be >= 1")
        if self.replay_read_entries < 1:
            raise ValueError("replay_read_entries must be >= 1")
