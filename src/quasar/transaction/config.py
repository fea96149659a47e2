"""The transaction section of the broker's configuration.

It composes the sections of the transaction subsystems, each defined beside its code:
the coordinators (``coordinator.config``), the transaction buffers (``buffer.config``),
the pending-ack handles (``pending_ack.config``) and the two PIP-160 batched logs
(``batched_log.config``). The broker hands each subsystem its own part.
"""

from __future__ import annotations

from dataclasses import dataclass

from quasar.config_schema import Section, at_least, section, setting

from .batched_log.config import BatchedWriteConfig
from .buffer.config import TransactionBufferConfig
from .coordinator.config import CoordinatorConfig
from .pending_ack.config import PendingAckConfig


@dataclass(frozen=True)
class TransactionConfig(Section):
    """Transaction coordinator, transaction buffer and pending-ack settings."""

    # Pulsar's default is false; quasar is a transactional broker, so it is on.
    transaction_coordinator_enabled: bool = setting(True, "transactionCoordinatorEnabled")
    # quasar's own key: the partitions the coordinator-assign topic gets when it is
    # created. 1 is what Pulsar's standalone creates (PulsarStandalone); a cluster set
    # up with initialize-transaction-coordinator-metadata gets 16 by default. An
    # existing assign topic keeps its count.
    transaction_coordinator_count: int = setting(
        1, "transactionCoordinatorCount", at_least(1)
    )
    buffer: TransactionBufferConfig = section(TransactionBufferConfig, "transactionBuffer")
    coordinator: CoordinatorConfig = section(CoordinatorConfig)
    transaction_log_batched_write: BatchedWriteConfig = section(
        BatchedWriteConfig, "transactionLogBatchedWrite"
    )
    transaction_pending_ack_batched_write: BatchedWriteConfig = section(
        BatchedWriteConfig, "transactionPendingAckBatchedWrite"
    )
    pending_ack: PendingAckConfig = section(PendingAckConfig)
