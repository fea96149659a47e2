"""A topic's epoch of exclusive producer access, kept across restarts.

Every grant of exclusive access moves the topic epoch (``producer_access.py``), and a
producer that comes back with an older epoch than the topic's is fenced. Were the
epoch lost on a restart, a fenced producer reconnecting first would win the topic
back from the one that fenced it; so, as Pulsar keeps it in the managed ledger's
properties, quasar records it in the metadata store under
``/topic-epochs/<persistence name>`` (value: the epoch in decimal) before the grant
is answered, reads it when the topic loads, and forgets it with the topic.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

from quasar.errors import NotFound
from quasar.protocol.topic_name import TopicName
from quasar.storage.api import MetadataStore

__all__ = ["epoch_saver", "forget_topic_epoch", "load_topic_epoch"]

EPOCH_ROOT = "/topic-epochs"


def _path(name: TopicName) -> str:
    return f"{EPOCH_ROOT}/{quote(name.persistence_name, safe='')}"


def load_topic_epoch(store: MetadataStore, name: TopicName) -> int | None:
    """The topic's recorded epoch (None: exclusive access was never granted)."""
    found = store.get(_path(name))
    return None if found is None else int(found.value)


def epoch_saver(store: MetadataStore, name: TopicName) -> Callable[[int], None]:
    """A function recording the topic's new epoch (durable when it returns).

    It raises the store's ``StorageError`` when the write fails, which fails the
    grant it was for."""

    def save(epoch: int) -> None:
        store.put(_path(name), str(epoch).encode())

    return save


def forget_topic_epoch(store: MetadataStore, name: TopicName) -> None:
    """Drop the record with the topic (a topic created again under the name is new)."""
    try:
        store.delete(_path(name))
    except NotFound:
        pass
