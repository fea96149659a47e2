"""``quasar admin topics ...``: per-topic operations, with ``pulsar-admin topics``'s
command and flag names::

    skip TOPIC -s SUB -n N                 clear-backlog TOPIC -s SUB
    reset-cursor TOPIC -s SUB (-t 10m | -m LEDGER:ENTRY|earliest|latest) [-e]
    peek-messages TOPIC -s SUB [-n N]      examine-message TOPIC [-i latest|earliest] [-m N]
    get-message-by-id TOPIC -l L -e E      last-message-id TOPIC
    get-message-id TOPIC -d DATETIME       unload TOPIC
    terminate TOPIC                        compact TOPIC
    compaction-status TOPIC [-w]           create-subscription TOPIC -s SUB [-m ID]
    unsubscribe TOPIC -s SUB [-f]

Messages (peek, examine, get-by-id) print as Pulsar's command line prints them: the
message id, publish time and properties, then the payload as a hex dump; a batch
prints member by member. ``--output json`` prints them as objects instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from quasar.cli.admin_commands import add_command
from quasar.client.admin import AdminClient
from quasar.errors import RemoteProtocolError
from quasar.protocol.batch import parse_batch

__all__ = ["add_topic_ops_commands", "hex_dump", "parse_relative_time_s"]

PROPERTY_PREFIX = "x-pulsar-property-"
# How often ``compaction-status -w`` asks while compaction runs.
COMPACTION_POLL_INTERVAL_S = 1.0

_RELATIVE_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_RELATIVE_TIME = re.compile(r"(\d+)([smhdwy]?)")
_MESSAGE_ID = re.compile(r"(\d+):(\d+)")


def parse_relative_time_s(text: str) -> int:
    """Seconds of a relative time as ``pulsar-admin`` writes it: ``100``, ``30s``,
    ``10m``, ``3h``, ``2d``, ``5w``, ``1y`` (no unit: seconds).

    Raises:
        argparse.ArgumentTypeError: any other text.
    """
    match = _RELATIVE_TIME.fullmatch(text.strip().lower())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a relative time such as 30s, 10m, 3h, 2d, 5w"
        )
    return int(match.group(1)) * _RELATIVE_UNITS_S[match.group(2) or "s"]


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def _non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return int(text)


def _message_id(text: str) -> str:
    value = text.strip().lower()
    if value in ("earliest", "latest") or _MESSAGE_ID.fullmatch(value):
        return value
    raise argparse.ArgumentTypeError(f"{text!r} is not ledgerId:entryId, earliest or latest")


def _datetime_ms(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 date-time (``2021-06-28T16:53:08Z``); one
    without an offset is UTC."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 date-time such as 2021-06-28T16:53:08Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


# -- messages as the command line prints them -----------------------------------------
def hex_dump(data: bytes) -> str:
    """``data`` as Pulsar's (Netty's) pretty hex dump: 16 bytes a row, with ASCII."""
    rule = "+--------+-------------------------------------------------+----------------+"
    lines = [
        "         +-------------------------------------------------+",
        "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |",
        rule,
    ]
    for offset in range(0, len(data), 16):
        row = data[offset:offset + 16]
        hexes = " ".join(f"{b:02x}" for b in row)
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        lines.append(f"|{offset:08x}| {hexes:<47} |{text:<16}|")
    lines.append(rule)
    return "\n".join(lines)


def _properties(headers: dict[str, str]) -> dict[str, str]:
    """The message's properties: from the exact ``X-Pulsar-Property`` JSON when the
    broker sends it, else from the ``X-Pulsar-PROPERTY-<key>`` headers."""
    exact = _header(headers, "X-Pulsar-Property")
    if exact is not None:
        try:
            decoded = json.loads(exact)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            return {str(k): str(v) for k, v in decoded.items()}
    return {
        key[len(PROPERTY_PREFIX):]: value
        for key, value in headers.items()
        if key.lower().startswith(PROPERTY_PREFIX)
    }


def _header(headers: dict[str, str], name: str) -> str | None:
    wanted = name.lower()
    return next((v for k, v in headers.items() if k.lower() == wanted), None)


def message_record(raw: bytes, headers: dict[str, str]) -> dict[str, Any]:
    """A peeked message as a JSON object: id, times, properties, payload (text when it
    is UTF-8, always as hex), and a batch's members."""
    record: dict[str, Any] = {
        "messageId": _header(headers, "X-Pulsar-Message-ID"),
        "publishTime": _header(headers, "X-Pulsar-publish-time"),
        "properties": _properties(headers),
    }
    event_time = _header(headers, "X-Pulsar-event-time")
    if event_time is not None:
        record["eventTime"] = event_time
    batch = _header(headers, "X-Pulsar-num-batch-message")
    if batch is not None and batch.isdigit():
        try:
            members = parse_batch(raw, int(batch))
        except RemoteProtocolError as exc:
            record["batchError"] = str(exc)
        else:
            record["batch"] = [
                {
                    "batchIndex": index,
                    "properties": {p.key: p.value for p in meta.properties},
                    **_payload(body),
                }
                for index, (meta, body) in enumerate(members)
            ]
            return record
    record.update(_payload(raw))
    return record


def _payload(data: bytes) -> dict[str, Any]:
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"payload": text, "payloadHex": data.hex()}


def format_message(record: dict[str, Any]) -> str:
    """A message record as Pulsar's command line prints a peeked message."""
    lines = [f"Message ID: {record['messageId']}"]
    if record.get("publishTime"):
        lines.append(f"Publish time: {record['publishTime']}")
    if record.get("eventTime"):
        lines.append(f"Event time: {record['eventTime']}")
    members = record.get("batch")
    if members is None:
        lines += _properties_lines(record["properties"])
        lines.append(hex_dump(bytes.fromhex(record["payloadHex"])))
        return "\n".join(lines)
    for member in members:
        lines.append(f"Batch Message ID: {record['messageId']}:{member['batchIndex']}")
        lines += _properties_lines(member["properties"])
        lines.append(hex_dump(bytes.fromhex(member["payloadHex"])))
    return "\n".join(lines)


def _properties_lines(properties: dict[str, str]) -> list[str]:
    if not properties:
        return []
    return ["Properties:", json.dumps(properties, indent=2, sort_keys=True)]


def _messages_answer(records: list[dict[str, Any]], output: str) -> Any:
    if output == "json":
        return records
    return "\n".join(format_message(r) for r in records)


# -- the calls ------------------------------------------------------------------------
def _sub_path(client: AdminClient, topic: str, subscription: str) -> str:
    return f"{client.topic_path(topic)}/subscription/{_q(subscription)}"


def _q(segment: str) -> str:
    return quote(segment, safe="")


async def skip(client: AdminClient, args: argparse.Namespace) -> Any:
    path = _sub_path(client, args.topic, args.subscription)
    return await client.request("POST", f"{path}/skip/{args.count}")


async def clear_backlog(client: AdminClient, args: argparse.Namespace) -> Any:
    path = _sub_path(client, args.topic, args.subscription)
    return await client.request("POST", f"{path}/skip_all")


async def reset_cursor(client: AdminClient, args: argparse.Namespace) -> Any:
    path = _sub_path(client, args.topic, args.subscription)
    if args.time is not None:
        timestamp_ms = int(time.time() * 1000) - args.time * 1000
        return await client.request("POST", f"{path}/resetcursor/{max(timestamp_ms, 0)}")
    message_id = args.message_id
    if message_id in ("earliest", "latest"):
        return await client.request("POST", f"{path}/resetcursor", message_id)
    ledger, entry = (int(part) for part in message_id.split(":"))
    body = {"ledgerId": ledger, "entryId": entry, "partitionIndex": -1,
            "batchIndex": -1, "excluded": args.exclude_reset_position}
    return await client.request("POST", f"{path}/resetcursor", body)


async def peek_messages(client: AdminClient, args: argparse.Namespace) -> Any:
    path = _sub_path(client, args.topic, args.subscription)
    records = []
    for n in range(1, args.count + 1):
        raw, headers = await client.get_message(f"{path}/position/{n}")
        records.append(message_record(raw, headers))
    return _messages_answer(records, args.output)


async def examine_message(client: AdminClient, args: argparse.Namespace) -> Any:
    path = (
        f"{client.topic_path(args.topic)}/examinemessage"
        f"?initialPosition={args.initial_position}&messagePosition={args.message_position}"
    )
    raw, headers = await client.get_message(path)
    return _messages_answer([message_record(raw, headers)], args.output)


async def get_message_by_id(client: AdminClient, args: argparse.Namespace) -> Any:
    path = f"{client.topic_path(args.topic)}/ledger/{args.ledger_id}/entry/{args.entry_id}"
    raw, headers = await client.get_message(path)
    return _messages_answer([message_record(raw, headers)], args.output)


async def compaction_status(client: AdminClient, args: argparse.Namespace) -> Any:
    path = f"{client.topic_path(args.topic)}/compaction"
    status = await client.request("GET", path)
    while args.wait_complete and isinstance(status, dict) and status.get("status") == "RUNNING":
        await asyncio.sleep(COMPACTION_POLL_INTERVAL_S)
        status = await client.request("GET", path)
    return status


async def create_subscription(client: AdminClient, args: argparse.Namespace) -> Any:
    path = _sub_path(client, args.topic, args.subscription)
    message_id = args.message_id
    if message_id in ("earliest", "latest"):
        return await client.request("PUT", path, message_id)
    ledger, entry = (int(part) for part in message_id.split(":"))
    return await client.request("PUT", path, {"ledgerId": ledger, "entryId": entry})


async def unsubscribe(client: AdminClient, args: argparse.Namespace) -> Any:
    path = _sub_path(client, args.topic, args.subscription)
    return await client.request("DELETE", path + ("?force=true" if args.force else ""))


def _simple(verb: str, suffix: str) -> Any:
    async def run(client: AdminClient, args: argparse.Namespace) -> Any:
        return await client.request(verb, client.topic_path(args.topic) + suffix)

    return run


async def message_id_by_time(client: AdminClient, args: argparse.Namespace) -> Any:
    path = f"{client.topic_path(args.topic)}/messageid/{args.datetime}"
    return await client.request("GET", path)


# -- registration ---------------------------------------------------------------------
def add_topic_ops_commands(cmds: Any) -> None:
    """Register the per-topic operations on ``quasar admin topics``'s subparsers."""

    def command(name: str, run: Any, help: str) -> argparse.ArgumentParser:
        parser = add_command(cmds, name, run, help)
        parser.add_argument("topic", metavar="TOPIC")
        return parser

    def subscription(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-s", "--subscription", required=True, metavar="SUB")

    p = command("skip", skip, "skip N messages of a subscription's backlog")
    subscription(p)
    p.add_argument("-n", "--count", type=_non_negative, required=True, metavar="N")
    p = command("clear-backlog", clear_backlog, "skip a subscription's whole backlog")
    subscription(p)

    p = command("reset-cursor", reset_cursor, "restart a subscription at a time or message")
    subscription(p)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "-t", "--time", type=parse_relative_time_s, metavar="TIME",
        help="how far back from now: 30s, 10m, 3h, 2d, 5w (no unit: seconds)",
    )
    target.add_argument(
        "-m", "--messageId", dest="message_id", type=_message_id, metavar="ID",
        help="ledgerId:entryId, earliest or latest",
    )
    p.add_argument(
        "-e", "--exclude-reset-position", action="store_true",
        help="start after the message id rather than at it",
    )

    p = command("peek-messages", peek_messages, "show the next messages without consuming")
    subscription(p)
    p.add_argument("-n", "--count", type=_positive, default=1, metavar="N")
    p = command("examine-message", examine_message, "show the n-th message from an end")
    p.add_argument(
        "-i", "--initialPosition", dest="initial_position", default="latest",
        choices=("latest", "earliest"),
    )
    p.add_argument(
        "-m", "--messagePosition", dest="message_position", type=_positive, default=1,
        metavar="N",
    )
    p = command("get-message-by-id", get_message_by_id, "show the message at ledger:entry")
    p.add_argument("-l", "--ledgerId", dest="ledger_id", type=_non_negative, required=True)
    p.add_argument("-e", "--entryId", dest="entry_id", type=_non_negative, required=True)
    p = command("get-message-id", message_id_by_time, "the message id at a date-time")
    p.add_argument(
        "-d", "--datetime", type=_datetime_ms, required=True, metavar="DATETIME",
        help="ISO 8601, e.g. 2021-06-28T16:53:08Z",
    )

    command("last-message-id", _simple("GET", "/lastMessageId"), "the last message id")
    command("unload", _simple("PUT", "/unload"), "unload a topic (clients reconnect)")
    command("terminate", _simple("POST", "/terminate"), "refuse any further message")
    command("compact", _simple("PUT", "/compaction"), "start compacting a topic")
    p = command("compaction-status", compaction_status, "the last compaction's status")
    p.add_argument(
        "-w", "--wait-complete", action="store_true", help="wait while compaction runs"
    )

    p = command("create-subscription", create_subscription, "create a subscription")
    subscription(p)
    p.add_argument(
        "-m", "--messageId", dest="message_id", type=_message_id, default="latest",
        metavar="ID", help="where it starts: latest (default), earliest, ledgerId:entryId",
    )
    p = command("unsubscribe", unsubscribe, "delete a subscription")
    subscription(p)
    p.add_argument(
        "-f", "--force", action="store_true", help="disconnect its consumers first"
    )
