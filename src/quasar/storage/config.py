"""The storage layer's configuration sections: managed ledgers and the journal.

``FileManagedLedgerFactory`` takes the journal section; the broker turns the
managed-ledger section (with a namespace's retention) into the ``ManagedLedgerConfig``
each ledger is opened with. Both are part of the broker's ``ServiceConfiguration``.
"""

from __future__ import annotations

from dataclasses import dataclass

from quasar.config_schema import Section, at_least, setting
from quasar.storage.api import ManagedLedgerConfig, RetentionPolicy


@dataclass(frozen=True)
class ManagedLedgerSettings(Section):
    """Ledger rollover, the entry cache and cursor persistence."""

    # Pulsar default (broker.conf managedLedgerMaxEntriesPerLedger).
    managed_ledger_max_entries_per_ledger: int = setting(
        50_000, "managedLedgerMaxEntriesPerLedger", at_least(1)
    )
    # Pulsar default (broker.conf managedLedgerMinLedgerRolloverTimeMinutes).
    managed_ledger_min_ledger_rollover_time_minutes: int = setting(
        10, "managedLedgerMinLedgerRolloverTimeMinutes", at_least(0)
    )
    # Pulsar default (broker.conf managedLedgerMaxLedgerRolloverTimeMinutes).
    managed_ledger_max_ledger_rollover_time_minutes: int = setting(
        240, "managedLedgerMaxLedgerRolloverTimeMinutes", at_least(1)
    )
    # Pulsar default (broker.conf managedLedgerMaxSizePerLedgerMbytes).
    managed_ledger_max_size_per_ledger_mbytes: int = setting(
        2048, "managedLedgerMaxSizePerLedgerMbytes", at_least(1)
    )
    # quasar's choice: 64 MB suits one process on a developer machine. Pulsar's
    # default is 1/5 of the JVM's direct memory, which has no Python counterpart.
    managed_ledger_cache_size_mb: int = setting(
        64, "managedLedgerCacheSizeMB", at_least(0)
    )
    # Pulsar default (broker.conf managedLedgerDefaultMarkDeleteRateLimit): cursor
    # persists per second for ordinary acks; 0 = persist on every ack.
    managed_ledger_default_mark_delete_rate_limit: float = setting(
        1.0, "managedLedgerDefaultMarkDeleteRateLimit", at_least(0.0)
    )
    # Pulsar default (broker.conf managedLedgerMaxUnackedRangesToPersist).
    managed_ledger_max_unacked_ranges_to_persist: int = setting(
        10_000, "managedLedgerMaxUnackedRangesToPersist", at_least(1)
    )
    # Pulsar default (broker.conf managedLedgerMaxBatchDeletedIndexToPersist): batch
    # ack sets written per cursor.
    managed_ledger_max_batch_deleted_index_to_persist: int = setting(
        10_000, "managedLedgerMaxBatchDeletedIndexToPersist", at_least(1)
    )
    # quasar's own (Pulsar bounds the same state by its metadata and frame sizes):
    # bytes of batch ack-set words (8 per word) written per cursor, so one client's
    # ack sets cannot grow the metadata store without bound.
    managed_ledger_max_batch_deleted_index_bytes_to_persist: int = setting(
        1_048_576, "managedLedgerMaxBatchDeletedIndexBytesToPersist", at_least(8)
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if (
            self.managed_ledger_min_ledger_rollover_time_minutes
            > self.managed_ledger_max_ledger_rollover_time_minutes
        ):
            raise ValueError(
                "managedLedgerMinLedgerRolloverTimeMinutes must not exceed "
                "managedLedgerMaxLedgerRolloverTimeMinutes"
            )

    @property
    def managed_ledger_cache_size_bytes(self) -> int:
        """``managedLedgerCacheSizeMB`` in bytes."""
        return self.managed_ledger_cache_size_mb * 1024 * 1024

    @property
    def cursor_persist_interval_ms(self) -> int:
        """The mark-delete rate limit as the interval the storage layer uses."""
        rate = self.managed_ledger_default_mark_delete_rate_limit
        return 0 if rate <= 0 else round(1000 / rate)

    def ledger_config(self, retention: RetentionPolicy) -> ManagedLedgerConfig:
        """The settings one managed ledger is opened with."""
        return ManagedLedgerConfig(
            max_entries_per_ledger=self.managed_ledger_max_entries_per_ledger,
            max_size_per_ledger_mb=self.managed_ledger_max_size_per_ledger_mbytes,
            max_ledger_rollover_time_minutes=(
                self.managed_ledger_max_ledger_rollover_time_minutes
            ),
            min_ledger_rollover_time_minutes=(
                self.managed_ledger_min_ledger_rollover_time_minutes
            ),
            retention=retention,
            cursor_persist_interval_ms=self.cursor_persist_interval_ms,
            max_unacked_ranges_to_persist=self.managed_ledger_max_unacked_ranges_to_persist,
            max_batch_deleted_index_to_persist=(
                self.managed_ledger_max_batch_deleted_index_to_persist
            ),
            max_batch_deleted_index_bytes_to_persist=(
                self.managed_ledger_max_batch_deleted_index_bytes_to_persist
            ),
        )


@dataclass(frozen=True)
class JournalConfig(Section):
    """Group commit of the embedded ledger storage (BookKeeper's journal settings)."""

    # BookKeeper default (bk_server.conf journalSyncData): fsync before acknowledging.
    journal_sync_data: bool = setting(True, "journalSyncData")
    # 1 ms as in the OpenMessaging benchmark's Pulsar deployment (BookKeeper's own
    # default is 2 ms): the longest a write waits for others to share its fsync.
    journal_max_group_wait_msec: int = setting(
        1, "journalMaxGroupWaitMSec", at_least(0)
    )
    # BookKeeper default (bk_server.conf journalBufferedWritesThreshold): flush a
    # group once this many bytes are pending.
    journal_buffered_writes_threshold: int = setting(
        524_288, "journalBufferedWritesThreshold", at_least(1)
    )
