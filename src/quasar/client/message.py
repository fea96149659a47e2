"""Received messages, with the accessors of ``pulsar.Message``."""

from __future__ import annotations

from typing import Any

from quasar.client.message_id import MessageId
from quasar.client.schema import Schema


class Message:
    """One message as the application sees it (a batch member or a whole entry)."""

    __slots__ = (
        "_data",
        "_message_id",
        "_properties",
        "_partition_key",
        "_ordering_key",
        "_publish_time",
        "_event_time",
        "_topic",
        "_redelivery_count",
        "_schema",
        "_schema_version",
        "_producer_name",
        "_null_value",
        "_consumer",
    )

    def __init__(
        self,
        data: bytes,
        message_id: MessageId,
        *,
        properties: dict[str, str] | None = None,
        partition_key: str = "",
        ordering_key: bytes = b"",
        publish_time: int = 0,
        event_time: int = 0,
        topic: str = "",
        redelivery_count: int = 0,
        schema: Schema | None = None,
        schema_version: bytes = b"",
        producer_name: str = "",
        null_value: bool = False,
        consumer: Any = None,
    ) -> None:
        self._data = data
        self._message_id = message_id
        self._properties = properties or {}
        self._partition_key = partition_key
        self._ordering_key = ordering_key
        self._publish_time = publish_time
        self._event_time = event_time
        self._topic = topic
        self._redelivery_count = redelivery_count
        self._schema = schema
        self._schema_version = schema_version
        self._producer_name = producer_name
        self._null_value = null_value
        # The (child) consumer that received it: acks are routed back through it.
        self._consumer = consumer

    @classmethod
    def plain(
        cls,
        data: bytes,
        message_id: MessageId,
        publish_time: int,
        topic: str,
        redelivery_count: int,
        schema: Schema | None,
        schema_version: bytes,
        producer_name: str,
        consumer: Any,
    ) -> Message:
        """A message without properties, keys or event time (the common batch member):
        the same object ``Message(...)`` builds, without keyword-argument handling."""
        m = cls.__new__(cls)
        m._data = data
        m._message_id = message_id
        m._properties = {}
        m._partition_key = ""
        m._ordering_key = b""
        m._publish_time = publish_time
        m._event_time = 0
        m._topic = topic
        m._redelivery_count = redelivery_count
        m._schema = schema
        m._schema_version = schema_version
        m._producer_name = producer_name
        m._null_value = False
        m._consumer = consumer
        return m

    def data(self) -> bytes:
        """The raw payload."""
        return self._data

    def value(self) -> Any:
        """The payload decoded by the consumer's schema (bytes without one).

        Raises:
            ValueError / TypeError: the payload does not match the schema.
        """
        if self._null_value:
            return None
        if self._schema is None:
            return self._data
        return self._schema.decode(self._data)

    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    def partition_key(self) -> str:
        return self._partition_key

    def ordering_key(self) -> str:
        return self._ordering_key.decode("utf-8", "replace")

    def publish_timestamp(self) -> int:
        """Publish time in ms since the epoch (producer's clock)."""
        return self._publish_time

    def event_timestamp(self) -> int:
        """Event time in ms, 0 when the producer set none."""
        return self._event_time

    def message_id(self) -> MessageId:
        return self._message_id

    def topic_name(self) -> str:
        return self._topic

    def redelivery_count(self) -> int:
        return self._redelivery_count

    def schema_version(self) -> bytes:
        return self._schema_version

    def producer_name(self) -> str:
        return self._producer_name

    def has_null_value(self) -> bool:
        return self._null_value

    def __repr__(self) -> str:
        return f"Message(id={self._message_id}, topic={self._topic!r}, len={len(self._data)})"
