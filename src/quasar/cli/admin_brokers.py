"""``quasar admin brokers``: the broker's health and its run-time configuration
(``/admin/v2/brokers``), with ``pulsar-admin brokers``' command and flag names.

::

    quasar admin brokers healthcheck [--topic-version V1|V2]
    quasar admin brokers ready
    quasar admin brokers version
    quasar admin brokers list-dynamic-config
    quasar admin brokers get-all-dynamic-config
    quasar admin brokers get-runtime-config
    quasar admin brokers update-dynamic-config --config NAME --value VALUE
    quasar admin brokers delete-dynamic-config --config NAME

``ready`` is quasar's: ``pulsar-admin`` has no command for the ready endpoint.
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import quote

from quasar.cli.admin_commands import add_command, add_group
from quasar.client.admin import AdminClient

__all__ = ["add_brokers_group"]

BASE = "/admin/v2/brokers"
TOPIC_VERSIONS = ("V1", "V2")


def _segment(value: str) -> str:
    """One path segment: every character that is not safe in it percent-encoded."""
    return quote(value, safe="")


async def healthcheck(client: AdminClient, topic_version: str | None) -> Any:
    query = "" if topic_version is None else f"?topicVersion={topic_version}"
    return await client.request("GET", f"{BASE}/health{query}")


async def update_dynamic_config(client: AdminClient, name: str, value: str) -> Any:
    return await client.request(
        "POST", f"{BASE}/configuration/{_segment(name)}/{_segment(value)}"
    )


async def delete_dynamic_config(client: AdminClient, name: str) -> Any:
    return await client.request("DELETE", f"{BASE}/configuration/{_segment(name)}")


def add_brokers_group(groups: Any) -> None:
    """Register the ``brokers`` group on ``quasar admin``'s subparsers."""
    cmds = add_group(groups, "brokers", "broker health and run-time configuration")
    command = functools.partial(add_command, cmds)

    p = command(
        "healthcheck",
        lambda c, a: healthcheck(c, a.topic_version),
        "write a message to the heartbeat topic and read it back",
    )
    p.add_argument(
        "-tv", "--topic-version", choices=TOPIC_VERSIONS, default=None,
        help="heartbeat topic version (V1 by default)",
    )
    command(
        "ready",
        lambda c, a: c.request("GET", f"{BASE}/ready"),
        "whether the broker accepts connections",
    )
    command(
        "version",
        lambda c, a: c.request("GET", f"{BASE}/version"),
        "the broker's version",
    )
    command(
        "list-dynamic-config",
        lambda c, a: c.request("GET", f"{BASE}/configuration"),
        "the keys that may be changed at run time",
    )
    command(
        "get-all-dynamic-config",
        lambda c, a: c.request("GET", f"{BASE}/configuration/values"),
        "the keys changed at run time and their values",
    )
    command(
        "get-runtime-config",
        lambda c, a: c.request("GET", f"{BASE}/configuration/runtime"),
        "every setting's effective value (secrets masked)",
    )
    p = command(
        "update-dynamic-config",
        lambda c, a: update_dynamic_config(c, a.config, a.value),
        "change a dynamic key, durably, without a restart",
    )
    p.add_argument("--config", required=True, metavar="NAME", help="the key")
    p.add_argument("--value", required=True, metavar="VALUE", help="its new value")
    p = command(
        "delete-dynamic-config",
        lambda c, a: delete_dynamic_config(c, a.config),
        "return a dynamic key to its configured value",
    )
    p.add_argument("--config", required=True, metavar="NAME", help="the key")
