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
from quasar.admin.http import broker_of, json_response, namespace_param
from quasar.auth import AuthorizationService
from quasar.errors import REFUSED_TOPIC_NAME, InvalidTopicName, tag_refusal
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
    return json_response(broker_of(request).lookup_topic(topic.full, listener.strip()))
