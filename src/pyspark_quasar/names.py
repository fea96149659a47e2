"""Topic and partition names (no I/O, no imports beyond the standard library)."""

from __future__ import annotations

import re

_PARTITION = re.compile(r"^(.*)-partition-(\d+)$")


def partition_index(topic: str) -> int:
    """``N`` of ``...-partition-N``; -1 for a non-partitioned topic."""
    m = _PARTITION.match(topic)
    return int(m.group(2)) if m else -1


def base_topic(topic: str) -> str:
    m = _PARTITION.match(topic)
    return m.group(1) if m else topic


def full_topic_name(topic: str) -> str:
    """``persistent://tenant/ns/name`` for ``name`` or ``tenant/ns/name`` too."""
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3:
        return f"persistent://{topic}"
    raise ValueError(f"not a topic name: {topic!r}")
