"""What the per-topic operations need from the broker: the ``TopicOpsBroker`` protocol.

Kept beside ``AdminBroker`` (``quasar.admin.api``) rather than in it, so the operations
an operator runs on one topic (skip, clear-backlog, reset-cursor, peek, unload,
terminate) read as one piece. The broker core's ``AdminAdapter`` implements both;
``ops_broker`` gives a route the broker under this protocol.

The conventions are ``AdminBroker``'s: topic arguments name a non-partitioned topic or
one partition (the route modules fan a partitioned topic out to its partitions), and
errors are ``QuasarError`` subclasses whose ``http_status`` becomes the answer's.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, cast

from aiohttp import web

from quasar.admin.api import AdminBroker
from quasar.admin.http import broker_of
from quasar.errors import SubscriptionNotFound, TopicNotFound
from quasar.protocol.topic_name import PARTITION_SUFFIX

__all__ = ["Message", "TopicOpsBroker", "ops_broker", "partitions_holding", "targets"]


class Message(NamedTuple):
    """A stored message as the admin API answers it: headers and payload."""

    headers: dict[str, str]
    payload: bytes


class TopicOpsBroker(Protocol):
    """The broker as the per-topic operations see it."""

    def topic_exists(self, topic: str) -> bool: ...

    async def list_subscriptions(self, topic: str) -> list[str]: ...

    async def skip_messages(self, topic: str, subscription: str, count: int) -> int:
        """Acknowledge the next ``count`` unacknowledged entries; return how many.

        Raises:
            TopicNotFound, SubscriptionNotFound.
        """
        ...

    async def clear_backlog(self, topic: str, subscription: str) -> None:
        """Acknowledge every readable entry. Raises: TopicNotFound, SubscriptionNotFound."""
        ...

    async def reset_cursor_to_time(
        self, topic: str, subscription: str, timestamp_ms: int
    ) -> None:
        """Restart delivery at the first message published at or after the time;
        consumers are disconnected and reconnect.

        Raises:
            TopicNotFound, SubscriptionNotFound.
        """
        ...

    async def reset_cursor_to_position(
        self, topic: str, subscription: str, message_id: str, excluded: bool
    ) -> None:
        """Restart delivery at ``message_id`` ("earliest", "latest" or
        "ledger:entry"; with ``excluded`` at the entry after it).

        Raises:
            TopicNotFound, SubscriptionNotFound.
            PreconditionFailedError: no such entry.
        """
        ...

    async def peek_message(self, topic: str, subscription: str, n: int) -> Message:
        """The ``n``-th (1-based) unacknowledged entry, not consumed.

        Raises:
            TopicNotFound, SubscriptionNotFound.
            ResourceNotFoundError: the backlog is shorter.
        """
        ...

    async def examine_message(self, topic: str, initial: str, n: int) -> Message:
        """The ``n``-th entry from the ``initial`` end ("earliest" or "latest").

        Raises:
            TopicNotFound. PreconditionFailedError: the topic holds no entry.
        """
        ...

    async def get_message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> Message:
        """Raises: TopicNotFound. ResourceNotFoundError: no such entry."""
        ...

    async def last_message_id(self, topic: str) -> dict[str, Any]:
        """Pulsar's MessageId JSON of the last readable message (entry -1 if none).

        Raises:
            TopicNotFound.
        """
        ...

    async def message_id_by_time(self, topic: str, timestamp_ms: int) -> dict[str, Any]:
        """MessageId JSON of the first message published at or after the time.

        Raises:
            TopicNotFound. ResourceNotFoundError: none is.
        """
        ...

    async def unload_topic(self, topic: str) -> None:
        """Close the topic if loaded; its clients reconnect. Raises: TopicNotFound."""
        ...

    async def terminate_topic(self, topic: str) -> dict[str, Any]:
        """Refuse further publishing for ever; return the last message id's JSON.

        Raises:
            TopicNotFound.
        """
        ...


def ops_broker(request: web.Request) -> TopicOpsBroker:
    """The app's broker as a ``TopicOpsBroker`` (the broker core implements both)."""
    return cast(TopicOpsBroker, broker_of(request))


def targets(broker: AdminBroker, topic: str) -> list[str] | None:
    """The existing partitions of a partitioned topic; None for any other topic.

    Partitions no client has used yet do not exist and hold nothing to operate on.
    """
    metadata = broker.resources.partitioned_topics.get(topic)
    if metadata is None:
        return None
    names = (f"{topic}{PARTITION_SUFFIX}{i}" for i in range(metadata.partitions))
    return [name for name in names if broker.topic_exists(name)]


async def partitions_holding(
    broker: TopicOpsBroker, partitions: list[str], subscription: str
) -> list[str]:
    """The partitions that have ``subscription``.

    Raises:
        SubscriptionNotFound: none has it.
    """
    holders = []
    for partition in partitions:
        try:
            if subscription in await broker.list_subscriptions(partition):
                holders.append(partition)
        except TopicNotFound:
            continue
    if not holders:
        raise SubscriptionNotFound("Subscription not found")
    return holders
