"""PIP-160 batched writes for the coordinator log and the pending-ack logs.

* ``entry_format``: the batched entry ``[magic][version][records]``;
* ``writer``: ``TxnLogBufferedWriter``, the buffer with its three thresholds;
* ``deletion``: deleting records by batch index on the log's cursor;
* ``control``: the run-time switch, status and metrics of each kind of log;
* ``metrics``: the PIP-160 Prometheus metrics.
"""

from __future__ import annotations

from .control import BatchedLogControl, BatchedLogs
from .entry_format import (
    BATCHED_ENTRY_MAGIC,
    BATCHED_ENTRY_VERSION,
    batched_payload,
    encode_batched_entry,
    is_batched_entry,
)
from .position import LogPosition
from .settings import BatchedWriteSettings
from .writer import TxnLogBufferedWriter

__all__ = [
    "BATCHED_ENTRY_MAGIC",
    "BATCHED_ENTRY_VERSION",
    "BatchedLogControl",
    "BatchedLogs",
    "BatchedWriteSettings",
    "LogPosition",
    "TxnLogBufferedWriter",
    "batched_payload",
    "encode_batched_entry",
    "is_batched_entry",
]
