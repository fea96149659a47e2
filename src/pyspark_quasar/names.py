"""Topic and partition names (no I/O): the protocol's ``TopicName`` rules, on strings."""

from __future__ import annotations

from quasar.protocol.topic_name import DEFAULT_NAMESPACE, DEFAULT_TENANT, TopicName


def partition_index(topic: str) -> int:
    """``N`` of ``...-partition-N``; -1 for a non-partitioned topic.

    Raises:
        InvalidTopicName: not a topic name.
    """
    return TopicName.parse(topic).partition_index


def base_topic(topic: str) -> str:
    """The full name of the partitioned topic a partition belongs to (of ``topic``
    itself, if it is not a partition).

    Raises:
        InvalidTopicName: not a topic name.
    """
    return TopicName.parse(topic).base.full


def full_topic_name(topic: str) -> str:
    """``persistent://tenant/ns/name`` for ``name`` or ``tenant/ns/name`` too.

    Works on text, not on parsed names, because ``topicsPattern`` regexes go through
    it as well.

    Raises:
        ValueError: neither form, nor a ``<domain>://`` name.
    """
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1:
        return f"persistent://{DEFAULT_TENANT}/{DEFAULT_NAMESPACE}/{topic}"
    if len(parts) == 3:
        return f"persistent://{topic}"
    raise ValueError(f"not a topic name: {topic!r}")
