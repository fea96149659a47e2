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

``open`` lists the client's live transactions on every coordinator (status OPEN,
COMMITTING or ABORTING), in id order; ``terminated`` the outcomes the coordinators'
preservers still hold (COMMITTED or ABORTED; the last ``transactionMetaPersistCount``
per coordinator, for ``transactionMetaPersistTimeInHour``), by end time. A coordinator
that cannot be loaded is named in ``unavailableCoordinators`` and the answer is then
partial. 503 when transactions are disabled. The client name is the path segment,
percent-decoded.
"""

from __future__ import annotations

from aiohttp import web

from quasar.admin.access import AUTHENTICATED, access
from quasar.admin.authentication import request_role
from quasar.admin.http import authorization_of, broker_of, json_response
from quasar.errors import BadRequestError

routes = web.RouteTableDef()

BASE = "/admin/v3/transactions"

# As the coordinator accepts on NEW_TXN/END_TXN (CLIENT_NAME_LENGTH_MAX).
_CLIENT_NAME_LENGTH_MAX = 1024


@routes.get(BASE + "/clientTransactions/{clientName}")
@access(AUTHENTICATED)
async def client_transactions(request: web.Request) -> web.Response:
    name = request.match_info["clientName"]
    if not name.strip():
        raise BadRequestError("clientName must not be blank")
    if len(name) > _CLIENT_NAME_LENGTH_MAX:
        raise BadRequestError(f"clientName longer than {_CLIENT_NAME_LENGTH_MAX} characters")
    # Only the transactions the caller's role may act on (all of them for a
    # super-user, and for everyone while authorization is off).
    role = request_role(request)
    superuser = authorization_of(request).is_superuser(role)
    return json_response(
        await broker_of(request).client_transactions(name, role=role, superuser=superuser)
    )
