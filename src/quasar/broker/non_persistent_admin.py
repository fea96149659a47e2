"""Non-persistent topics as the admin REST API sees them
(``quasar.admin.non_persistent_topics``).

A non-persistent topic exists only while it is loaded, so its stats, listing and
deletion answer from the loaded topics; a partitioned topic's partition count is
metadata and outlives its partitions.
"""

from __future__ import annotations

from typing import Any, cast

from quasar.errors import NotAllowedError, PreconditionFailedError, TopicNotFound
from quasar.protocol.topic_name import TopicName
from quasar.resources.partitions import partition_names

from .non_persistent_topic import NonPersistentTopic
from .non_persistent_topics import NON_PERSISTENT, NonPersistentTopics
from .service import BrokerService

__all__ = ["NonPersistentAdmin"]

# Counters a partitioned topic's stats sum over its partitions.
_SUMMED = (
    "msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut",
    "msgInCounter", "bytesInCounter", "msgOutCounter", "bytesOutCounter", "msgDropRate",
)


class NonPersistentAdmin:
    """Listing, stats and deletion of the broker's non-persistent topics."""

    def __init__(self, service: BrokerService) -> None:
        self._service = service

    @property
    def _topics(self) -> NonPersistentTopics:
        return self._service.non_persistent

    def check_enabled(self) -> None:
        """Raises: NotAllowedError: ``enableNonPersistentTopics`` is false."""
        self._topics.check_enabled()

    def list_topics(self, namespace: str) -> list[str]:
        """The loaded topics and every partition of the partitioned ones, sorted."""
        names = set(self._topics.list_topics(namespace))
        partitioned = self._service.resources.partitioned_topics
        for parent in partitioned.list(namespace, NON_PERSISTENT):
            names.update(partition_names(parent, partitioned.listed_partitions(parent)))
        return sorted(names)

    def list_partitioned_topics(self, namespace: str) -> list[str]:
        return self._service.resources.partitioned_topics.list(namespace, NON_PERSISTENT)

    def topic_stats(self, topic: str) -> dict[str, Any]:
        """Pulsar's NonPersistentTopicStats of a loaded topic.

        Raises:
            TopicNotFound: the topic is not loaded (it has no producer and no
                subscription, so it does not exist).
        """
        loaded = self._topics.topics.get(topic)
        if loaded is None or loaded.closed:
            raise TopicNotFound(f"Topic {topic} not found")
        return loaded.stats()

    def partitioned_stats(self, topic: str) -> dict[str, Any]:
        """The loaded partitions' stats summed, with each under ``partitions``."""
        name = TopicName.parse(topic)
        count = self._service.partitions_of(name)
        # From the loaded topics, not the count: the count may be in the millions.
        partitions = {
            t.name: t.stats() for t in self._loaded_partitions(name) if not t.closed
        }
        total: dict[str, Any] = {key: 0 for key in _SUMMED}
        publishers: list[Any] = []
        for stats in partitions.values():
            for key in _SUMMED:
                total[key] += stats[key]
            publishers.extend(cast("list[Any]", stats["publishers"]))
        total.update(
            metadata={"partitions": count},
            publishers=publishers,
            subscriptions={},
            replication={},
            partitions=partitions,
        )
        return total

    def _loaded_partitions(self, name: TopicName) -> list[NonPersistentTopic]:
        return sorted(
            (
                t for t in list(self._topics.topics.values())
                if t.topic_name.is_partition and t.topic_name.base.full == name.full
            ),
            key=lambda t: t.partition_index,
        )

    async def delete_topic(self, topic: str, force: bool) -> None:
        """Raises: TopicNotFound; PreconditionFailedError: clients are connected
        and ``force`` is false."""
        try:
            await self._topics.delete_topic(TopicName.parse(topic), force)
        except NotAllowedError as e:
            raise PreconditionFailedError(str(e)) from None

    async def delete_partitioned_topic(self, topic: str, force: bool) -> None:
        """Unload the loaded partitions (all or none), then forget the count.

        Raises:
            PreconditionFailedError: a partition has clients and ``force`` is false.
            ResourceNotFoundError: not a partitioned topic.
        """
        loaded = self._loaded_partitions(TopicName.parse(topic))
        if not force:
            busy = [t.name for t in loaded if t.producers or t.consumer_count()]
            if busy:
                raise PreconditionFailedError(
                    f"Topic has active producers/subscriptions: {busy[0]}"
                )
        for t in loaded:
            await t.close()
        self._service.resources.partitioned_topics.delete(topic)
