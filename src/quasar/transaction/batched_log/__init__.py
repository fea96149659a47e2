"""PIP-160 batched writes for the coordinator log and the pending-ack logs.

* ``entry_format``: the batched entry ``[magic][version][records]``;
* ``writer``: ``TxnLogBufferedWriter``, the buffer with its three thresholds;
* ``deletion``: deleting records by batch index on the log's cursor;
* ``config``: ``BatchedWriteConfig``, the thresholds (a configuration section);
* ``control``: the run-time switch, status and metrics of each kind of log;
* ``metrics``: the PIP-160 Prometheus metrics.
"""

from __future__ import annotations

from .config import BatchedWriteConfig
from .control import BatchedLogControl, BatchedLogs
from .entry_format import (
    BATCHED_ENTRY_MAGIC,
    BATCHED_ENTRY_VERSION,
    batched_payload,
    encode_batched_entry,
    is_batched_entry,
)
from .position import LogPosition
from .writer import TxnLogBufferedWriter

__all__ = [
    "BATCHED_ENTRY_MAGIC",
    "BATCHED_ENTRY_VERSION",
    "BatchedLogControl",
    "BatchedLogs",
    "BatchedWriteConfig",
    "LogPosition",
    "TxnLogBufferedWriter",
    "batched_payload",
    "encode_batched_entry",
    "is_batched_entry",
]
