"""``/admin/v2/persistent/...``: what an operator does to one topic and its
subscriptions: skip, clear-backlog, reset-cursor, last message id, unload, terminate.

A request naming a partitioned topic applies to each of its partitions where Pulsar
does so (skip, clear-backlog, reset-cursor by time, unload); the operations that name
one message (reset to a message id, last message id, terminate) are refused on it with
405, as Pulsar refuses them (``terminate/partitions`` terminates every partition).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from quasar.admin.access import TENANT_ADMIN, TOPIC_CONSUME, access
from quasar.admin.http import (
    broker_of,
    json_response,
    no_content,
    read_json,
    topic_param,
)
from quasar.admin.topic_ops_api import ops_broker, partitions_holding, targets
from quasar.errors import (
    BadRequestError,
    InvalidResourceError,
    NotAllowedError,
    PreconditionFailedError,
)
from quasar.protocol.int64 import INT64_MAX

routes = web.RouteTableDef()

TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
SUBSCRIPTION = TOPIC + "/subscription/{subscription}"

# JSON field names of Pulsar's ResetCursorData (Lombok names the boolean
# ``isExcluded`` property ``excluded``; both spellings are sent by some client).
_RESET_FIELDS = frozenset(
    {"ledgerId", "entryId", "partitionIndex", "batchIndex", "excluded", "isExcluded",
     "properties"}
)


def int_param(request: web.Request, name: str, minimum: int = 0) -> int:
    """A 64-bit integer path segment.

    Raises:
        BadRequestError: not an integer (400).
        PreconditionFailedError: below ``minimum`` (412).
    """
    text = request.match_info[name]
    digits = text[1:] if text.startswith("-") else text
    if not digits.isdigit() or len(digits) > 19 or int(digits) > INT64_MAX:
        raise BadRequestError(f"{name} must be a 64-bit integer")
    value = int(text)
    if value < minimum:
        raise PreconditionFailedError(f"{name} must be at least {minimum}")
    return value


def subscription_param(request: web.Request) -> str:
    name = request.match_info["subscription"]
    if not name.strip():
        raise InvalidResourceError("Subscription name is not valid")
    return name


async def _subscription_targets(request: web.Request) -> tuple[list[str], str]:
    """The topics a subscription operation applies to, and the subscription."""
    topic = topic_param(request)
    subscription = subscription_param(request)
    partitions = targets(broker_of(request), topic)
    if partitions is None:
        return [topic], subscription
    return await partitions_holding(ops_broker(request), partitions, subscription), subscription


def _not_on_partitioned(request: web.Request, topic: str, what: str) -> None:
    if targets(broker_of(request), topic) is not None:
        raise NotAllowedError(f"{what} is not allowed for partitioned-topic")


@routes.post(SUBSCRIPTION + "/skip/{numMessages}")
@access(TOPIC_CONSUME)
async def skip_messages(request: web.Request) -> web.Response:
    count = int_param(request, "numMessages")
    topics, subscription = await _subscription_targets(request)
    broker = ops_broker(request)
    for topic in topics:
        await broker.skip_messages(topic, subscription, count)
    return no_content()


@routes.post(SUBSCRIPTION + "/skip_all")
@access(TOPIC_CONSUME)
async def clear_backlog(request: web.Request) -> web.Response:
    topics, subscription = await _subscription_targets(request)
    broker = ops_broker(request)
    for topic in topics:
        await broker.clear_backlog(topic, subscription)
    return no_content()


@routes.post(SUBSCRIPTION + "/resetcursor/{timestamp}")
@access(TOPIC_CONSUME)
async def reset_cursor_to_time(request: web.Request) -> web.Response:
    timestamp = int_param(request, "timestamp")
    topics, subscription = await _subscription_targets(request)
    broker = ops_broker(request)
    for topic in topics:
        await broker.reset_cursor_to_time(topic, subscription, timestamp)
    return no_content()


def reset_target(body: Any) -> tuple[str, bool]:
    """``(message id, excluded)`` from a reset-cursor body: Pulsar's ResetCursorData
    ``{ledgerId, entryId, partitionIndex, batchIndex, excluded}``, or "earliest" /
    "latest".

    Raises:
        BadRequestError: any other body.
    """
    if isinstance(body, str) and body.strip().lower() in ("earliest", "latest"):
        return body.strip().lower(), False
    if not isinstance(body, dict) or not body.keys() <= _RESET_FIELDS:
        raise BadRequestError(
            "The body must be ResetCursorData {ledgerId, entryId, partitionIndex, "
            "batchIndex, excluded}, 'earliest' or 'latest'"
        )
    ledger, entry = body.get("ledgerId"), body.get("entryId")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (ledger, entry)):
        raise BadRequestError("ResetCursorData needs integer ledgerId and entryId")
    assert isinstance(ledger, int) and isinstance(entry, int)
    excluded = body.get("excluded", body.get("isExcluded", False))
    if not isinstance(excluded, bool):
        raise BadRequestError("ResetCursorData's excluded must be a boolean")
    if ledger == entry == INT64_MAX:
        return "latest", False
    if ledger == entry == -1:
        return "earliest", False
    if not (0 <= ledger <= INT64_MAX and 0 <= entry <= INT64_MAX):
        raise PreconditionFailedError(
            f"Unable to find position for position specified: {ledger}:{entry}"
        )
    return f"{ledger}:{entry}", excluded


@routes.post(SUBSCRIPTION + "/resetcursor")
@access(TOPIC_CONSUME)
async def reset_cursor_to_position(request: web.Request) -> web.Response:
    topic = topic_param(request)
    subscription = subscription_param(request)
    message_id, excluded = reset_target(await read_json(request, required=True))
    _not_on_partitioned(request, topic, "Reset-cursor at position")
    await ops_broker(request).reset_cursor_to_position(
        topic, subscription, message_id, excluded
    )
    return no_content()


@routes.get(TOPIC + "/lastMessageId")
@access(TOPIC_CONSUME)
async def last_message_id(request: web.Request) -> web.Response:
    topic = topic_param(request)
    _not_on_partitioned(request, topic, "Get the last message id")
    return json_response(await ops_broker(request).last_message_id(topic))


@routes.get(TOPIC + "/messageid/{timestamp}")
@access(TOPIC_CONSUME)
async def message_id_by_time(request: web.Request) -> web.Response:
    topic = topic_param(request)
    timestamp = int_param(request, "timestamp")
    _not_on_partitioned(request, topic, "Get message ID by timestamp")
    return json_response(await ops_broker(request).message_id_by_time(topic, timestamp))


@routes.put(TOPIC + "/unload")
@access(TENANT_ADMIN)
async def unload_topic(request: web.Request) -> web.Response:
    topic = topic_param(request)
    partitions = targets(broker_of(request), topic)
    broker = ops_broker(request)
    for target in [topic] if partitions is None else partitions:
        await broker.unload_topic(target)
    return no_content()


@routes.post(TOPIC + "/terminate")
@access(TENANT_ADMIN)
async def terminate_topic(request: web.Request) -> web.Response:
    topic = topic_param(request)
    _not_on_partitioned(request, topic, "Termination of a partitioned topic")
    return json_response(await ops_broker(request).terminate_topic(topic))


@routes.post(TOPIC + "/terminate/partitions")
@access(TENANT_ADMIN)
async def terminate_partitions(request: web.Request) -> web.Response:
    """Terminate every partition; answer ``{partition index: MessageId}``."""
    topic = topic_param(request)
    partitions = targets(broker_of(request), topic)
    if partitions is None:
        raise NotAllowedError("Termination of a non-partitioned topic is not allowed")
    broker = ops_broker(request)
    answer: dict[str, Any] = {}
    for partition in partitions:
        index = partition.rsplit("-", 1)[1]
        answer[index] = await broker.terminate_topic(partition)
    return json_response(answer)
