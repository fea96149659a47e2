"""``/admin/v2/persistent/.../expireMessages``: expire a subscription's messages now.

By age (``expireMessages/{expireTimeInSeconds}``, on one subscription or on all) or up
to a message id (a ``ResetCursorData`` body), as Pulsar's PersistentTopics. A
partitioned topic's parent name stands for its partitions, except for expiry by
position, which Pulsar refuses there (405).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from quasar.admin.access import TOPIC_CONSUME, access
from quasar.admin.http import broker_of, no_content, read_json, topic_param
from quasar.errors import BadRequestError
from quasar.protocol.int64 import INT64_MAX
from quasar.resources.models import refuse_unknown_keys

routes = web.RouteTableDef()

TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"

# Pulsar's ResetCursorData; "isExcluded" is its Java field, "excluded" its JSON name.
_RESET_CURSOR_KEYS = frozenset(
    {"ledgerId", "entryId", "partitionIndex", "batchIndex", "isExcluded", "excluded",
     "properties"}
)


def _seconds(request: web.Request) -> int:
    text = request.match_info["expireTimeInSeconds"]
    if not text.isdigit() or len(text) > 10:
        raise BadRequestError(f"Invalid expireTimeInSeconds: {text[:20]!r}")
    return int(text)


def _position(body: Any) -> tuple[int, int, bool]:
    if not isinstance(body, dict):
        raise BadRequestError("The body must be a ResetCursorData object")
    refuse_unknown_keys(body, _RESET_CURSOR_KEYS, "ResetCursorData")
    ids = []
    for key in ("ledgerId", "entryId"):
        value = body.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadRequestError(f"ResetCursorData.{key} must be an integer")
        if not -1 <= value <= INT64_MAX:
            raise BadRequestError(f"ResetCursorData.{key} is out of range")
        ids.append(value)
    excluded = body.get("excluded", body.get("isExcluded", False))
    if not isinstance(excluded, bool):
        raise BadRequestError("ResetCursorData.excluded must be true or false")
    return ids[0], ids[1], excluded


@routes.post(TOPIC + "/subscription/{subscription}/expireMessages/{expireTimeInSeconds}")
@access(TOPIC_CONSUME)
async def expire_subscription_by_age(request: web.Request) -> web.Response:
    topic = topic_param(request)
    age_s = _seconds(request)
    await broker_of(request).policy_operations.expire_messages(
        topic, request.match_info["subscription"], age_s
    )
    return no_content()


@routes.post(TOPIC + "/subscription/{subscription}/expireMessages")
@access(TOPIC_CONSUME)
async def expire_subscription_to_position(request: web.Request) -> web.Response:
    topic = topic_param(request)
    ledger_id, entry_id, excluded = _position(await read_json(request, required=True))
    await broker_of(request).policy_operations.expire_messages_to(
        topic, request.match_info["subscription"], ledger_id, entry_id, excluded
    )
    return no_content()


@routes.post(TOPIC + "/all_subscription/expireMessages/{expireTimeInSeconds}")
@access(TOPIC_CONSUME)
async def expire_all_subscriptions_by_age(request: web.Request) -> web.Response:
    topic = topic_param(request)
    age_s = _seconds(request)
    await broker_of(request).policy_operations.expire_messages(topic, None, age_s)
    return no_content()
