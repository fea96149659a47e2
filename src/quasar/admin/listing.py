"""Topic listings shared by the namespace and persistent-topic routes."""

from __future__ import annotations

from quasar.admin.api import AdminBroker
from quasar.protocol.namespace_name import PERSISTENT, parse_topic
from quasar.protocol.topic_name import PARTITION_SUFFIX, is_hidden_from_listings


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
        topics = {t for t in topics if not is_hidden_from_listings(parse_topic(t))}
    return sorted(topics)
