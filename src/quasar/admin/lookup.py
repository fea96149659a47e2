"""``/lookup/v2/topic``: topic lookup over HTTP, for clients given an ``http://``
service URL.

Such a client (the pulsar client's ``HTTPLookupService``) asks this route where a
topic lives, then opens a binary connection to the ``brokerUrl`` (``brokerUrlTls``
over TLS) of the answer. It also reads partitioned metadata from
``GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions`` and a
namespace's topics from ``GET /admin/v2/namespaces/{tenant}/{namespace}/topics``,
which the admin API serves anyway.

The answer is the broker's ``LookupData`` for the listener named by the
``listenerName`` query parameter, or the ``X-Pulsar-ListenerName`` header when the
parameter is absent, as Pulsar reads them (``quasar.broker.lookup_data``). A
standalone broker owns every topic, so there is never a redirect and
``authoritative`` changes nothing. The caller needs the topic's lookup right
(produce or consume), as for the binary LOOKUP.
"""

from __future__ import annotations

from aiohttp import web

from quasar.admin.access import access
from quasar.admin.cluster import CLUSTER_KEY
from quasar.admin.http import broker_of, json_response, namespace_param
from quasar.auth import AuthorizationService
from quasar.errors import (
    REFUSED_TOPIC_NAME,
    InvalidTopicName,
    ResourceNotFoundError,
    ServiceNotReady,
    tag_refusal,
)
from quasar.protocol.namespace_name import parse_topic
from quasar.protocol.topic_name import TopicName

__all__ = ["LISTENER_NAME_HEADER", "LOOKUP", "routes"]

routes = web.RouteTableDef()

LOOKUP = "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}"
# Pulsar's header for the listener, read when the query parameter is absent.
LISTENER_NAME_HEADER = "X-Pulsar-ListenerName"


def _topic_name(request: web.Request) -> TopicName:
    """The topic named by the path.

    Raises:
        InvalidTopicName, InvalidResourceError: invalid name (412, tagged as a
            refusal of hostile input).
    """
    info = request.match_info
    namespace = namespace_param(request)
    try:
        return parse_topic(f"{info['domain']}://{namespace}/{info['topic']}")
    except InvalidTopicName as e:
        tag_refusal(e, REFUSED_TOPIC_NAME)
        raise


def _may_look_up(
    request: web.Request, authorization: AuthorizationService, role: str | None
) -> bool:
    return authorization.can_lookup(_topic_name(request), role)


@routes.get(LOOKUP)
@access(_may_look_up)
async def lookup_topic(request: web.Request) -> web.Response:
    listener = (
        request.query.get("listenerName") or request.headers.get(LISTENER_NAME_HEADER) or ""
    )
    topic = _topic_name(request)
    member = request.app.get(CLUSTER_KEY)
    if member is None:
        return json_response(broker_of(request).lookup_topic(topic.full, listener.strip()))
    # A cluster member answers for the topics it owns and redirects (307, with
    # authoritative=true) to the owner or the load manager's choice otherwise.
    if not broker_of(request).resources.namespaces.exists(topic.namespace_name):
        raise ResourceNotFoundError(f"Namespace {topic.namespace_name} does not exist")
    authoritative = request.query.get("authoritative", "false").lower() == "true"
    answer = member.lookup(topic, authoritative, listener.strip())
    if not answer.redirect:
        return json_response(answer.data.to_json())
    target = answer.data.http_url_tls if request.secure else answer.data.http_url
    target = target or answer.data.http_url or answer.data.http_url_tls
    if target is None:
        raise ServiceNotReady(f"the owner of {topic.full} has no web service URL")
    location = target.rstrip("/") + str(request.rel_url.update_query(authoritative="true"))
    raise web.HTTPTemporaryRedirect(location)
