"""``/admin/v2/persistent``: topics, partitioned topics, stats and subscriptions.

Partitioned topics are resolved here: a request naming a partitioned topic's parent
(``.../subscriptions``, ``.../subscription/{sub}``) is fanned out to its partitions,
so the broker only ever deals with real topics (see ``AdminBroker``).
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from quasar.admin.access import (
    TENANT_ADMIN,
    TOPIC_CONSUME,
    TOPIC_LOOKUP,
    access,
    namespace_grant,
)
from quasar.admin.api import EARLIEST, LATEST, AdminBroker
from quasar.admin.http import (
    broker_of,
    existing_namespace,
    json_response,
    no_content,
    query_bool,
    read_json,
    topic_param,
)
from quasar.admin.listing import json_list_response, namespace_topics
from quasar.auth.authorization import CONSUME
from quasar.errors import (
    REFUSED_PARTITIONS,
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    InvalidResourceError,
    ResourceNotFoundError,
    SubscriptionNotFound,
    TopicNotFound,
    tag_refusal,
)
from quasar.protocol.int64 import INT64_MAX
from quasar.protocol.namespace_name import parse_topic
from quasar.protocol.topic_name import PARTITION_SUFFIX
from quasar.resources.partitions import JAVA_INT_MAX

routes = web.RouteTableDef()

NS = "/admin/v2/persistent/{tenant}/{namespace}"
TOPIC = NS + "/{topic}"

# Java's Long.MAX_VALUE pair and (-1, -1) are how Pulsar's MessageId.latest and
# MessageId.earliest serialise when a Java admin client sends them as JSON.
_POSITION = re.compile(r"(\d+):(\d+)")


@routes.get(NS)
@access(namespace_grant(CONSUME))
async def list_topics(request: web.Request) -> web.StreamResponse:
    namespace = existing_namespace(request)
    include_system = query_bool(request, "includeSystemTopic")
    return await json_list_response(
        request, namespace_topics(broker_of(request), namespace, include_system)
    )


@routes.get(NS + "/partitioned")
@access(namespace_grant(CONSUME))
async def list_partitioned_topics(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    return json_response(
        broker_of(request).resources.partitioned_topics.list(namespace)
    )


# --------------------------------------------------------------------------------------
# Partitioned topics.


def _partition_count(broker: AdminBroker, body: Any) -> int:
    """The partition count from a request body (a JSON number; digits accepted).

    Raises:
        BadRequestError: not an integer, or not one a Java int holds (Pulsar's type).
        NotAcceptableError: below 1, or above ``maxNumPartitionsPerPartitionedTopic``.
    """
    if isinstance(body, str) and body.strip().isdigit() and len(body.strip()) <= 12:
        body = int(body)
    if isinstance(body, bool) or not isinstance(body, int):
        raise BadRequestError("The body must be the number of partitions")
    if not -JAVA_INT_MAX - 1 <= body <= JAVA_INT_MAX:
        # Not echoed: the body may be thousands of digits long.
        raise tag_refusal(
            BadRequestError("The number of partitions must be a 32-bit integer"),
            REFUSED_PARTITIONS,
        )
    broker.resources.partitioned_topics.check_partitions(body)
    return body


@routes.put(TOPIC + "/partitions")
@access(TENANT_ADMIN)
async def create_partitioned_topic(request: web.Request) -> web.Response:
    topic = topic_param(request)
    if PARTITION_SUFFIX in parse_topic(topic).local_name:
        raise InvalidResourceError(
            f"Partitioned topic name must not contain '{PARTITION_SUFFIX}'"
        )
    broker = broker_of(request)
    partitions = _partition_count(broker, await read_json(request, required=True))
    if broker.resources.partitioned_topics.exists(topic):
        raise AlreadyExistsError("This topic already exists")
    prefix = topic + PARTITION_SUFFIX
    namespace = parse_topic(topic).namespace_name
    if any(t == topic or t.startswith(prefix) for t in broker.list_topics(namespace)):
        raise AlreadyExistsError("This topic already exists")
    await broker.create_partitioned_topic(topic, partitions)
    return no_content()


@routes.get(TOPIC + "/partitions")
@access(TOPIC_LOOKUP)
async def get_partitioned_metadata(request: web.Request) -> web.Response:
    topic = topic_param(request)
    if query_bool(request, "checkAllowAutoCreation"):
        # The pulsar client's HTTP lookup asks this way: auto-create the partitioned
        # topic as the binary PARTITIONED_METADATA would.
        broker_of(request).auto_create_partitioned(topic)
    metadata = broker_of(request).resources.partitioned_topics.get(topic)
    # Pulsar answers {"partitions": 0} for anything that is not a partitioned topic.
    return json_response({"partitions": 0} if metadata is None else metadata.to_json())


@routes.post(TOPIC + "/partitions")
@access(TENANT_ADMIN)
async def update_partitioned_topic(request: web.Request) -> web.Response:
    topic = topic_param(request)
    broker = broker_of(request)
    partitions = _partition_count(broker, await read_json(request, required=True))
    metadata = broker.resources.partitioned_topics.get(topic)
    if metadata is None:
        if broker.topic_exists(topic):
            raise ConflictError("Topic is not partitioned topic")
        raise ResourceNotFoundError("Partitioned topic does not exist")
    if partitions <= metadata.partitions:
        raise ConflictError(
            f"Number of partitions must be more than the existing {metadata.partitions}"
        )
    await broker.update_partitioned_topic(topic, partitions)
    return no_content()


@routes.delete(TOPIC + "/partitions")
@access(TENANT_ADMIN)
async def delete_partitioned_topic(request: web.Request) -> web.Response:
    topic = topic_param(request)
    broker = broker_of(request)
    if not broker.resources.partitioned_topics.exists(topic):
        raise ResourceNotFoundError("Partitioned topic does not exist")
    await broker.delete_partitioned_topic(topic, query_bool(request, "force"))
    return no_content()


@routes.get(TOPIC + "/partitioned-stats")
@access(TOPIC_LOOKUP)
async def partitioned_stats(request: web.Request) -> web.Response:
    topic = topic_param(request)
    broker = broker_of(request)
    if not broker.resources.partitioned_topics.exists(topic):
        raise ResourceNotFoundError("Partitioned topic does not exist")
    stats = await broker.partitioned_stats(topic)
    if not query_bool(request, "perPartition", default=True):
        stats = {**stats, "partitions": {}}
    return json_response(stats)


# --------------------------------------------------------------------------------------
# Non-partitioned topics.


@routes.put(TOPIC)
@access(TENANT_ADMIN)
async def create_topic(request: web.Request) -> web.Response:
    topic = topic_param(request)
    broker = broker_of(request)
    partitioned = broker.resources.partitioned_topics
    parts = parse_topic(topic)
    if partitioned.exists(topic):
        raise AlreadyExistsError("This topic already exists")
    if parts.partition_index >= 0 and partitioned.exists(parts.base.full):
        raise ConflictError(
            f"{topic} would be a partition of partitioned topic {parts.base.full}"
        )
    if broker.topic_exists(topic):
        raise AlreadyExistsError("This topic already exists")
    await broker.create_non_partitioned_topic(topic)
    return no_content()


@routes.delete(TOPIC)
@access(TENANT_ADMIN)
async def delete_topic(request: web.Request) -> web.Response:
    topic = topic_param(request)
    broker = broker_of(request)
    if broker.resources.partitioned_topics.exists(topic):
        raise ConflictError(
            f"{topic} is a partitioned topic; delete it with DELETE .../partitions"
        )
    await broker.delete_topic(topic, query_bool(request, "force"))
    return no_content()


@routes.get(TOPIC + "/stats")
@access(TOPIC_LOOKUP)
async def topic_stats(request: web.Request) -> web.Response:
    topic = topic_param(request)
    return json_response(await broker_of(request).topic_stats(topic))


@routes.get(TOPIC + "/internalStats")
@access(TOPIC_LOOKUP)
async def topic_internal_stats(request: web.Request) -> web.Response:
    topic = topic_param(request)
    return json_response(await broker_of(request).topic_internal_stats(topic))


# --------------------------------------------------------------------------------------
# Subscriptions.


def _targets(broker: AdminBroker, topic: str) -> list[str]:
    """The real topics behind ``topic``: its partitions, or itself."""
    metadata = broker.resources.partitioned_topics.get(topic)
    if metadata is None:
        return [topic]
    return [f"{topic}{PARTITION_SUFFIX}{i}" for i in range(metadata.partitions)]


async def _subscriptions(broker: AdminBroker, topic: str, partitioned: bool) -> set[str]:
    # A partition the broker has not created yet (lazy creation) has no
    # subscriptions; a missing non-partitioned topic is a 404.
    try:
        return set(await broker.list_subscriptions(topic))
    except TopicNotFound:
        if partitioned:
            return set()
        raise


def _message_id(body: Any) -> str:
    """Where a new subscription starts, from the PUT body (default: latest).

    Accepted: nothing, ``"latest"``, ``"earliest"``, ``"ledgerId:entryId"``, or a
    MessageId object ``{"ledgerId": .., "entryId": ..}`` as Pulsar's clients send.
    """
    if body is None:
        return LATEST
    if isinstance(body, str):
        text = body.strip().lower()
        if text in (LATEST, EARLIEST):
            return text
        match = _POSITION.fullmatch(text)
        if match:
            return f"{int(match.group(1))}:{int(match.group(2))}"
    elif isinstance(body, dict):
        ledger, entry = body.get("ledgerId"), body.get("entryId")
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (ledger, entry)):
            assert isinstance(ledger, int) and isinstance(entry, int)
            if ledger == entry == INT64_MAX:
                return LATEST
            if ledger == entry == -1:
                return EARLIEST
            if ledger >= 0 and entry >= 0:
                return f"{ledger}:{entry}"
    raise BadRequestError(
        "The body must be 'latest', 'earliest', 'ledgerId:entryId' or a MessageId object"
    )


def _subscription_param(request: web.Request) -> str:
    name = request.match_info["subscription"]
    if not name.strip():
        raise InvalidResourceError("Subscription name is not valid")
    return name


@routes.get(TOPIC + "/subscriptions")
@access(TOPIC_CONSUME)
async def list_subscriptions(request: web.Request) -> web.Response:
    topic = topic_param(request)
    broker = broker_of(request)
    targets = _targets(broker, topic)
    names: set[str] = set()
    for target in targets:
        names |= await _subscriptions(broker, target, partitioned=target != topic)
    return json_response(sorted(names))


@routes.put(TOPIC + "/subscription/{subscription}")
@access(TOPIC_CONSUME)
async def create_subscription(request: web.Request) -> web.Response:
    topic = topic_param(request)
    subscription = _subscription_param(request)
    message_id = _message_id(await read_json(request, required=False))
    broker = broker_of(request)
    targets = _targets(broker, topic)
    for target in targets:
        if subscription in await _subscriptions(broker, target, partitioned=target != topic):
            raise AlreadyExistsError("Subscription already exists for topic")
    for target in targets:
        await broker.create_subscription(target, subscription, message_id)
    return no_content()


@routes.delete(TOPIC + "/subscription/{subscription}")
@access(TOPIC_CONSUME)
async def delete_subscription(request: web.Request) -> web.Response:
    topic = topic_param(request)
    subscription = _subscription_param(request)
    force = query_bool(request, "force")
    broker = broker_of(request)
    targets = _targets(broker, topic)
    if targets == [topic]:
        await broker.delete_subscription(topic, subscription, force)
        return no_content()
    holders = [t for t in targets if subscription in await _subscriptions(broker, t, True)]
    if not holders:
        raise SubscriptionNotFound("Subscription not found")
    for target in holders:
        await broker.delete_subscription(target, subscription, force)
    return no_content()


# --------------------------------------------------------------------------------------
# Compaction.


@routes.put(TOPIC + "/compaction")
@access(TENANT_ADMIN)
async def trigger_compaction(request: web.Request) -> web.Response:
    """Start a compaction (of every partition, for a partitioned topic's name)."""
    topic = topic_param(request)
    broker = broker_of(request)
    targets = _targets(broker, topic)
    if targets != [topic]:
        # Pulsar triggers every partition; partitions not created yet have no data.
        targets = [t for t in targets if broker.topic_exists(t)]
    for target in targets:
        await broker.trigger_compaction(target)
    return no_content()


@routes.get(TOPIC + "/compaction")
@access(TENANT_ADMIN)
async def compaction_status(request: web.Request) -> web.Response:
    topic = topic_param(request)
    return json_response(await broker_of(request).compaction_status(topic))
