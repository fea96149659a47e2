"""Which partitions and subscriptions a transaction may register.

A transaction commits only once every participant it registered has ended, so a
participant its end can never reach would leave it COMMITTING for ever while the
other participants are committed already. ADD_PARTITION_TO_TXN and
ADD_SUBSCRIPTION_TO_TXN therefore refuse, before anything is registered:

* a name ``topic_of`` refuses (not a V2 name, or over ``TOPIC_NAME_BYTES_MAX``):
  ``InvalidTopicName``;
* a subscription name that is empty or over ``SUBSCRIPTION_NAME_BYTES_MAX`` bytes:
  ``InvalidTopicName`` (Pulsar's code for a bad name on a request);
* a non-persistent topic (quasar serves none) or a partitioned topic's base name (the
  partitions take the markers): ``NotAllowedError``;
* a topic in a namespace that does not exist, and for a subscription a topic that
  does not exist: ``TopicNotFound``, as PRODUCER and SUBSCRIBE answer.

Pulsar's coordinator checks none of this; its end then fails for ever on such a
participant. The name checks come first, the existence checks after authorization, so
that a role without rights learns nothing about which namespaces exist.
"""

from __future__ import annotations

from quasar.broker.service import BrokerService
from quasar.errors import NotAllowedError, TopicNotFound
from quasar.protocol import TopicName
from quasar.protocol.namespace_name import PERSISTENT

from .wire import SUBSCRIPTION_NAME_BYTES_MAX, subscription_name, topic_of

__all__ = [
    "SUBSCRIPTION_NAME_BYTES_MAX",
    "participant_name",
    "require_reachable",
    "subscription_name",
]

def participant_name(raw: str) -> TopicName:
    """The topic a transaction command names, if a transaction may take part in it.

    Raises:
        InvalidTopicName: not a valid V2 name, or too long.
        NotAllowedError: a non-persistent topic.
    """
    name = topic_of(raw)
    if name.domain != PERSISTENT:
        raise NotAllowedError(f"{name.full}: non-persistent topics cannot take part in "
                              "a transaction on quasar")
    return name


def require_reachable(service: BrokerService, name: TopicName, *, must_exist: bool) -> None:
    """Refuse a participant the end of the transaction could not reach.

    ``must_exist``: the topic itself must exist (a subscription's topic); a produced
    partition only needs its namespace, as the producer may create the topic.

    Raises:
        TopicNotFound: the namespace (or the topic, with ``must_exist``) does not exist.
        NotAllowedError: ``name`` is a partitioned topic's base name.
    """
    if name.full in service.topics:  # loaded here: it exists, in a namespace that does
        return
    if not service.namespace_exists(name.namespace_name):
        raise TopicNotFound(f"Namespace {name.namespace_name} does not exist")
    if service.partitions_of(name) > 0:
        raise NotAllowedError(f"{name.full} is a partitioned topic; add its partitions")
    if must_exist and not service.topic_exists(name):
        raise TopicNotFound(f"Topic {name.full} does not exist")
