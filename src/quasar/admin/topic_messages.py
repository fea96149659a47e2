"""``/admin/v2/persistent/...``: reading single messages without consuming them:
peek (the n-th message a subscription has still to receive), examine (the n-th from
either end of the topic) and get-by-id.

The answer's body is the message's uncompressed payload and its metadata travels in
Pulsar's ``X-Pulsar-*`` headers (``quasar.broker.message_peek``). All three read one
entry of one topic, so a partitioned topic's name is refused with 405 (as Pulsar
refuses it): name a partition.
"""

from __future__ import annotations

from aiohttp import web

from quasar.admin.access import TOPIC_CONSUME, access
from quasar.admin.http import broker_of, topic_param
from quasar.admin.topic_ops import SUBSCRIPTION, TOPIC, int_param, subscription_param
from quasar.admin.topic_ops_api import Message, ops_broker, targets
from quasar.errors import BadRequestError, NotAllowedError, PreconditionFailedError

routes = web.RouteTableDef()

INITIAL_POSITIONS = ("earliest", "latest")


def _message_response(message: Message) -> web.Response:
    return web.Response(
        body=message.payload,
        headers=message.headers,
        content_type="application/octet-stream",
    )


def _single_topic(request: web.Request, what: str) -> str:
    topic = topic_param(request)
    if targets(broker_of(request), topic) is not None:
        raise NotAllowedError(f"{what} on a partitioned topic is not allowed")
    return topic


@routes.get(SUBSCRIPTION + "/position/{messagePosition}")
@access(TOPIC_CONSUME)
async def peek_nth_message(request: web.Request) -> web.Response:
    topic = _single_topic(request, "Peek messages")
    subscription = subscription_param(request)
    n = int_param(request, "messagePosition", minimum=1)
    return _message_response(await ops_broker(request).peek_message(topic, subscription, n))


@routes.get(TOPIC + "/examinemessage")
@access(TOPIC_CONSUME)
async def examine_message(request: web.Request) -> web.Response:
    topic = _single_topic(request, "Examine messages")
    initial = request.query.get("initialPosition", "latest").strip().lower()
    if initial not in INITIAL_POSITIONS:
        raise BadRequestError("initialPosition must be 'earliest' or 'latest'")
    text = request.query.get("messagePosition", "1").strip()
    if not text.isdigit() or len(text) > 19:
        raise BadRequestError("messagePosition must be a positive integer")
    n = int(text)
    if n < 1:
        raise PreconditionFailedError("Invalid position: messagePosition must be at least 1")
    return _message_response(await ops_broker(request).examine_message(topic, initial, n))


@routes.get(TOPIC + "/ledger/{ledgerId}/entry/{entryId}")
@access(TOPIC_CONSUME)
async def get_message_by_id(request: web.Request) -> web.Response:
    topic = _single_topic(request, "Get message by id")
    ledger_id = int_param(request, "ledgerId")
    entry_id = int_param(request, "entryId")
    return _message_response(
        await ops_broker(request).get_message_by_id(topic, ledger_id, entry_id)
    )
