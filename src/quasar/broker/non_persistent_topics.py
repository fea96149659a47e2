"""The broker's loaded non-persistent topics.

A non-persistent topic exists while it is in use: it is created when a client first
produces or subscribes to it and unloaded with its last producer or subscription.
Nothing about it is stored, except a partitioned topic's partition count, which is
metadata like a persistent one's (``PartitionedTopicResources``).

A topic loaded by a request that then failed (a limit, a refused subscription) is
unloaded ``UNUSED_TOPIC_UNLOAD_DELAY_S`` later if still unused, so requests that fail
cannot pile up empty topics.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from quasar.errors import NotAllowedError, TopicNotFound
from quasar.protocol.topic_name import TopicName

from .non_persistent_topic import NonPersistentTopic, PublishedInfo
from .topic import PersistentTopic

__all__ = ["NON_PERSISTENT", "NonPersistentTopics", "ServedTopic"]

log = logging.getLogger(__name__)

NON_PERSISTENT = "non-persistent"
UNUSED_TOPIC_UNLOAD_DELAY_S = 5.0
# Pulsar's answer when enableNonPersistentTopics=false.
DISABLED = "Broker is unable to load non-persistent topic"

# A topic a client connection produces to or consumes from.
ServedTopic = PersistentTopic | NonPersistentTopic


class NonPersistentTopics:
    """Loads, lists, deletes and refreshes the stats of non-persistent topics."""

    def __init__(
        self,
        enabled: bool,
        published_info: PublishedInfo,
        namespace_exists: Callable[[str], bool],
        partitions_of: Callable[[TopicName], int],
        auto_creation_allowed: Callable[[str], bool],
        check_serving: Callable[[TopicName], None] | None = None,
    ) -> None:
        """``enabled``: ``enableNonPersistentTopics``; ``partitions_of``: a topic's
        partition count (0: not partitioned); ``auto_creation_allowed``: whether the
        namespace allows a topic to be created by its first use; ``check_serving``:
        raises when this broker does not serve the topic (a cluster member that does
        not own its bundle)."""
        self._check_serving = check_serving
        self.enabled = enabled
        self._published_info = published_info
        self._namespace_exists = namespace_exists
        self._partitions_of = partitions_of
        self._auto_creation_allowed = auto_creation_allowed
        self.topics: dict[str, NonPersistentTopic] = {}

    def check_enabled(self) -> None:
        """Raises: NotAllowedError: ``enableNonPersistentTopics`` is false."""
        if not self.enabled:
            raise NotAllowedError(DISABLED)

    def get_topic(self, name: TopicName) -> NonPersistentTopic:
        """The loaded topic, loading it as needed.

        Raises:
            NotAllowedError: non-persistent topics are disabled, or ``name`` is a
                partitioned topic's base name.
            TopicNotFound: the namespace does not exist, or auto-creation is off and
                ``name`` is not a partition of a partitioned topic.
        """
        self.check_enabled()
        if self._check_serving is not None:
            self._check_serving(name)
        topic = self.topics.get(name.full)
        if topic is not None and not topic.closed:
            return topic
        if not self._namespace_exists(name.namespace_name):
            raise TopicNotFound(f"Namespace {name.namespace_name} does not exist")
        if not name.is_partition and self._partitions_of(name) > 0:
            raise NotAllowedError(f"{name.full} is a partitioned topic; use its partitions")
        if not self._declared_partition(name) and not self._auto_creation_allowed(
            name.namespace_name
        ):
            raise TopicNotFound(f"Topic {name.full} does not exist")
        topic = NonPersistentTopic(name, self._published_info, self._unused)
        self.topics[name.full] = topic
        asyncio.get_running_loop().call_later(
            UNUSED_TOPIC_UNLOAD_DELAY_S, topic.unload_if_unused
        )
        log.info("loaded non-persistent topic %s", name.full)
        return topic

    def _declared_partition(self, name: TopicName) -> bool:
        return name.is_partition and name.partition_index < self._partitions_of(name.base)

    def _unused(self, topic: NonPersistentTopic) -> None:
        if self.topics.get(topic.name) is topic:
            del self.topics[topic.name]
            log.info("unloaded non-persistent topic %s", topic.name)

    def list_topics(self, namespace: str) -> list[str]:
        """The namespace's loaded non-persistent topics, sorted (Pulsar lists the
        non-persistent topics its brokers have loaded)."""
        return sorted(
            t.name for t in self.topics.values() if t.topic_name.namespace_name == namespace
        )

    async def delete_topic(self, name: TopicName, force: bool) -> None:
        """Unload a topic, disconnecting its clients with ``force``.

        Raises:
            TopicNotFound: it is not loaded.
            NotAllowedError: it has producers or consumers and ``force`` is false.
        """
        topic = self.topics.get(name.full)
        if topic is None:
            raise TopicNotFound(f"Topic {name.full} not found")
        if not force and (topic.producers or topic.consumer_count()):
            raise NotAllowedError("Topic has active producers/subscriptions")
        await topic.close()

    def refresh_rates(self, elapsed_s: float) -> None:
        for topic in list(self.topics.values()):
            topic.refresh_rates(elapsed_s)

    async def close(self) -> None:
        for topic in list(self.topics.values()):
            await topic.close()
        self.topics.clear()
