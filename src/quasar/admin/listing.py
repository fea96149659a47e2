"""Topic listings shared by the namespace and persistent-topic routes."""

from __future__ import annotations

from quasar.admin.api import AdminBroker
from quasar.protocol.namespace_name import PERSISTENT, parse_topic
from quasar.protocol.topic_name import PARTITION_SUFFIX

# Pulsar hides its system topics from listings unless asked; quasar's system topics
# follow the same naming: a leading "__" (__change_events,
# __transaction_buffer_snapshot, ...) or the pending-ack log suffix.
_SYSTEM_SUFFIX = "__transaction_pending_ack"


def is_system_topic(topic: str) -> bool:
    """True for a system topic's (or system topic partition's) full name."""
    local = parse_topic(topic).local_name
    return local.startswith("__") or partitioned_parent(local).endswith(_SYSTEM_SUFFIX)


def partitioned_parent(name: str) -> str:
    """``x`` for ``x-partition-N``; other names unchanged."""
    base, sep, index = name.rpartition(PARTITION_SUFFIX)
    return base if sep and base and index.isdigit() else name


def namespace_topics(
    broker: AdminBroker, namespace: str, include_system: bool = False
) -> list[str]:
    """Every persistent topic and partition in ``namespace``, sorted.

    Partitions of partitioned topics are listed even if the broker has not created
    them yet (it may create partitions lazily), as Pulsar lists them.
    """
    topics = {t for t in broker.list_topics(namespace) if t.startswith(PERSISTENT)}
    for parent in broker.resources.partitioned_topics.list(namespace):
        metadata = broker.resources.partitioned_topics.get(parent)
        if metadata is not None:
            topics.update(
                f"{parent}{PARTITION_SUFFIX}{i}" for i in range(metadata.partitions)
            )
    if not include_system:
        topics = {t for t in topics if not is_system_topic(t)}
    return sorted(topics)
