"""What the namespace-policy and message-expiry routes need of the broker.

``AdminBroker.policy_operations`` implements it. Topic arguments are full names; a
partitioned topic's parent name stands for its partitions that exist. Errors are
``QuasarError`` subclasses whose ``http_status`` becomes the answer's status.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["PolicyOperations"]


class PolicyOperations(Protocol):
    async def expire_messages(
        self, topic: str, subscription: str | None, age_s: int
    ) -> None:
        """Expire messages older than ``age_s`` seconds on one subscription, or on
        every subscription when ``subscription`` is None.

        Raises:
            TopicNotFound, SubscriptionNotFound.
        """
        ...

    async def expire_messages_to(
        self, topic: str, subscription: str, ledger_id: int, entry_id: int, excluded: bool
    ) -> None:
        """Expire the subscription's messages up to ``ledger_id:entry_id`` (before it
        when ``excluded``).

        Raises:
            TopicNotFound, SubscriptionNotFound.
            NotAllowedError (405): ``topic`` is a partitioned topic's parent.
        """
        ...

    async def unload_namespace(self, namespace: str) -> None:
        """Close the namespace's loaded topics; their clients reconnect and the topics
        load again with the namespace's current policies."""
        ...

    async def clear_namespace_backlog(
        self, namespace: str, subscription: str | None
    ) -> None:
        """Mark every message of every topic of the namespace consumed, on all
        subscriptions or on ``subscription`` only."""
        ...

    async def unsubscribe_namespace(self, namespace: str, subscription: str) -> None:
        """Delete ``subscription`` from every topic of the namespace.

        Raises:
            PreconditionFailedError: consumers are connected to it somewhere (nothing
                is deleted then).
        """
        ...
