"""The configuration section of one kind of batched log (coordinator or pending-ack)."""

from __future__ import annotations

from dataclasses import dataclass

from quasar.config_schema import Section, at_least, setting


@dataclass(frozen=True)
class BatchedWriteConfig(Section):
    """PIP-160 thresholds; an entry is written when any one is reached.

    The broker has two of these, under the key prefixes ``transactionLogBatchedWrite``
    (coordinator logs) and ``transactionPendingAckBatchedWrite`` (pending-ack logs);
    the keys below are the suffixes. With ``max_records <= 1`` batching stays off (one
    record per entry either way). A single record of ``max_size`` bytes or more is
    written alone, after the buffer ("by force").
    """

    # Pulsar default (PIP-160): off.
    enabled: bool = setting(False, "Enabled")
    # Pulsar default (PIP-160): records in one entry.
    max_records: int = setting(512, "MaxRecords", at_least(1))
    # Pulsar default (PIP-160): 4 MiB of record bytes in one entry.
    max_size: int = setting(4_194_304, "MaxSize", at_least(1))
    # Pulsar default (PIP-160): how long the first record of a batch waits for more.
    max_delay_in_millis: int = setting(1, "MaxDelayInMillis", at_least(0))
