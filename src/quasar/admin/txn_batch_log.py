"""PIP-160 admin: switch batched transaction-log writes and read their status.

::

    POST /admin/v3/transactions/txnTcBatchLog?enable=true|false          -> 204
    GET  /admin/v3/transactions/txnTcBatchLogStat
         {"txnTcBatchLogEnabled": true, "coodinatorArray": [{"0": true}, ...]}
    POST /admin/v3/transactions/txnPendingAckBatchLog?enable=true|false  -> 204
    GET  /admin/v3/transactions/txnPendingAckBatchLogStat
         {"txnPendingAckBatchLogEnabled": true,
          "subscriptionArray": [{"my-topic-my-sub": true}, ...]}

``enable`` may also come as a JSON body (``true`` or ``{"enable": true}``). The
answers keep PIP-160's field names, the ``coodinatorArray`` spelling included, so
tools written against the proposal read them. The arrays list the coordinators and
subscriptions whose log is open now (empty right after a restart, until transactions
touch them). A change lasts until the broker restarts; the configuration keys
``transactionLogBatchedWriteEnabled`` and ``transactionPendingAckBatchedWriteEnabled``
decide the state at start.
"""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web

from quasar.admin.access import SUPERUSER, access
from quasar.admin.http import broker_of, json_response, no_content, read_json
from quasar.errors import BadRequestError, NotAllowedError
from quasar.transaction.batched_log import BatchedLogControl

routes = web.RouteTableDef()

BASE = "/admin/v3/transactions"


class _BatchedLogs(Protocol):
    coordinator: BatchedLogControl
    pending_ack: BatchedLogControl


def _controls(request: web.Request) -> _BatchedLogs:
    logs: _BatchedLogs | None = getattr(broker_of(request), "transaction_batched_logs", None)
    if logs is None:
        raise NotAllowedError("Transactions are not enabled on this broker")
    return logs


async def _enable_flag(request: web.Request) -> bool:
    value: Any = request.query.get("enable")
    if value is None:
        body = await read_json(request, required=False)
        value = body.get("enable") if isinstance(body, dict) else body
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise BadRequestError("Parameter enable must be true or false")


def _status_array(control: BatchedLogControl) -> list[dict[str, bool]]:
    return [{name: enabled} for name, enabled in control.status()]


@routes.post(f"{BASE}/txnTcBatchLog")
@access(SUPERUSER)
async def set_tc_batch_log(request: web.Request) -> web.Response:
    enable = await _enable_flag(request)
    _controls(request).coordinator.set_enabled(enable)
    return no_content()


@routes.get(f"{BASE}/txnTcBatchLogStat")
@access(SUPERUSER)
async def get_tc_batch_log_stat(request: web.Request) -> web.Response:
    control = _controls(request).coordinator
    return json_response(
        {"txnTcBatchLogEnabled": control.enabled, "coodinatorArray": _status_array(control)}
    )


@routes.post(f"{BASE}/txnPendingAckBatchLog")
@access(SUPERUSER)
async def set_pending_ack_batch_log(request: web.Request) -> web.Response:
    enable = await _enable_flag(request)
    _controls(request).pending_ack.set_enabled(enable)
    return no_content()


@routes.get(f"{BASE}/txnPendingAckBatchLogStat")
@access(SUPERUSER)
async def get_pending_ack_batch_log_stat(request: web.Request) -> web.Response:
    control = _controls(request).pending_ack
    return json_response(
        {
            "txnPendingAckBatchLogEnabled": control.enabled,
            "subscriptionArray": _status_array(control),
        }
    )
