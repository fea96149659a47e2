"""The loaded topics of a member's bundles: their load, and closing them when the
member stops serving those bundles."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator

from quasar.broker.service import BrokerService
from quasar.errors import QuasarError
from quasar.protocol.topic_name import TopicName
from quasar.resources.bundles import BundleRange, BundlesData, bundle_of

from .coordinator_topics import placement_of

__all__ = ["OwnedBundle", "TopicLoad", "bundle_key", "close_topics", "loaded_topics"]

log = logging.getLogger(__name__)

OwnedBundle = tuple[str, BundleRange]  # (tenant/namespace, bundle)
# Sessions (producers and consumers), messages and bytes in plus out per second.
TopicLoad = tuple[int, float, float]


def bundle_key(namespace: str, bundle: BundleRange) -> str:
    return f"{namespace}/{bundle.name}"


def loaded_topics(
    service: BrokerService,
    owned: set[OwnedBundle],
    bundles: Callable[[str], BundlesData],
) -> Iterator[tuple[OwnedBundle, TopicName, TopicLoad]]:
    """Each loaded topic of a bundle in ``owned``: its bundle, its name and its load.
    ``bundles`` gives a namespace's bundles; each namespace's are read once per pass."""
    namespaces: dict[str, BundlesData | None] = {}

    def owned_bundle(name: TopicName) -> OwnedBundle | None:
        placed = placement_of(name)
        ns = placed.namespace_name
        if ns not in namespaces:
            try:
                namespaces[ns] = bundles(ns)
            except QuasarError:  # deleted meanwhile: its topics are closing
                namespaces[ns] = None
        found = namespaces[ns]
        if found is None:
            return None
        bundle = (ns, bundle_of(found, placed.full))
        return bundle if bundle in owned else None

    for topic in list(service.topics.values()):
        bundle = owned_bundle(topic.topic_name)
        if bundle is not None:
            yield bundle, topic.topic_name, (
                len(topic.producers) + topic.consumer_count(),
                topic.rate_in.msg_rate + topic.rate_out.msg_rate,
                topic.rate_in.byte_rate + topic.rate_out.byte_rate,
            )
    for np_topic in list(service.non_persistent.topics.values()):
        bundle = owned_bundle(np_topic.topic_name)
        if bundle is not None:
            yield bundle, np_topic.topic_name, (
                len(np_topic.producers) + np_topic.consumer_count(),
                np_topic.rate_in.msg_rate,
                np_topic.rate_in.byte_rate,
            )


async def close_topics(
    service: BrokerService,
    wanted: set[OwnedBundle],
    bundle_of_topic: Callable[[TopicName], OwnedBundle],
    closing_listeners: Iterable[Callable[[set[OwnedBundle]], Awaitable[None]]],
) -> None:
    """Close every loaded topic of the bundles ``wanted`` (and any whose namespace
    is gone), after telling ``closing_listeners``."""
    for listener in closing_listeners:
        try:
            await listener(wanted)
        except Exception:
            log.exception("error stopping what the closing bundles hold")
    for np_topic in list(service.non_persistent.topics.values()):
        try:
            mine = bundle_of_topic(np_topic.topic_name) in wanted
        except QuasarError:
            mine = True
        if mine:
            await np_topic.close()
    for full in _topics_of(service, wanted, bundle_of_topic):
        topic = service.topics.get(full)
        if topic is None:
            continue
        # Closed before it leaves the table, as a namespace unload does: a client
        # reconnecting meanwhile is refused instead of loading a second copy.
        try:
            await topic.close()
        except Exception:
            log.exception("error closing %s", full)
        if service.topics.get(full) is topic:
            del service.topics[full]


def _topics_of(
    service: BrokerService,
    wanted: set[OwnedBundle],
    bundle_of_topic: Callable[[TopicName], OwnedBundle],
) -> list[str]:
    out = []
    for full, topic in list(service.topics.items()):
        try:
            if bundle_of_topic(topic.topic_name) in wanted:
                out.append(full)
        except QuasarError:  # namespace deleted meanwhile: close it too
            out.append(full)
    return out
