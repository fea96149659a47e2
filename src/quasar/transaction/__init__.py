"""Transactions: the coordinator (ids, statuses, log, end fan-out, timeouts, recovery).

Layering: this package uses ``quasar.storage.api`` (protocols only), the generated
record modules of ``quasar.protocol``, ``quasar.errors``, ``quasar.clock`` and
``quasar.config_schema`` (to declare its configuration sections); it never
imports the broker, server, admin or client packages. The broker plugs in through
``TransactionBufferClient`` (how ends reach partitions and subscriptions) and the
ledger factory and naming it hands to ``TransactionCoordinatorRegistry``.
"""

from quasar.protocol.txn_id import TxnID

from .buffer_client import (
    EndFailure,
    FakeTransactionBufferClient,
    Participant,
    TransactionBufferClient,
    classify_end_failure,
)
from .config import TransactionConfig
from .coordinator import (
    CoordinatorConfig,
    CoordinatorState,
    CoordinatorStatus,
    TransactionCoordinator,
    TxnMeta,
)
from .coordinator_registry import (
    TransactionCoordinatorRegistry,
    transaction_log_ledger_name,
    transaction_log_topic,
)
from .errors import ReachMaxActiveTxn, TransactionNotOwned, TransactionTimeoutTooLong
from .scheduler import AsyncioScheduler, Scheduler, VirtualScheduler
from .txn_status import TxnAction, TxnStatus, check_transition

__all__ = [
    "AsyncioScheduler",
    "CoordinatorConfig",
    "CoordinatorState",
    "CoordinatorStatus",
    "EndFailure",
    "FakeTransactionBufferClient",
    "Participant",
    "ReachMaxActiveTxn",
    "Scheduler",
    "TransactionBufferClient",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionCoordinatorRegistry",
    "TransactionNotOwned",
    "TransactionTimeoutTooLong",
    "TxnAction",
    "TxnID",
    "TxnMeta",
    "TxnStatus",
    "VirtualScheduler",
    "check_transition",
    "classify_end_failure",
    "transaction_log_ledger_name",
    "transaction_log_topic",
]
