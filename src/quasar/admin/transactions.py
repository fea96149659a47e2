"""PIP-255 admin: a client name's transactions, to find what a crashed client left.

::

    GET /admin/v3/transactions/clientTransactions/{clientName}
        {"clientName": "etl-7",
         "open": [{"txnId": "(1,5)", "mostSigBits": 1, "leastSigBits": 5,
                   "coordinatorId": 1, "status": "OPEN",
                   "openTimestamp": 1700000000000, "timeoutAt": 1700000060000}],
         "terminated": [{"txnId": "(1,4)", "mostSigBits": 1, "leastSigBits": 4,
                         "coordinatorId": 1, "status": "COMMITTED",
                         "endTime": 1700000001000}],
         "unavailableCoordinators": []}

``?coordinatorId=n`` limits the answer to coordinator ``n``. On a cluster member the
coordinators another member hosts are asked of that member (``quasar.admin.cluster``).
``open`` lists the client's live transactions on every coordinator (status OPEN,
COMMITTING or ABORTING), in id order; ``terminated`` the outcomes the coordinators'
preservers still hold (COMMITTED or ABORTED; the last ``transactionMetaPersistCount``
per coordinator, for ``transactionMetaPersistTimeInHour``), by end time. A coordinator
that cannot be loaded is named in ``unavailableCoordinators`` and the answer is then
partial. 503 when transactions are disabled. The client name is the path segment,
percent-decoded.

Pulsar's transaction admin routes (X = ``{tenant}/{namespace}/{topic}``), for
super-users only as in Pulsar; shapes in ``docs/admin.md``::

    GET  /admin/v3/transactions/coordinators
    GET  /admin/v3/transactions/coordinatorInternalStats/{coordinatorId}?metadata=
    GET  /admin/v3/transactions/transactionMetadata/{mostSigBits}/{leastSigBits}
    GET  /admin/v3/transactions/slowTransactions/{timeoutMs}?coordinatorId=
    POST /admin/v3/transactions/abortTransaction/{mostSigBits}/{leastSigBits}     -> 204
    GET  /admin/v3/transactions/transactionBufferStats/X?lowWaterMarks=&segmentStats=
    GET  /admin/v3/transactions/transactionInBufferStats/X/{mostSigBits}/{leastSigBits}
    GET  /admin/v3/transactions/pendingAckStats/X/{subName}?lowWaterMarks=
    GET  /admin/v3/transactions/transactionInPendingAckStats/X/{subName}/{m}/{l}
    GET  /admin/v3/transactions/pendingAckInternalStats/X/{subName}?metadata=
    GET  /admin/v3/transactions/positionStatsInPendingAck/X/{subName}/{ledgerId}/{entryId}
         ?batchIndex=

All answer 503 when transactions are disabled; 404 for an unknown coordinator,
namespace, topic, subscription or transaction; 400 for a malformed id, number or
non-persistent topic; 412 for an invalid topic name. ``coordinatorStats`` is in
``quasar.admin.corrupt_records``.
"""

from __future__ import annotations

from aiohttp import web

from quasar.admin.access import AUTHENTICATED, SUPERUSER, access
from quasar.admin.authentication import request_role
from quasar.admin.cluster import CLUSTER_KEY, gather_client_transactions
from quasar.admin.http import (
    authorization_of,
    broker_of,
    json_response,
    no_content,
    query_bool,
    topic_param,
)
from quasar.admin.txn_api import TransactionAdminApi
from quasar.admin.txn_params import (
    coordinator_id_query,
    int_param,
    optional_int_query,
    txn_id_param,
)
from quasar.errors import REFUSED_CLIENT_NAME, BadRequestError, tag_refusal
from quasar.storage.api import Position

routes = web.RouteTableDef()

BASE = "/admin/v3/transactions"
TOPIC = "{tenant}/{namespace}/{topic}"
INT32_MAX = 2**31 - 1

# As the coordinator accepts on NEW_TXN/END_TXN (CLIENT_NAME_LENGTH_MAX).
_CLIENT_NAME_LENGTH_MAX = 1024


@routes.get(BASE + "/clientTransactions/{clientName}")
@access(AUTHENTICATED)
async def client_transactions(request: web.Request) -> web.Response:
    name = request.match_info["clientName"]
    if not name.strip():
        raise BadRequestError("clientName must not be blank")
    if len(name) > _CLIENT_NAME_LENGTH_MAX:
        raise tag_refusal(
            BadRequestError(f"clientName longer than {_CLIENT_NAME_LENGTH_MAX} characters"),
            REFUSED_CLIENT_NAME,
        )
    # Only the transactions the caller's role may act on (all of them for a
    # super-user, and for everyone while authorization is off).
    role = request_role(request)
    superuser = authorization_of(request).is_superuser(role)
    coordinator_id = coordinator_id_query(request)
    answer = await broker_of(request).client_transactions(
        name, role=role, superuser=superuser, coordinator_id=coordinator_id
    )
    member = request.app.get(CLUSTER_KEY)
    if member is not None:
        answer = await gather_client_transactions(request, member, answer, coordinator_id)
    return json_response(answer)


def _txn_admin(request: web.Request) -> TransactionAdminApi:
    """The broker's transaction admin; 503 when transactions are disabled."""
    txn_admin = broker_of(request).transaction_admin
    txn_admin.check_enabled()
    return txn_admin


@routes.get(BASE + "/coordinators")
@access(SUPERUSER)
async def coordinators(request: web.Request) -> web.Response:
    return json_response(await _txn_admin(request).coordinators())


@routes.get(BASE + "/coordinatorInternalStats/{coordinatorId}")
@access(SUPERUSER)
async def coordinator_internal_stats(request: web.Request) -> web.Response:
    txn_admin = _txn_admin(request)
    tc_id = int_param(request, "coordinatorId", 0, INT32_MAX)
    return json_response(
        await txn_admin.coordinator_internal_stats(
            tc_id, query_bool(request, "metadata")
        )
    )


@routes.get(BASE + "/transactionMetadata/{mostSigBits}/{leastSigBits}")
@access(SUPERUSER)
async def transaction_metadata(request: web.Request) -> web.Response:
    return json_response(await _txn_admin(request).transaction_metadata(txn_id_param(request)))


@routes.get(BASE + "/slowTransactions/{timeoutMs}")
@access(SUPERUSER)
async def slow_transactions(request: web.Request) -> web.Response:
    txn_admin = _txn_admin(request)
    timeout_ms = int_param(request, "timeoutMs")
    return json_response(
        await txn_admin.slow_transactions(timeout_ms, coordinator_id_query(request))
    )


@routes.post(BASE + "/abortTransaction/{mostSigBits}/{leastSigBits}")
@access(SUPERUSER)
async def abort_transaction(request: web.Request) -> web.Response:
    await _txn_admin(request).abort_transaction(txn_id_param(request))
    return no_content()


@routes.get(f"{BASE}/transactionBufferStats/{TOPIC}")
@access(SUPERUSER)
async def transaction_buffer_stats(request: web.Request) -> web.Response:
    txn_admin = _txn_admin(request)
    topic = topic_param(request)
    return json_response(
        await txn_admin.transaction_buffer_stats(
            topic, query_bool(request, "lowWaterMarks"), query_bool(request, "segmentStats")
        )
    )


@routes.get(f"{BASE}/transactionInBufferStats/{TOPIC}/{{mostSigBits}}/{{leastSigBits}}")
@access(SUPERUSER)
async def transaction_in_buffer_stats(request: web.Request) -> web.Response:
    txn_admin = _txn_admin(request)
    txn_id = txn_id_param(request)
    topic = topic_param(request)
    return json_response(await txn_admin.transaction_in_buffer_stats(topic, txn_id))


@routes.get(f"{BASE}/pendingAckStats/{TOPIC}/{{subName}}")
@access(SUPERUSER)
async def pending_ack_stats(request: web.Request) -> web.Response:
    txn_admin = _txn_admin(request)
    topic = topic_param(request)
    return json_response(
        await txn_admin.pending_ack_stats(
            topic, request.match_info["subName"], query_bool(request, "lowWaterMarks")
        )
    )


@routes.get(
    f"{BASE}/transactionInPendingAckStats/{TOPIC}/{{subName}}/{{mostSigBits}}/{{leastSigBits}}"
)
@access(SUPERUSER)
async def transaction_in_pending_ack_stats(request: web.Request) -> web.Response:
    txn_admin = _txn_admin(request)
    txn_id = txn_id_param(request)
    topic = topic_param(request)
    return json_response(
        await txn_admin.transaction_in_pending_ack_stats(
            topic, request.match_info["subName"], txn_id
        )
    )


@routes.get(f"{BASE}/pendingAckInternalStats/{TOPIC}/{{subName}}")
@access(SUPERUSER)
async def pending_ack_internal_stats(request: web.Request) -> web.Response:
    txn_admin = _txn_admin(request)
    topic = topic_param(request)
    return json_response(
        await txn_admin.pending_ack_internal_stats(
            topic, request.match_info["subName"], query_bool(request, "metadata")
        )
    )


@routes.get(f"{BASE}/positionStatsInPendingAck/{TOPIC}/{{subName}}/{{ledgerId}}/{{entryId}}")
@access(SUPERUSER)
async def position_stats_in_pending_ack(request: web.Request) -> web.Response:
    txn_admin = _txn_admin(request)
    # Negative ids are accepted: Pulsar answers them with the InvalidPosition state.
    position = Position(
        int_param(request, "ledgerId", -1, 2**63 - 1),
        int_param(request, "entryId", -1, 2**63 - 1),
    )
    batch_index = optional_int_query(request, "batchIndex", -1, INT32_MAX)
    topic = topic_param(request)
    return json_response(
        await txn_admin.position_stats_in_pending_ack(
            topic, request.match_info["subName"], position, batch_index
        )
    )
