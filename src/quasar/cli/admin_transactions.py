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

Pulsar's ``pulsar-admin transactions`` commands, with its names and flags::

    quasar admin transactions coordinator-list
    quasar admin transactions coordinator-internal-stats -c N [-m]
    quasar admin transactions transaction-metadata -m MOST -l LEAST
    quasar admin transactions slow-transactions -t 1m [-c N]
    quasar admin transactions abort-transaction -m MOST -l LEAST
    quasar admin transactions transaction-buffer-stats -t TOPIC [-l] [-s]
    quasar admin transactions transaction-in-buffer-stats -t TOPIC -m MOST -l LEAST
    quasar admin transactions pending-ack-stats -t TOPIC -s SUB [-l]
    quasar admin transactions transaction-in-pending-ack-stats -t TOPIC -s SUB -m MOST -l LEAST
    quasar admin transactions pending-ack-internal-stats -t TOPIC -s SUB [-m]
    quasar admin transactions position-stats-in-pending-ack -t TOPIC -s SUB -l LEDGER -e ENTRY [-b N]

``slow-transactions`` prints one row per transaction (id, status, open time, timeout,
age, owner, partitions) by default; ``--output json`` prints the API's answer.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any
from urllib.parse import quote

from quasar.cli.admin_commands import add_command, add_group
from quasar.cli.admin_txn_shapes import parse_duration_ms, slow_transactions_table
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


def _topic_path(topic: str, *more: str) -> str:
    """``tenant/namespace/topic[/more...]``, each segment percent-encoded.

    Raises:
        ValueError: not a persistent topic name.
    """
    name = TopicName.parse(topic)
    if name.domain != "persistent":
        raise ValueError(f"{topic} is not a persistent topic")
    parts = (name.tenant, name.namespace, name.local_name, *more)
    return "/".join(quote(part, safe="") for part in parts)


def _flags(**flags: bool) -> str:
    on = [f"{name}=true" for name, value in flags.items() if value]
    return "?" + "&".join(on) if on else ""


async def list_coordinators(client: AdminClient) -> Any:
    return await client.request("GET", f"{BASE}/coordinators")


async def coordinator_internal_stats(client: AdminClient, tc_id: int, metadata: bool) -> Any:
    return await client.request(
        "GET", f"{BASE}/coordinatorInternalStats/{tc_id}{_flags(metadata=metadata)}"
    )


async def transaction_metadata(client: AdminClient, most: int, least: int) -> Any:
    return await client.request("GET", f"{BASE}/transactionMetadata/{most}/{least}")


async def slow_transactions(client: AdminClient, timeout_ms: int, tc_id: int | None) -> Any:
    query = "" if tc_id is None else f"?coordinatorId={tc_id}"
    return await client.request("GET", f"{BASE}/slowTransactions/{timeout_ms}{query}")


async def abort_transaction(client: AdminClient, most: int, least: int) -> Any:
    return await client.request("POST", f"{BASE}/abortTransaction/{most}/{least}")


async def transaction_buffer_stats(
    client: AdminClient, topic: str, low_watermarks: bool, segment_stats: bool
) -> Any:
    flags = _flags(lowWaterMarks=low_watermarks, segmentStats=segment_stats)
    return await client.request("GET", f"{BASE}/transactionBufferStats/{_topic_path(topic)}{flags}")


async def transaction_in_buffer_stats(
    client: AdminClient, topic: str, most: int, least: int
) -> Any:
    path = _topic_path(topic, str(most), str(least))
    return await client.request("GET", f"{BASE}/transactionInBufferStats/{path}")


async def pending_ack_stats(
    client: AdminClient, topic: str, subscription: str, low_watermarks: bool
) -> Any:
    path = _topic_path(topic, subscription)
    flags = _flags(lowWaterMarks=low_watermarks)
    return await client.request("GET", f"{BASE}/pendingAckStats/{path}{flags}")


async def transaction_in_pending_ack_stats(
    client: AdminClient, topic: str, subscription: str, most: int, least: int
) -> Any:
    path = _topic_path(topic, subscription, str(most), str(least))
    return await client.request("GET", f"{BASE}/transactionInPendingAckStats/{path}")


async def pending_ack_internal_stats(
    client: AdminClient, topic: str, subscription: str, metadata: bool
) -> Any:
    path = _topic_path(topic, subscription)
    return await client.request(
        "GET", f"{BASE}/pendingAckInternalStats/{path}{_flags(metadata=metadata)}"
    )


async def position_stats_in_pending_ack(
    client: AdminClient,
    topic: str,
    subscription: str,
    ledger_id: int,
    entry_id: int,
    batch_index: int | None,
) -> Any:
    path = _topic_path(topic, subscription, str(ledger_id), str(entry_id))
    query = "" if batch_index is None else f"?batchIndex={batch_index}"
    return await client.request("GET", f"{BASE}/positionStatsInPendingAck/{path}{query}")


def _add_pulsar_commands(cmds: Any) -> None:
    """The commands of ``pulsar-admin transactions``, with its names and flags."""

    command = functools.partial(add_command, cmds)

    def txn_id(p: argparse.ArgumentParser) -> None:
        p.add_argument("-m", "--most-sig-bits", type=int, required=True, metavar="MOST")
        p.add_argument("-l", "--least-sig-bits", type=int, required=True, metavar="LEAST")

    def topic(p: argparse.ArgumentParser, subscription: bool = False) -> None:
        p.add_argument("-t", "--topic", required=True, metavar="TOPIC")
        if subscription:
            p.add_argument("-s", "--sub-name", required=True, metavar="SUBSCRIPTION")

    command(
        "coordinator-list",
        lambda c, a: list_coordinators(c),
        "the transaction coordinators and the broker serving each",
        aliases=["coordinators-list"],
    )
    p = command(
        "coordinator-internal-stats",
        lambda c, a: coordinator_internal_stats(c, a.coordinator_id, a.metadata),
        "a coordinator's log (managed ledger) internal stats",
    )
    p.add_argument("-c", "--coordinator-id", type=int, required=True, metavar="N")
    p.add_argument("-m", "--metadata", action="store_true", help="include ledger metadata")
    p = command(
        "transaction-metadata",
        lambda c, a: transaction_metadata(c, a.most_sig_bits, a.least_sig_bits),
        "one live transaction: status, times, partitions and subscriptions",
    )
    txn_id(p)
    p = command(
        "slow-transactions",
        lambda c, a: slow_transactions(c, a.time, a.coordinator_id),
        "live transactions open for longer than --time",
    )
    p.add_argument("-t", "--time", type=parse_duration_ms, required=True, metavar="DURATION",
                   help="e.g. 30s, 5m, 1h, 500ms (a bare number is seconds)")
    p.add_argument("-c", "--coordinator-id", type=int, default=None, metavar="N")
    p.set_defaults(admin_shape=slow_transactions_table)
    p = command(
        "abort-transaction",
        lambda c, a: abort_transaction(c, a.most_sig_bits, a.least_sig_bits),
        "abort a transaction (releases readers held back by it)",
    )
    txn_id(p)
    p = command(
        "transaction-buffer-stats",
        lambda c, a: transaction_buffer_stats(c, a.topic, a.low_water_mark, a.segment_stats),
        "a topic's transaction buffer: state, max read position, open transactions",
    )
    topic(p)
    p.add_argument("-l", "--low-water-mark", action="store_true", help="include low watermarks")
    p.add_argument("-s", "--segment-stats", action="store_true", help="include segment stats")
    p = command(
        "transaction-in-buffer-stats",
        lambda c, a: transaction_in_buffer_stats(c, a.topic, a.most_sig_bits, a.least_sig_bits),
        "one transaction on a topic: its first position, whether aborted",
    )
    topic(p)
    txn_id(p)
    p = command(
        "pending-ack-stats",
        lambda c, a: pending_ack_stats(c, a.topic, a.sub_name, a.low_water_mark),
        "a subscription's pending acks: state, open transactions",
    )
    topic(p, subscription=True)
    p.add_argument("-l", "--low-water-mark", action="store_true", help="include low watermarks")
    p = command(
        "transaction-in-pending-ack-stats",
        lambda c, a: transaction_in_pending_ack_stats(
            c, a.topic, a.sub_name, a.most_sig_bits, a.least_sig_bits
        ),
        "one transaction on a subscription: its cumulative ack position",
    )
    topic(p, subscription=True)
    txn_id(p)
    p = command(
        "pending-ack-internal-stats",
        lambda c, a: pending_ack_internal_stats(c, a.topic, a.sub_name, a.metadata),
        "a subscription's pending-ack log (managed ledger) internal stats",
    )
    topic(p, subscription=True)
    p.add_argument("-m", "--metadata", action="store_true", help="include ledger metadata")
    p = command(
        "position-stats-in-pending-ack",
        lambda c, a: position_stats_in_pending_ack(
            c, a.topic, a.sub_name, a.ledger_id, a.entry_id, a.batch_index
        ),
        "whether a message is held by a transaction's pending ack",
    )
    topic(p, subscription=True)
    p.add_argument("-l", "--ledger-id", type=int, required=True, metavar="LEDGER")
    p.add_argument("-e", "--entry-id", type=int, required=True, metavar="ENTRY")
    p.add_argument("-b", "--batch-index", type=int, default=None, metavar="N")


def add_transactions_group(groups: Any) -> None:
    """Register the ``transactions`` group on ``quasar admin``'s subparsers."""
    cmds = add_group(groups, "transactions", "transactions (PIP-160, PIP-255)")
    command = functools.partial(add_command, cmds)

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
    p.add_argument("-c", "--coordinator-id", type=int, default=None, metavar="N")
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
    _add_pulsar_commands(cmds)
