"""The transaction coordinator: transaction ids, statuses, the log and the end fan-out.

``TransactionCoordinator`` serves one coordinator id over its log managed ledger;
``CoordinatorState`` is its in-memory state, changed only by ``apply(record)``;
``TransactionLog`` is the log format and cursor handling; ``TimeoutTracker`` aborts
transactions whose deadline passed; ``TerminatedTxnPreserver`` remembers how ended
transactions ended, per client name (PIP-255 idempotent commit/abort).
"""

from ..batched_log import LogPosition
from .config import CoordinatorConfig
from .coordinator import CoordinatorStats, CoordinatorStatus, TransactionCoordinator
from .log import (
    CURSOR_NAME,
    MAX_LOCAL_TXN_ID,
    Record,
    TransactionLog,
    decode_entry,
    encode_batch,
    encode_record,
)
from .meta import Subscription, TxnMeta
from .preserver import (
    MemoryPreserverStore,
    PreserverStats,
    PreserverStore,
    TerminatedTxnPreserver,
    terminated_txn_state_topic,
)
from .preserver_format import TerminatedTxn
from .state import ApplyResult, CoordinatorState
from .timeouts import TimeoutTracker

__all__ = [
    "CURSOR_NAME",
    "MAX_LOCAL_TXN_ID",
    "ApplyResult",
    "CoordinatorConfig",
    "CoordinatorState",
    "CoordinatorStats",
    "CoordinatorStatus",
    "LogPosition",
    "MemoryPreserverStore",
    "PreserverStats",
    "PreserverStore",
    "Record",
    "Subscription",
    "TerminatedTxn",
    "TerminatedTxnPreserver",
    "TimeoutTracker",
    "TransactionCoordinator",
    "TransactionLog",
    "TxnMeta",
    "decode_entry",
    "encode_batch",
    "encode_record",
    "terminated_txn_state_topic",
]
