"""The configuration section of the transaction buffers (one per topic partition)."""

from __future__ import annotations

from dataclasses import dataclass

from quasar.config_schema import Section, at_least, setting, tunable


@dataclass(frozen=True)
class TransactionBufferConfig(Section):
    """Snapshot triggers (``transactionBuffer*`` keys, the suffixes below) and limits.

    * ``snapshot_max_transaction_count``: after an end, a snapshot is taken once this
      many changes (max read position moves, aborted-set changes) accumulated since
      the last one.
    * ``snapshot_min_time_in_millis``: a timer with this period takes a snapshot if
      anything changed since the last one.
    * ``snapshot_segment_size_bytes`` (Pulsar's transactionBufferSnapshotSegmentSize,
      not configurable here): the largest snapshot record; once the aborted ids do not
      fit in one, full segments are sealed and written under their own keys (see
      ``snapshot_format``).
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
      can forge a marker that recovery would believe. A broker whose topics already
      check every published entry turns it off.
    """

    # Pulsar default (broker.conf transactionBufferSnapshotMaxTransactionCount).
    snapshot_max_transaction_count: int = setting(
        1000, "SnapshotMaxTransactionCount", at_least(1)
    )
    # Pulsar default (broker.conf transactionBufferSnapshotMinTimeInMillis).
    snapshot_min_time_in_millis: int = setting(
        5000, "SnapshotMinTimeInMillis", at_least(1)
    )
    # Pulsar default (256 KiB); the floor leaves room for the segment header, a long
    # topic name and at least one id.
    snapshot_segment_size_bytes: int = tunable(262_144, at_least(1024))
    max_ongoing_transactions: int = tunable(100_000, at_least(0))
    max_aborted_transactions: int = tunable(1_000_000, at_least(0))
    max_ended_transactions: int = tunable(50_000, at_least(1))
    replay_read_entries: int = tunable(100, at_least(1))
    verify_client_entries: bool = tunable(True)
