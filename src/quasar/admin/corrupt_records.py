"""Unreadable records in the broker's own logs: see them, and set them aside.

::

    GET  /admin/v3/transactions/coordinatorStats[?coordinatorId=N]
         {"state": "Ready", "leastSigBits": 41, "lowWaterMark": 40, "ongoingTxnSize": 1,
          "recoverStartTime": 1700000000000, "recoverEndTime": 1700000000042}
         (without coordinatorId: {"0": {...}, "1": {...}}); a coordinator whose log
         has an unreadable record is in state "Error" with
         "lastError": {"message", "log", "position", "timestamp"}
    POST /admin/v3/transactions/coordinators/{coordinatorId}/skipCorruptRecord?position=L:E
    POST /admin/v3/transactions/pendingAck/{tenant}/{namespace}/{topic}/{subName}/skipCorruptRecord?position=L:E
         {"log": ..., "position": "L:E", "size": 12,
          "savedTo": "<dataDir>/corrupt-records/...bin", "state": {...}}

``coordinatorStats`` keeps Pulsar's path and field names, the recovery times (wall ms)
included; quasar adds ``lastError``. An unknown coordinator id is 404. The two ``skipCorruptRecord`` actions are quasar's
own: the position must be the one the error names (``ledger:entry``), and only an
entry the broker cannot read is accepted (412 otherwise). What setting a record aside
costs is in ``docs/operations.md``. All three are for super-users only: they show or
change every transaction's state.
"""

from __future__ import annotations

from aiohttp import web

from quasar.admin.access import SUPERUSER, access
from quasar.admin.http import broker_of, json_response
from quasar.admin.txn_cluster_views import cluster_coordinator_stats
from quasar.admin.txn_gather import coordinator_owners
from quasar.errors import BadRequestError

routes = web.RouteTableDef()

BASE = "/admin/v3/transactions"


def _coordinator_id(text: str) -> int:
    if not text.isdigit() or len(text) > 9:
        raise BadRequestError(f"coordinatorId {text!r} is not a coordinator id")
    return int(text)


def _position(request: web.Request) -> str:
    position = request.query.get("position")
    if not position:
        raise BadRequestError("position=ledger:entry is required (the one the error names)")
    return position


@routes.get(BASE + "/coordinatorStats")
@access(SUPERUSER)
async def coordinator_stats(request: web.Request) -> web.Response:
    raw = request.query.get("coordinatorId")
    tc_id = None if raw is None else _coordinator_id(raw)
    owners = coordinator_owners(request)
    if owners is not None and tc_id is None:
        # A cluster member: every coordinator's stats, from each one's owner.
        return json_response(await cluster_coordinator_stats(request, owners))
    return json_response(await broker_of(request).coordinator_stats(tc_id))


@routes.post(BASE + "/coordinators/{coordinatorId}/skipCorruptRecord")
@access(SUPERUSER)
async def skip_coordinator_record(request: web.Request) -> web.Response:
    tc_id = _coordinator_id(request.match_info["coordinatorId"])
    return json_response(
        await broker_of(request).skip_coordinator_record(tc_id, _position(request))
    )


@routes.post(BASE + "/pendingAck/{tenant}/{namespace}/{topic}/{subName}/skipCorruptRecord")
@access(SUPERUSER)
async def skip_pending_ack_record(request: web.Request) -> web.Response:
    m = request.match_info
    topic = f"persistent://{m['tenant']}/{m['namespace']}/{m['topic']}"
    return json_response(
        await broker_of(request).skip_pending_ack_record(
            topic, m["subName"], _position(request)
        )
    )
