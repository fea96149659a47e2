"""The settings a running broker changes without a restart, and how each is applied.

Each key here is one Pulsar marks dynamic (``dynamic = true`` in its
``ServiceConfiguration``) and quasar implements; its callback makes the running
broker use the new value at once (``quasar.broker.dynamic_config`` stores the change
and refuses every key not registered here). Keys Pulsar does not mark dynamic, such
as ``maxUnackedMessagesPerConsumer`` or ``maxProducersPerTopic``, are not changeable
here either.
"""

from __future__ import annotations

from quasar.auth import AuthorizationService
from quasar.broker.dynamic_config import DynamicConfiguration
from quasar.broker.service import BrokerService
from quasar.config import ServiceConfiguration

__all__ = ["POLICY_KEYS", "register_dynamic_settings"]

# Settings the broker service reads from its configuration at each use (topic
# auto-creation): applied by handing it the new configuration.
POLICY_KEYS = ("allowAutoTopicCreation", "allowAutoTopicCreationType", "defaultNumPartitions")


def register_dynamic_settings(
    dynamic: DynamicConfiguration,
    service: BrokerService,
    authorization: AuthorizationService,
) -> None:
    """Register every dynamic setting of this broker with its apply callback."""

    def use_configuration(config: ServiceConfiguration) -> None:
        service.config = config

    for key in POLICY_KEYS:
        dynamic.register(key, use_configuration)

    def max_partitions(config: ServiceConfiguration) -> None:
        bound = config.policies.max_num_partitions_per_partitioned_topic
        service.resources.partitioned_topics.max_partitions = bound

    dynamic.register("maxNumPartitionsPerPartitionedTopic", max_partitions)

    def read_limits(config: ServiceConfiguration) -> None:
        service.read_limits.update(config.dispatch)

    dynamic.register("dispatcherMaxReadBatchSize", read_limits)
    dynamic.register("dispatcherMaxReadSizeBytes", read_limits)

    def super_users(config: ServiceConfiguration) -> None:
        authorization.set_super_user_roles(config.authorization.super_user_roles)

    dynamic.register("superUserRoles", super_users)

    transactions = service.transactions
    if transactions is None:
        # transactionCoordinatorEnabled=false: no batched logs to switch, so the
        # keys are not offered (a change would have nothing to act on).
        return
    logs = transactions.batched_logs

    # The same switches as PIP-160's txnTcBatchLog / txnPendingAckBatchLog endpoints
    # (quasar.admin.txn_batch_log): live writers change at once, later ones start so.
    def coordinator_log(config: ServiceConfiguration) -> None:
        logs.coordinator.set_enabled(config.transaction.transaction_log_batched_write.enabled)

    def pending_ack_log(config: ServiceConfiguration) -> None:
        enabled = config.transaction.transaction_pending_ack_batched_write.enabled
        logs.pending_ack.set_enabled(enabled)

    dynamic.register("transactionLogBatchedWriteEnabled", coordinator_log)
    dynamic.register("transactionPendingAckBatchedWriteEnabled", pending_ack_log)
