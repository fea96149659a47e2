"""Which bundle a transaction coordinator and its own system topics belong to.

Coordinator ``n`` is partition ``n`` of
``persistent://pulsar/system/transaction_coordinator_assign``, owned with that
partition's bundle like any topic. The coordinator also writes two topics of its own,
its log ``pulsar/system/__transaction_log_<n>`` and its terminated-transaction
preserver ``pulsar/system/__terminated_txn_state_<n>``. Their names hash to other
bundles of ``pulsar/system``, which another broker may own; but only the coordinator's
owner may write them (two writers would interleave two coordinators' records). So they
are placed with the coordinator: the bundle of either is the bundle of
``transaction_coordinator_assign-partition-<n>``, and a lookup of either finds the
coordinator's owner.
"""

from __future__ import annotations

import re

from quasar.protocol.topic_name import SYSTEM_NAMESPACE, TopicName
from quasar.transaction.coordinator.preserver import TERMINATED_TXN_STATE_PREFIX
from quasar.transaction.coordinator_registry import (
    TRANSACTION_COORDINATOR_ASSIGN,
    TRANSACTION_LOG_PREFIX,
)

__all__ = ["assign_partition", "placement_of"]

_COORDINATOR_TOPIC = re.compile(
    rf"(?:{re.escape(TRANSACTION_LOG_PREFIX)}|{re.escape(TERMINATED_TXN_STATE_PREFIX)})"
    r"(0|[1-9][0-9]{0,8})"
)


def assign_partition(tc_id: int) -> TopicName:
    """``persistent://pulsar/system/transaction_coordinator_assign-partition-<tc_id>``."""
    return TopicName.parse(f"{TRANSACTION_COORDINATOR_ASSIGN}-partition-{tc_id}")


def placement_of(name: TopicName) -> TopicName:
    """The name whose bundle ``name`` is served with: the assign partition of the
    coordinator for a coordinator's own topics, ``name`` itself for every other."""
    if name.namespace_name != SYSTEM_NAMESPACE or name.is_partition:
        return name
    found = _COORDINATOR_TOPIC.fullmatch(name.local_name)
    if found is None or name.domain != "persistent":
        return name
    return assign_partition(int(found.group(1)))
