"""``quasar admin namespaces`` policy commands and ``topics expire-messages``.

``pulsar-admin``'s command names and flags::

    quasar admin namespaces set-message-ttl T/NS -ttl 3600|1h ; get-message-ttl ; remove-message-ttl
    quasar admin namespaces set-backlog-quota T/NS [-l 10G] [-lt 1h] -p POLICY [-t TYPE]
    quasar admin namespaces get-backlog-quotas T/NS ; remove-backlog-quota T/NS [-t TYPE]
    quasar admin namespaces set-retention T/NS -t 3h|-1 -s 1G|-1 ; get-retention ; remove-retention
    quasar admin namespaces set-deduplication T/NS --enable|--disable ; get-deduplication
                                                                       ; remove-deduplication
    quasar admin namespaces bundles T/NS
    quasar admin namespaces unload T/NS [--bundle 0xLOW_0xHIGH]
    quasar admin namespaces split-bundle T/NS --bundle 0xLOW_0xHIGH [--unload]
                                        [--split-algorithm-name NAME]
    quasar admin namespaces clear-backlog T/NS [-s SUB] [--force]
    quasar admin namespaces unsubscribe T/NS -s SUB
    quasar admin topics expire-messages TOPIC -s SUB (-t 1h | -p LEDGER:ENTRY [-e])
    quasar admin topics expire-messages-all-subscriptions TOPIC -t 1h

Sizes take Pulsar's suffixes (``k``, ``m``, ``g``, ``t``: powers of 1024), durations
theirs (``s``, ``m``, ``h``, ``d``, ``w``, ``y``; plain digits are seconds, or minutes
for the retention time as ``pulsar-admin`` reads it); ``-1`` means unlimited.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any
from urllib.parse import quote

from quasar.cli.admin_commands import add_command
from quasar.client.admin import AdminClient
from quasar.resources.bundles import SPLIT_ALGORITHMS

__all__ = ["add_namespace_policy_commands", "add_topic_expiry_commands"]

_SIZE_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_TIME_UNITS_S = {
    "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400, "y": 365 * 86_400,
}
BACKLOG_QUOTA_TYPES = ("destination_storage", "message_age")
BACKLOG_QUOTA_POLICIES = (
    "producer_request_hold", "producer_exception", "consumer_backlog_eviction",
)


def _split_path(client: AdminClient, args: argparse.Namespace) -> str:
    query = f"unload={str(args.unload).lower()}"
    if args.split_algorithm_name is not None:
        query += f"&splitAlgorithmName={args.split_algorithm_name}"
    return _policy_path(client, args.namespace, f"{args.bundle}/split?{query}")


def size_bytes(text: str) -> int:
    """``10``, ``512k``, ``10M``, ``1g``: bytes; ``-1``: unlimited."""
    value = text.strip().lower()
    if value == "-1":
        return -1
    unit = _SIZE_UNITS.get(value[-1:], 1)
    digits = value[:-1] if value[-1:] in _SIZE_UNITS else value
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 10M, 1G, -1)")
    return int(digits) * unit


def duration_seconds(text: str, plain_unit_s: int = 1) -> int:
    """``30``, ``30s``, ``5m``, ``1h``, ``2d``: seconds; ``-1``: unlimited. Plain
    digits count ``plain_unit_s`` seconds each."""
    value = text.strip().lower()
    if value == "-1":
        return -1
    unit = _TIME_UNITS_S.get(value[-1:])
    digits = value[:-1] if unit is not None else value
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30s, 5m, 1h, -1)")
    return int(digits) * (plain_unit_s if unit is None else unit)


def _retention_minutes(text: str) -> int:
    seconds = duration_seconds(text, plain_unit_s=60)
    return -1 if seconds == -1 else seconds // 60


def _position(text: str) -> tuple[int, int]:
    ledger, sep, entry = text.partition(":")
    if not sep or not ledger.isdigit() or not entry.isdigit():
        raise argparse.ArgumentTypeError(f"not a message id: {text!r} (LEDGER:ENTRY)")
    return int(ledger), int(entry)


# -- REST calls ---------------------------------------------------------------------------


async def set_message_ttl(client: AdminClient, namespace: str, ttl_s: int) -> Any:
    return await client.request(
        "POST", client.namespace_path(namespace) + "/messageTTL", ttl_s
    )


async def set_backlog_quota(
    client: AdminClient, namespace: str, kind: str, limit: int | None,
    limit_time: int | None, policy: str,
) -> Any:
    body = {
        "limitSize": -1 if limit is None else limit,
        "limitTime": -1 if limit_time is None else limit_time,
        "policy": policy,
    }
    return await client.request(
        "POST",
        client.namespace_path(namespace) + f"/backlogQuota?backlogQuotaType={kind}",
        body,
    )


async def set_retention(
    client: AdminClient, namespace: str, minutes: int, size: int
) -> Any:
    size_mb = -1 if size == -1 else size // (1024 * 1024)
    return await client.request(
        "POST",
        client.namespace_path(namespace) + "/retention",
        {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb},
    )


async def clear_backlog(
    client: AdminClient, namespace: str, subscription: str | None, force: bool
) -> Any:
    if not force:
        # pulsar-admin asks before dropping every unconsumed message.
        target = f"subscription {subscription}" if subscription else "all subscriptions"
        sys.stderr.write(f"Clear the backlog of {target} in {namespace}? (y/n) ")
        sys.stderr.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise ValueError("not confirmed; nothing cleared (use --force to skip asking)")
    path = client.namespace_path(namespace) + "/clearBacklog"
    if subscription:
        path += "/" + quote(subscription, safe="")
    return await client.request("POST", path)


async def expire_messages(
    client: AdminClient, topic: str, subscription: str, seconds: int | None,
    position: tuple[int, int] | None, excluded: bool,
) -> Any:
    base = client.topic_path(topic) + "/subscription/" + quote(subscription, safe="")
    if position is not None:
        ledger, entry = position
        body = {"ledgerId": ledger, "entryId": entry, "excluded": excluded}
        return await client.request("POST", base + "/expireMessages", body)
    if seconds is None or seconds < 0:
        raise ValueError("give the age to expire with -t, or a message id with -p")
    return await client.request("POST", f"{base}/expireMessages/{seconds}")


# -- commands -----------------------------------------------------------------------------


def _namespace_command(cmds: Any, name: str, run: Any, help: str) -> argparse.ArgumentParser:
    parser = add_command(cmds, name, run, help)
    parser.add_argument("namespace", help="tenant/namespace")
    return parser


def _policy_path(client: AdminClient, namespace: str, policy: str) -> str:
    return client.namespace_path(namespace) + "/" + policy


def add_namespace_policy_commands(cmds: Any) -> None:
    """Register the policy and operation commands on the ``namespaces`` group."""
    p = _namespace_command(
        cmds, "set-message-ttl",
        lambda c, a: set_message_ttl(c, a.namespace, a.ttl),
        "expire unacknowledged messages older than this",
    )
    p.add_argument("-ttl", "--messageTTL", dest="ttl", type=duration_seconds,
                   required=True, help="seconds, or 30s/5m/1h/1d")
    for name, policy, method, help in (
        ("get-message-ttl", "messageTTL", "GET", "the namespace's message TTL (s)"),
        ("remove-message-ttl", "messageTTL", "DELETE", "back to ttlDurationDefaultSeconds"),
        ("get-backlog-quotas", "backlogQuotaMap", "GET", "the namespace's backlog quotas"),
        ("get-retention", "retention", "GET", "the namespace's retention"),
        ("bundles", "bundles", "GET", "the namespace's bundle boundaries"),
        ("remove-retention", "retention", "DELETE", "back to the broker's retention"),
        ("get-deduplication", "deduplication", "GET", "whether deduplication is on"),
        ("remove-deduplication", "deduplication", "DELETE",
         "back to brokerDeduplicationEnabled"),
    ):
        _namespace_command(
            cmds, name,
            lambda c, a, policy=policy, method=method: c.request(
                method, _policy_path(c, a.namespace, policy)
            ),
            help,
        )
    p = _namespace_command(
        cmds, "set-backlog-quota",
        lambda c, a: set_backlog_quota(
            c, a.namespace, a.type, a.limit, a.limit_time, a.policy
        ),
        "limit the backlog's size or age, and say what happens beyond",
    )
    p.add_argument("-l", "--limit", type=size_bytes, default=None,
                   help="size limit (destination_storage), e.g. 10G")
    p.add_argument("-lt", "--limitTime", dest="limit_time", type=duration_seconds,
                   default=None, help="age limit (message_age), e.g. 1h")
    p.add_argument("-p", "--policy", choices=BACKLOG_QUOTA_POLICIES, required=True)
    p.add_argument("-t", "--type", choices=BACKLOG_QUOTA_TYPES,
                   default="destination_storage")
    p = _namespace_command(
        cmds, "remove-backlog-quota",
        lambda c, a: c.request(
            "DELETE",
            _policy_path(c, a.namespace, f"backlogQuota?backlogQuotaType={a.type}"),
        ),
        "remove one backlog quota",
    )
    p.add_argument("-t", "--type", choices=BACKLOG_QUOTA_TYPES,
                   default="destination_storage")
    p = _namespace_command(
        cmds, "set-retention",
        lambda c, a: set_retention(c, a.namespace, a.time, a.size),
        "keep acknowledged messages this long and this much",
    )
    p.add_argument("-t", "--time", type=_retention_minutes, required=True,
                   help="e.g. 3h, 2d (digits alone are minutes); -1 = forever")
    p.add_argument("-s", "--size", type=size_bytes, required=True,
                   help="e.g. 500M, 10G; -1 = no limit")
    p = _namespace_command(
        cmds, "set-deduplication",
        lambda c, a: c.request(
            "POST", _policy_path(c, a.namespace, "deduplication"), a.enable
        ),
        "switch message deduplication",
    )
    switch = p.add_mutually_exclusive_group(required=True)
    switch.add_argument("-e", "--enable", dest="enable", action="store_true")
    switch.add_argument("-d", "--disable", dest="enable", action="store_false")
    p = _namespace_command(
        cmds, "unload",
        lambda c, a: c.request(
            "PUT",
            _policy_path(c, a.namespace, "unload" if a.bundle is None else f"{a.bundle}/unload"),
        ),
        "unload the namespace's topics (clients reconnect); in a cluster its bundles "
        "are given up and assigned again on the next lookup",
    )
    p.add_argument(
        "-b", "--bundle", default=None,
        help="only this bundle (0xLOW_0xHIGH; quasar broker only)",
    )
    p = _namespace_command(
        cmds, "split-bundle",
        lambda c, a: c.request("PUT", _split_path(c, a)),
        "split a bundle in two on its owner (quasar broker only)",
    )
    p.add_argument("-b", "--bundle", required=True, help="0xLOW_0xHIGH")
    p.add_argument("-u", "--unload", action="store_true",
                   help="unload the two halves, for the load manager to place them")
    p.add_argument("-san", "--split-algorithm-name", default=None,
                   choices=SPLIT_ALGORITHMS,
                   help="how to cut it (the broker's defaultNamespaceBundleSplitAlgorithm "
                   "when not given)")
    p = _namespace_command(
        cmds, "clear-backlog",
        lambda c, a: clear_backlog(c, a.namespace, a.sub, a.force),
        "mark every message of the namespace consumed",
    )
    p.add_argument("-s", "--sub", default=None, help="only this subscription")
    p.add_argument("-force", "--force", action="store_true", help="do not ask")
    p = _namespace_command(
        cmds, "unsubscribe",
        lambda c, a: c.request(
            "POST",
            _policy_path(c, a.namespace, "unsubscribe/" + quote(a.sub, safe="")),
        ),
        "delete a subscription from every topic of the namespace",
    )
    p.add_argument("-s", "--sub", required=True)


def add_topic_expiry_commands(cmds: Any) -> None:
    """Register ``expire-messages`` and ``expire-messages-all-subscriptions`` on the
    ``topics`` group."""
    p = add_command(
        cmds, "expire-messages",
        lambda c, a: expire_messages(
            c, a.topic, a.subscription, a.expire_time, a.position, a.exclude
        ),
        "expire a subscription's messages older than -t, or up to -p",
    )
    p.add_argument("topic")
    p.add_argument("-s", "--subscription", required=True)
    p.add_argument("-t", "--expireTime", dest="expire_time", type=duration_seconds,
                   default=None, help="seconds, or 30s/5m/1h")
    p.add_argument("-p", "--position", type=_position, default=None,
                   help="expire up to this message id, LEDGER:ENTRY")
    p.add_argument("-e", "--exclude-reset-position", dest="exclude", action="store_true",
                   help="keep the message at --position")
    p = add_command(
        cmds, "expire-messages-all-subscriptions",
        lambda c, a: c.request(
            "POST",
            f"{c.topic_path(a.topic)}/all_subscription/expireMessages/{a.expire_time}",
        ),
        "expire messages older than -t on every subscription",
    )
    p.add_argument("topic")
    p.add_argument("-t", "--expireTime", dest="expire_time", type=duration_seconds,
                   required=True, help="seconds, or 30s/5m/1h")
