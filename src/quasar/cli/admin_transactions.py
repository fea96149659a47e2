"""``quasar admin transactions``: transaction admin commands (``/admin/v3/transactions``).

::

    quasar admin transactions set-txn-tc-batch-log --enable true|false
    quasar admin transactions get-txn-tc-batch-log-stat
    quasar admin transactions set-txn-pending-ack-batch-log --enable true|false
    quasar admin transactions get-txn-pending-ack-batch-log-stat
    quasar admin transactions client-transactions CLIENT_NAME
"""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from quasar.client.admin import AdminClient

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
