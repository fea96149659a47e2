"""Which coordinator or topic a ``/admin/v3/transactions`` request is about.

A cluster member serves such a request only where that coordinator or topic lives,
as Pulsar's ``TransactionsBase`` validates ownership before it answers:

* a route about one coordinator names it in its path (``coordinatorInternalStats/
  {id}``, ``coordinators/{id}/skipCorruptRecord``), in ``coordinatorId``
  (``coordinatorStats``, ``slowTransactions``, ``clientTransactions``), or as a
  transaction's most significant bits (``transactionMetadata``,
  ``abortTransaction``): it is served by the owner of partition ``id`` of
  ``transaction_coordinator_assign``;
* a route about a topic's transaction buffer or a subscription's pending acks
  (``.../{tenant}/{namespace}/{topic}/...``) is served by the topic's owner.

The routes over every coordinator (no id) and the batched-log switches are answered
by the member asked. A malformed or unknown id is left to the route's handler, which
answers 400 or 404 as it does on one broker.
"""

from __future__ import annotations

import re

from aiohttp import web

from quasar.admin.http import broker_of
from quasar.cluster.coordinator_topics import assign_partition
from quasar.errors import QuasarError
from quasar.protocol.namespace_name import PERSISTENT, parse_topic
from quasar.protocol.topic_name import TopicName
from quasar.transaction.coordinator_registry import TRANSACTION_COORDINATOR_ASSIGN

__all__ = ["coordinator_count", "transaction_route_topic"]

BASE = "/admin/v3/transactions"

# Declared route path -> the path parameter naming the coordinator.
_COORDINATOR_IN_PATH = {
    f"{BASE}/coordinatorInternalStats/{{coordinatorId}}": "coordinatorId",
    f"{BASE}/coordinators/{{coordinatorId}}/skipCorruptRecord": "coordinatorId",
    f"{BASE}/transactionMetadata/{{mostSigBits}}/{{leastSigBits}}": "mostSigBits",
    f"{BASE}/abortTransaction/{{mostSigBits}}/{{leastSigBits}}": "mostSigBits",
}
# Declared route paths about one coordinator when ``coordinatorId`` is given.
_COORDINATOR_IN_QUERY = frozenset({
    f"{BASE}/coordinatorStats",
    f"{BASE}/slowTransactions/{{timeoutMs}}",
    f"{BASE}/clientTransactions/{{clientName}}",
})
_TOPIC_ROUTE = re.compile(
    rf"^{re.escape(BASE)}/[A-Za-z]+/\{{tenant\}}/\{{namespace\}}/\{{topic\}}(/.*)?$"
)
# A coordinator id as the handlers accept one (decimal digits; at most an int64's
# count, so a huge string is refused before it is converted).
_COORDINATOR_ID = re.compile(r"[0-9]{1,19}")


def coordinator_count(request: web.Request) -> int:
    """The coordinators of the cluster: the partitions of the assign topic (0 when
    it was never created)."""
    found = broker_of(request).resources.partitioned_topics.get(
        TRANSACTION_COORDINATOR_ASSIGN
    )
    return 0 if found is None else found.partitions


def _coordinator_id(request: web.Request, canonical: str) -> int | None:
    param = _COORDINATOR_IN_PATH.get(canonical)
    if param is not None:
        raw: str | None = request.match_info.get(param)
    elif canonical in _COORDINATOR_IN_QUERY:
        raw = request.query.get("coordinatorId")
    else:
        return None
    if raw is None or not _COORDINATOR_ID.fullmatch(raw):
        return None
    tc_id = int(raw)
    return tc_id if tc_id < coordinator_count(request) else None


def transaction_route_topic(request: web.Request, canonical: str) -> TopicName | None:
    """The topic whose owner serves this request, if it is a transaction route
    about one coordinator (its assign partition) or one topic; ``None`` when the
    member asked answers it (every other route, transactions disabled, a name or id
    the handler refuses)."""
    if not canonical.startswith(BASE + "/"):
        return None
    try:
        broker_of(request).transaction_admin.check_enabled()
    except QuasarError:
        return None  # the handler's 503
    tc_id = _coordinator_id(request, canonical)
    if tc_id is not None:
        return assign_partition(tc_id)
    if _TOPIC_ROUTE.match(canonical) is None:
        return None
    info = request.match_info
    try:
        return parse_topic(
            f"{PERSISTENT}://{info['tenant']}/{info['namespace']}/{info['topic']}"
        )
    except QuasarError:
        return None  # the handler's 412
