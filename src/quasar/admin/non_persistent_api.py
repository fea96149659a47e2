"""What the ``/admin/v2/non-persistent`` routes need from the broker."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["NonPersistentAdminApi"]


class NonPersistentAdminApi(Protocol):
    """Non-persistent topics exist while loaded; their partition counts are metadata.

    Topic arguments are full ``non-persistent://`` names.
    """

    def check_enabled(self) -> None:
        """Raises: NotAllowedError: ``enableNonPersistentTopics`` is false."""
        ...

    def list_topics(self, namespace: str) -> list[str]:
        """Loaded topics and every partition of the partitioned ones, sorted."""
        ...

    def list_partitioned_topics(self, namespace: str) -> list[str]:
        ...

    def topic_stats(self, topic: str) -> dict[str, Any]:
        """NonPersistentTopicStats. Raises: TopicNotFound: not loaded."""
        ...

    def partitioned_stats(self, topic: str) -> dict[str, Any]:
        ...

    async def delete_topic(self, topic: str, force: bool) -> None:
        """Raises: TopicNotFound; PreconditionFailedError: busy without ``force``."""
        ...

    async def delete_partitioned_topic(self, topic: str, force: bool) -> None:
        """Raises: PreconditionFailedError, ResourceNotFoundError."""
        ...
