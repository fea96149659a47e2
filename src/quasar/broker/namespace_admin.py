"""Namespace operations and message expiry as the admin API asks for them
(``quasar.admin.policy_api.PolicyOperations``)."""

from __future__ import annotations

from quasar.errors import (
    NotAllowedError,
    PreconditionFailedError,
    SubscriptionNotFound,
    TopicNotFound,
)
from quasar.protocol import TopicName
from quasar.protocol.topic_name import is_system_topic
from quasar.storage.api import Position

from .message_expiry import expire_by_age, expire_to_position
from .service import BrokerService
from .topic import PersistentTopic

__all__ = ["NamespaceAdmin"]


class NamespaceAdmin:
    def __init__(self, service: BrokerService) -> None:
        self.service = service

    async def _topics_named(self, topic: str) -> list[PersistentTopic]:
        """The topic, or the existing partitions of a partitioned topic.

        Raises:
            TopicNotFound: neither exists.
        """
        name = TopicName.parse(topic)
        service = self.service
        if not name.is_partition and service.partitions_of(name) > 0:
            return [
                await service.get_topic(p, create=False)
                for p in await service.partitions_in_use(name)
            ]
        if not service.topic_exists(name):
            raise TopicNotFound(f"Topic {topic} not found")
        return [await service.get_topic(name, create=False)]

    async def _namespace_topics(self, namespace: str) -> list[PersistentTopic]:
        """Every existing user topic of the namespace, loaded."""
        out = []
        for full in self.service.registered_topics(namespace):
            name = TopicName.parse(full)
            if is_system_topic(name):
                continue
            out.append(await self.service.get_topic(name, create=False))
        return out

    # -- message expiry -----------------------------------------------------------------
    async def expire_messages(
        self, topic: str, subscription: str | None, age_s: int
    ) -> None:
        now = self.service.clock.wall_ms()
        topics = await self._topics_named(topic)
        if subscription is not None and not any(
            subscription in t.subscriptions for t in topics
        ):
            raise SubscriptionNotFound("Subscription not found")
        for t in topics:
            subs = (
                list(t.subscriptions.values())
                if subscription is None
                else [s for s in [t.subscriptions.get(subscription)] if s is not None]
            )
            for sub in subs:
                await expire_by_age(t, sub, age_s, now)

    async def expire_messages_to(
        self, topic: str, subscription: str, ledger_id: int, entry_id: int, excluded: bool
    ) -> None:
        name = TopicName.parse(topic)
        if not name.is_partition and self.service.partitions_of(name) > 0:
            raise NotAllowedError(
                "Expire message at position is not supported for partitioned-topic"
            )
        (t,) = await self._topics_named(topic)
        sub = t.subscriptions.get(subscription)
        if sub is None:
            raise SubscriptionNotFound("Subscription not found")
        expire_to_position(t, sub, Position(ledger_id, entry_id), excluded)

    # -- namespace operations -------------------------------------------------------------
    async def unload_namespace(self, namespace: str) -> None:
        service = self.service
        loaded = [
            n for n, t in service.topics.items()
            if t.topic_name.namespace_name == namespace
        ]
        for full in loaded:
            topic = service.topics.get(full)
            if topic is None:
                continue
            # Closed before it leaves the table: a client reconnecting meanwhile is
            # told the topic is closing and retries, instead of loading a second
            # copy over the same ledger.
            await topic.close()
            if service.topics.get(full) is topic:
                del service.topics[full]

    async def clear_namespace_backlog(
        self, namespace: str, subscription: str | None
    ) -> None:
        for t in await self._namespace_topics(namespace):
            for sub in list(t.subscriptions.values()):
                if subscription is None or sub.name == subscription:
                    sub.expire_up_to(t.max_read_position, expired=False)

    async def unsubscribe_namespace(self, namespace: str, subscription: str) -> None:
        topics = [
            t for t in await self._namespace_topics(namespace)
            if subscription in t.subscriptions
        ]
        for t in topics:
            if t.subscriptions[subscription].consumers:
                raise PreconditionFailedError(
                    f"Subscription {subscription} has active connected consumers "
                    f"on {t.name}"
                )
        for t in topics:
            if subscription in t.subscriptions:
                t.delete_subscription(subscription)
