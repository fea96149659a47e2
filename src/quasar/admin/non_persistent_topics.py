"""``/admin/v2/non-persistent``: listing, stats and deletion of non-persistent topics,
and their partitioned topics.

A non-persistent topic exists while it has producers or subscriptions, so the
listing names the loaded topics (and every partition of the partitioned ones, as the
persistent listing does), and stats of a topic nobody uses are 404. Access is checked
as for the same routes under ``/admin/v2/persistent``, on the non-persistent name.
"""

from __future__ import annotations

from aiohttp import web

from quasar.admin.access import TENANT_ADMIN, access, namespace_grant
from quasar.admin.http import (
    broker_of,
    existing_namespace,
    json_response,
    no_content,
    query_bool,
    read_json,
)
from quasar.admin.topics import _partition_count
from quasar.auth import AuthorizationService
from quasar.auth.authorization import CONSUME
from quasar.errors import (
    REFUSED_TOPIC_NAME,
    AlreadyExistsError,
    ConflictError,
    InvalidResourceError,
    InvalidTopicName,
    ResourceNotFoundError,
    tag_refusal,
)
from quasar.protocol.namespace_name import parse_topic
from quasar.protocol.topic_name import PARTITION_SUFFIX, TopicName

__all__ = ["routes"]

routes = web.RouteTableDef()

NON_PERSISTENT = "non-persistent"
NS = "/admin/v2/non-persistent/{tenant}/{namespace}"
TOPIC = NS + "/{topic}"


def _name(request: web.Request) -> str:
    info = request.match_info
    return f"{NON_PERSISTENT}://{info['tenant']}/{info['namespace']}/{info['topic']}"


def NP_TOPIC_LOOKUP(  # noqa: N802 - used as a constant in route declarations
    request: web.Request, authorization: AuthorizationService, role: str | None
) -> bool:
    """The lookup (produce or consume) right on the non-persistent topic."""
    return authorization.can_lookup(parse_topic(_name(request)), role)


def _topic(request: web.Request) -> str:
    """The full non-persistent topic name from the path, in an existing namespace,
    with non-persistent topics enabled.

    Raises:
        InvalidTopicName, InvalidResourceError: invalid name (412, counted).
        ResourceNotFoundError: the namespace does not exist (404).
        NotAllowedError: ``enableNonPersistentTopics`` is false.
    """
    broker_of(request).non_persistent_admin.check_enabled()
    try:
        topic = str(parse_topic(_name(request)))
    except InvalidTopicName as e:
        tag_refusal(e, REFUSED_TOPIC_NAME)
        raise
    existing_namespace(request)
    return topic


@routes.get(NS)
@access(namespace_grant(CONSUME))
async def list_topics(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    return json_response(broker_of(request).non_persistent_admin.list_topics(namespace))


@routes.get(NS + "/partitioned")
@access(namespace_grant(CONSUME))
async def list_partitioned_topics(request: web.Request) -> web.Response:
    namespace = existing_namespace(request)
    admin = broker_of(request).non_persistent_admin
    return json_response(admin.list_partitioned_topics(namespace))


@routes.put(TOPIC + "/partitions")
@access(TENANT_ADMIN)
async def create_partitioned_topic(request: web.Request) -> web.Response:
    topic = _topic(request)
    if PARTITION_SUFFIX in TopicName.parse(topic).local_name:
        raise InvalidResourceError(
            f"Partitioned topic name must not contain '{PARTITION_SUFFIX}'"
        )
    broker = broker_of(request)
    partitions = _partition_count(broker, await read_json(request, required=True))
    if broker.resources.partitioned_topics.exists(topic):
        raise AlreadyExistsError("This topic already exists")
    if topic in broker.non_persistent_admin.list_topics(TopicName.parse(topic).namespace_name):
        raise AlreadyExistsError("This topic already exists")
    broker.resources.partitioned_topics.create(topic, partitions)
    return no_content()


@routes.get(TOPIC + "/partitions")
@access(NP_TOPIC_LOOKUP)
async def get_partitioned_metadata(request: web.Request) -> web.Response:
    metadata = broker_of(request).resources.partitioned_topics.get(_topic(request))
    return json_response({"partitions": 0} if metadata is None else metadata.to_json())


@routes.delete(TOPIC + "/partitions")
@access(TENANT_ADMIN)
async def delete_partitioned_topic(request: web.Request) -> web.Response:
    topic = _topic(request)
    broker = broker_of(request)
    if not broker.resources.partitioned_topics.exists(topic):
        raise ResourceNotFoundError("Partitioned topic does not exist")
    await broker.non_persistent_admin.delete_partitioned_topic(
        topic, query_bool(request, "force")
    )
    return no_content()


@routes.get(TOPIC + "/partitioned-stats")
@access(NP_TOPIC_LOOKUP)
async def partitioned_stats(request: web.Request) -> web.Response:
    topic = _topic(request)
    broker = broker_of(request)
    if not broker.resources.partitioned_topics.exists(topic):
        raise ResourceNotFoundError("Partitioned topic does not exist")
    stats = broker.non_persistent_admin.partitioned_stats(topic)
    if not query_bool(request, "perPartition", default=True):
        stats = {**stats, "partitions": {}}
    return json_response(stats)


@routes.get(TOPIC + "/stats")
@access(NP_TOPIC_LOOKUP)
async def topic_stats(request: web.Request) -> web.Response:
    return json_response(broker_of(request).non_persistent_admin.topic_stats(_topic(request)))


@routes.delete(TOPIC)
@access(TENANT_ADMIN)
async def delete_topic(request: web.Request) -> web.Response:
    topic = _topic(request)
    broker = broker_of(request)
    if broker.resources.partitioned_topics.exists(topic):
        raise ConflictError(
            f"{topic} is a partitioned topic; delete it with DELETE .../partitions"
        )
    await broker.non_persistent_admin.delete_topic(topic, query_bool(request, "force"))
    return no_content()
