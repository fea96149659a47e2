"""``quasar admin schemas`` (``/admin/v2/schemas``) and the namespace schema policies,
with ``pulsar-admin``'s command and flag names.

::

    quasar admin schemas get TOPIC [--version N | --all-version]
    quasar admin schemas upload TOPIC --filename FILE
    quasar admin schemas delete TOPIC
    quasar admin schemas compatibility TOPIC --filename FILE
    quasar admin namespaces get-schema-compatibility-strategy NS
    quasar admin namespaces set-schema-compatibility-strategy NS --compatibility S
    quasar admin namespaces get-is-allow-auto-update-schema NS
    quasar admin namespaces set-is-allow-auto-update-schema NS --enable|--disable
    quasar admin namespaces get-schema-validation-enforce NS
    quasar admin namespaces set-schema-validation-enforce NS --enable|--disable

A schema file is Pulsar's upload payload: ``{"type": "AVRO", "schema": "<definition
as a string>", "properties": {}}``.
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import Any

from quasar.cli.admin_commands import add_command, add_group
from quasar.client.admin import AdminClient

__all__ = ["add_schema_policy_commands", "add_schemas_group"]

STRATEGIES = (
    "UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD",
    "FULL", "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE",
)


def schema_path(topic: str) -> str:
    """``/admin/v2/schemas/<tenant>/<namespace>/<topic>``.

    Raises:
        InvalidTopicName, InvalidResourceError: not a valid persistent topic.
    """
    return AdminClient.topic_path(topic).replace("/admin/v2/persistent/", "/admin/v2/schemas/", 1)


def read_payload(filename: str) -> Any:
    """A schema file's JSON.

    Raises:
        ValueError: unreadable, or not JSON.
    """
    try:
        return json.loads(Path(filename).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read the schema file {filename}: {e}") from None


async def get_schema(
    client: AdminClient, topic: str, version: int | None, all_versions: bool
) -> Any:
    base = schema_path(topic)
    if all_versions:
        return await client.request("GET", base + "/schemas")
    if version is not None:
        return await client.request("GET", f"{base}/schema/{version}")
    return await client.request("GET", base + "/schema")


def add_schemas_group(groups: Any) -> None:
    """Register the ``schemas`` group on ``quasar admin``'s subparsers."""
    cmds = add_group(groups, "schemas", "topic schemas")
    command = functools.partial(add_command, cmds)
    p = command(
        "get",
        lambda c, a: get_schema(c, a.topic, a.version, a.all_version),
        "a topic's latest schema, one version, or every version",
    )
    p.add_argument("topic")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--version", type=int, default=None, help="this version")
    which.add_argument("-a", "--all-version", action="store_true",
                       help="every version since the last deletion")
    p = command(
        "upload",
        lambda c, a: c.request(
            "POST", schema_path(a.topic) + "/schema", read_payload(a.filename)
        ),
        "register a schema (a new version unless an identical one exists)",
    )
    p.add_argument("topic")
    p.add_argument("-f", "--filename", required=True, help="the schema payload file")
    p = command(
        "delete",
        lambda c, a: c.request("DELETE", schema_path(a.topic) + "/schema"),
        "delete the topic's schema (the next schema is accepted whatever it is)",
    )
    p.add_argument("topic")
    p = command(
        "compatibility",
        lambda c, a: c.request(
            "POST", schema_path(a.topic) + "/compatibility", read_payload(a.filename)
        ),
        "test a schema against the topic's schemas",
    )
    p.add_argument("topic")
    p.add_argument("-f", "--filename", required=True, help="the schema payload file")


def _switch(parser: argparse.ArgumentParser) -> None:
    switch = parser.add_mutually_exclusive_group(required=True)
    switch.add_argument("-e", "--enable", dest="enable", action="store_true")
    switch.add_argument("-d", "--disable", dest="enable", action="store_false")


def add_schema_policy_commands(cmds: Any) -> None:
    """Register the schema policy commands on the ``namespaces`` group."""

    def path(c: AdminClient, namespace: str, policy: str) -> str:
        return f"{c.namespace_path(namespace)}/{policy}"

    def command(name: str, run: Any, help: str) -> argparse.ArgumentParser:
        parser = add_command(cmds, name, run, help)
        parser.add_argument("namespace", help="tenant/namespace")
        return parser

    for name, policy in (
        ("get-schema-compatibility-strategy", "schemaCompatibilityStrategy"),
        ("get-is-allow-auto-update-schema", "isAllowAutoUpdateSchema"),
        ("get-schema-validation-enforce", "schemaValidationEnforced"),
    ):
        command(
            name,
            lambda c, a, policy=policy: c.request("GET", path(c, a.namespace, policy)),
            f"the namespace's {policy}",
        )
    p = command(
        "set-schema-compatibility-strategy",
        lambda c, a: c.request(
            "PUT", path(c, a.namespace, "schemaCompatibilityStrategy"), a.compatibility
        ),
        "how new schemas must relate to the topic's schemas",
    )
    p.add_argument("-c", "--compatibility", choices=STRATEGIES, required=True)
    _switch(command(
        "set-is-allow-auto-update-schema",
        lambda c, a: c.request(
            "POST", path(c, a.namespace, "isAllowAutoUpdateSchema"), a.enable
        ),
        "whether producers may add schema versions",
    ))
    _switch(command(
        "set-schema-validation-enforce",
        lambda c, a: c.request(
            "POST", path(c, a.namespace, "schemaValidationEnforced"), a.enable
        ),
        "whether producers without a schema are refused on topics with one",
    ))
