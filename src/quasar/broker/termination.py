"""Topic termination: a topic that accepts no more messages, for ever.

Terminating a topic (Pulsar's ``POST .../terminate``) records it in the metadata
store under ``/terminated-topics/<persistence name>`` (value: the last message's
position when it was terminated), so it survives unloads and restarts, and then:

* connected producers are closed; their clients reconnect and are refused with
  ``TopicTerminatedError``, and every later publish is refused the same way;
* consumers keep receiving what is stored; once a subscription has acknowledged
  everything, its consumers get ``REACHED_END_OF_TOPIC`` (Pulsar sends it at that
  point: when the dispatcher finds nothing more to read, and after the ack that
  emptied the backlog).

Deleting the topic forgets the record.
"""

from __future__ import annotations

from urllib.parse import quote

from quasar.errors import NotFound
from quasar.protocol.topic_name import TopicName
from quasar.storage.api import MetadataStore, Position

from .topic import PersistentTopic

__all__ = ["forget_terminated", "is_terminated", "terminate"]

TERMINATED_ROOT = "/terminated-topics"


def _path(name: TopicName) -> str:
    return f"{TERMINATED_ROOT}/{quote(name.persistence_name, safe='')}"


def is_terminated(store: MetadataStore, name: TopicName) -> bool:
    """Whether the topic was terminated (read when the topic loads)."""
    return store.get(_path(name)) is not None


def forget_terminated(store: MetadataStore, name: TopicName) -> None:
    """Drop the record with the topic (a topic created again under the name is new)."""
    try:
        store.delete(_path(name))
    except NotFound:
        pass


async def terminate(topic: PersistentTopic, store: MetadataStore) -> Position:
    """Terminate ``topic`` (idempotent); return the position of its last message.

    Publishes already appending complete (their receipts were promised); the last
    message is the last one stored when this returns.
    """
    if not topic.terminated:
        topic.terminated = True
        last, _ = await topic.last_message(read_compacted=False)
        store.put(_path(topic.topic_name), str(last).encode())
        for producer in list(topic.producers.values()):
            producer.connection.close_producer(producer.producer_id)
            topic.remove_producer(producer)
        # Subscriptions that already read (and acknowledged) everything reach the end
        # now; the others when they get there.
        topic.notify_new_entries()
        for sub in topic.subscriptions.values():
            sub.check_end_of_topic()
    last, _ = await topic.last_message(read_compacted=False)
    return last
