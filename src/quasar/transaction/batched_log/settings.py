"""The thresholds of one kind of batched log (coordinator logs or pending-ack logs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchedWriteSettings:
    """PIP-160 thresholds; an entry is written when any one is reached.

    * ``enabled`` (``transactionLogBatchedWriteEnabled`` /
      ``transactionPendingAckBatchedWriteEnabled``, default off): batch at all. With
      ``max_records <= 1`` batching stays off (one record per entry either way).
    * ``max_records`` (``...MaxRecords``, 512): records in one entry.
    * ``max_size_bytes`` (``...MaxSize``, 4 MiB): record bytes in one entry; a single
      record of this size or more is written alone, after the buffer ("by force").
    * ``max_delay_ms`` (``...MaxDelayInMillis``, 1): how long the first record of a
      batch may wait for more.
    """

    enabled: bool = False
    max_records: int = 512
    max_size_bytes: int = 4 * 1024 * 1024
    max_delay_ms: float = 1

    def __post_init__(self) -> None:
        if self.max_records < 1:
            raise ValueError("max_records must be >= 1")
        if self.max_size_bytes < 1:
            raise ValueError("max_size_bytes must be >= 1")
        if self.max_delay_ms < 0:
            raise ValueError("max_delay_ms must be >= 0")
