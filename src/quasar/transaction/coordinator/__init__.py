"""The transaction coordinator: transaction ids, statuses, the log and the end fan-out.

``TransactionCoordinator`` serves one coordinator id over its log managed ledger;
``CoordinatorState`` is its in-memory state, changed only by ``apply(record)``;
``TransactionLog`` is the log format and cursor handling; ``TimeoutTracker`` aborts
transactions whose deadline passed; ``TerminatedTxnPreserver`` remembers how ended
transactions ended, per owner role and client name (PIP-255 idempotent commit/abort);
``Caller`` is who asks, for the ownership rules (``ownership.py``).
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
from .ownership import ANONYMOUS, BROKER, Caller, not_owner
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
    "ANONYMOUS",
    "BROKER",
    "CURSOR_NAME",
    "MAX_LOCAL_TXN_ID",
    "ApplyResult",
    "Caller",
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
    "not_owner",
    "terminated_txn_state_topic",
]
