"""``quasar admin transactions``: transaction admin commands (``/admin/v3/transactions``).

::

    quasar admin transactions set-txn-tc-batch-log --enable true|false
    quasar admin transactions get-txn-tc-batch-log-stat
    quasar admin transactions set-txn-pending-ack-batch-log --enable true|false
    quasar admin transactions get-txn-pending-ack-batch-log-stat
    quasar admin transactions client-transactions CLIENT_NAME
    quasar admin transactions coordinator-stats [--coordinator-id N]
    quasar admin transactions skip-corrupt-coordinator-record --coordinator-id N --position L:E
    quasar admin transactions skip-corrupt-pending-ack-record TOPIC SUBSCRIPTION --position L:E
"""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from quasar.client.admin import AdminClient
from quasar.protocol.topic_name import TopicName

BASE = "/admin/v3/transactions"


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError("expected true or false")
    return value == "true"


async def set_tc_batch_log(client: AdminClient, enable: bool) -> Any:
    return await client.request("POST", f"{BASE}/txnTcBatchLog?enable={str(enable).lower()}")


async def get_tc_batch_log_stat(client: AdminClient) -> Any:
    return await client.request("GET", f"{BASE}/txnTcBatchLogStat")


async def set_pending_ack_batch_log(client: AdminClient, enable: bool) -> Any:
    return await client.request("POST", f"{BASE}/txnPendingAckBatchLog?enable={str(enable).lower()}")


async def get_pending_ack_batch_log_stat(client: AdminClient) -> Any:
    return await client.request("GET", f"{BASE}/txnPendingAckBatchLogStat")


async def client_transactions(client: AdminClient, client_name: str) -> Any:
    return await client.request("GET", f"{BASE}/clientTransactions/{quote(client_name, safe='')}")


async def coordinator_stats(client: AdminClient, tc_id: int | None) -> Any:
    query = "" if tc_id is None else f"?coordinatorId={tc_id}"
    return await client.request("GET", f"{BASE}/coordinatorStats{query}")


async def skip_coordinator_record(client: AdminClient, tc_id: int, position: str) -> Any:
    return await client.request(
        "POST", f"{BASE}/coordinators/{tc_id}/skipCorruptRecord?position={quote(position)}"
    )


async def skip_pending_ack_record(
    client: AdminClient, topic: str, subscription: str, position: str
) -> Any:
    name = TopicName.parse(topic)
    if name.domain != "persistent":
        raise ValueError(f"{topic} is not a persistent topic")
    path = "/".join(
        quote(part, safe="")
        for part in (name.tenant, name.namespace, name.local_name, subscription)
    )
    return await client.request(
        "POST", f"{BASE}/pendingAck/{path}/skipCorruptRecord?position={quote(position)}"
    )


def add_transactions_group(groups: Any) -> None:
    """Register the ``transactions`` group on ``quasar admin``'s subparsers."""
    parser = groups.add_parser("transactions", help="transactions (PIP-160, PIP-255)")
    cmds = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run: Any, help: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = cmds.add_parser(name, help=help)
        p.set_defaults(admin_command=run)
        return p

    p = command(
        "set-txn-tc-batch-log",
        lambda c, a: set_tc_batch_log(c, a.enable),
        "switch batched writes of the coordinator logs",
    )
    p.add_argument("--enable", type=_bool, required=True, metavar="true|false")
    command(
        "get-txn-tc-batch-log-stat",
        lambda c, a: get_tc_batch_log_stat(c),
        "whether coordinator logs batch their writes",
    )
    p = command(
        "set-txn-pending-ack-batch-log",
        lambda c, a: set_pending_ack_batch_log(c, a.enable),
        "switch batched writes of the pending-ack logs",
    )
    p.add_argument("--enable", type=_bool, required=True, metavar="true|false")
    command(
        "get-txn-pending-ack-batch-log-stat",
        lambda c, a: get_pending_ack_batch_log_stat(c),
        "whether pending-ack logs batch their writes",
    )
    p = command(
        "client-transactions",
        lambda c, a: client_transactions(c, a.client_name),
        "recently ended transactions of one client name (PIP-255)",
    )
    p.add_argument("client_name", metavar="CLIENT_NAME")
    p = command(
        "coordinator-stats",
        lambda c, a: coordinator_stats(c, a.coordinator_id),
        "state of the transaction coordinators (lastError when one failed to load)",
    )
    p.add_argument("--coordinator-id", type=int, default=None, metavar="N")
    p = command(
        "skip-corrupt-coordinator-record",
        lambda c, a: skip_coordinator_record(c, a.coordinator_id, a.position),
        "set an unreadable coordinator-log entry aside and reload the coordinator",
    )
    p.add_argument("--coordinator-id", type=int, required=True, metavar="N")
    p.add_argument("--position", required=True, metavar="LEDGER:ENTRY")
    p = command(
        "skip-corrupt-pending-ack-record",
        lambda c, a: skip_pending_ack_record(c, a.topic, a.subscription, a.position),
        "set an unreadable pending-ack-log entry aside and reload the subscription's acks",
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("subscription", metavar="SUBSCRIPTION")
    p.add_argument("--position", required=True, metavar="LEDGER:ENTRY")
