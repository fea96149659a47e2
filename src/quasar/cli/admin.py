"""``quasar admin``: tenants, namespaces and topics through the REST API.

Mirrors the most used ``pulsar-admin`` commands, with its global connection flags
(``--admin-url``, ``--auth-plugin``, ``--auth-params``, ``--tls-*``; see
:mod:`quasar.cli.admin_connection`)::

    quasar admin tenants list|create NAME|delete NAME
    quasar admin namespaces list TENANT|create T/NS|delete T/NS [--force]
    quasar admin topics list T/NS|create TOPIC|create-partitioned-topic TOPIC -p N
                        |delete TOPIC [--force]|delete-partitioned-topic TOPIC [--force]
                        |stats TOPIC|internal-stats TOPIC|subscriptions TOPIC

Answers print as human tables; ``--output json`` prints the API's JSON
(:mod:`quasar.cli.output`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from quasar.cli.admin_brokers import add_brokers_group
from quasar.cli.admin_commands import Command, add_command, add_group
from quasar.cli.admin_connection import add_connection_arguments, admin_connection
from quasar.cli.admin_namespace_policies import (
    add_namespace_policy_commands,
    add_topic_expiry_commands,
)
from quasar.cli.admin_schemas import add_schema_policy_commands, add_schemas_group
from quasar.cli.admin_topic_ops import add_topic_ops_commands
from quasar.cli.admin_transactions import add_transactions_group
from quasar.cli.output import OUTPUT_FORMATS, render
from quasar.client.admin import call_admin
from quasar.client.exceptions import InvalidConfiguration
from quasar.errors import AdminError, QuasarError


def _csv(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def add_admin_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``admin`` and its command groups on the top-level subparsers."""
    admin = subparsers.add_parser(
        "admin", parents=parents, help="manage tenants, namespaces and topics"
    )
    add_connection_arguments(admin)
    admin.add_argument(
        "--output", "-o", choices=OUTPUT_FORMATS, default="table",
        help="how to print answers: human tables (default) or the API's JSON",
    )
    groups = admin.add_subparsers(dest="group", required=True, metavar="GROUP")
    _add_tenants(groups)
    _add_namespaces(groups)
    _add_topics(groups)
    add_transactions_group(groups)
    add_brokers_group(groups)
    add_schemas_group(groups)


def _add_tenants(groups: Any) -> None:
    cmds = add_group(groups, "tenants", "tenants")
    add_command(cmds, "list", lambda c, a: c.tenants(), "list tenants")
    create = add_command(
        cmds,
        "create",
        lambda c, a: c.create_tenant(a.tenant, a.admin_roles, a.allowed_clusters),
        "create a tenant",
    )
    create.add_argument("tenant")
    create.add_argument("--admin-roles", type=_csv, default=[], help="comma-separated")
    create.add_argument(
        "--allowed-clusters", type=_csv, default=[], help="comma-separated"
    )
    delete = add_command(
        cmds, "delete", lambda c, a: c.delete_tenant(a.tenant), "delete a tenant"
    )
    delete.add_argument("tenant")


def _add_namespaces(groups: Any) -> None:
    cmds = add_group(groups, "namespaces", "namespaces")
    lister = add_command(
        cmds, "list", lambda c, a: c.namespaces(a.tenant), "list namespaces"
    )
    lister.add_argument("tenant")
    create = add_command(
        cmds,
        "create",
        lambda c, a: c.create_namespace(a.namespace),
        "create a namespace",
    )
    create.add_argument("namespace", help="tenant/namespace")
    delete = add_command(
        cmds,
        "delete",
        lambda c, a: c.delete_namespace(a.namespace, a.force),
        "delete a namespace",
    )
    delete.add_argument("namespace", help="tenant/namespace")
    delete.add_argument("--force", action="store_true", help="also delete its topics")
    add_namespace_policy_commands(cmds)
    add_schema_policy_commands(cmds)


def _add_topics(groups: Any) -> None:
    cmds = add_group(groups, "topics", "topics")
    lister = add_command(cmds, "list", lambda c, a: c.topics(a.namespace), "list topics")
    lister.add_argument("namespace", help="tenant/namespace")
    simple: list[tuple[str, Command, str]] = [
        (
            "create",
            lambda c, a: c.create_topic(a.topic),
            "create a non-partitioned topic",
        ),
        ("stats", lambda c, a: c.stats(a.topic), "a topic's stats"),
        ("internal-stats", lambda c, a: c.internal_stats(a.topic), "internal stats"),
        ("subscriptions", lambda c, a: c.subscriptions(a.topic), "list subscriptions"),
    ]
    for name, run, help in simple:
        add_command(cmds, name, run, help).add_argument("topic")
    partitioned = add_command(
        cmds,
        "create-partitioned-topic",
        lambda c, a: c.create_partitioned_topic(a.topic, a.partitions),
        "create a partitioned topic",
    )
    partitioned.add_argument("topic")
    partitioned.add_argument("-p", "--partitions", type=int, required=True)
    for name, run, help in (
        ("delete", lambda c, a: c.delete_topic(a.topic, a.force), "delete a topic"),
        (
            "delete-partitioned-topic",
            lambda c, a: c.delete_partitioned_topic(a.topic, a.force),
            "delete a partitioned topic",
        ),
    ):
        delete = add_command(cmds, name, run, help)
        delete.add_argument("topic")
        delete.add_argument(
            "--force", action="store_true", help="disconnect clients first"
        )
    add_topic_ops_commands(cmds)
    add_topic_expiry_commands(cmds)


def run_admin(args: argparse.Namespace) -> int:
    """Run the chosen admin command; 0 on success, 1 on any error (printed)."""
    command: Command = args.admin_command
    try:
        conn = admin_connection(args)
    except InvalidConfiguration as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        result = call_admin(
            conn.admin_url,
            lambda client: command(client, args),
            ssl_context=conn.ssl_context,
            authentication=conn.authentication,
        )
    except AdminError as exc:
        if not exc.remote:  # e.g. an invalid namespace name, refused before sending
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"error: {exc.http_status} {exc.reason}", file=sys.stderr)
        return 1
    except (QuasarError, ValueError) as exc:
        # The admin API unreachable or too slow, or an invalid topic name or URL.
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text = render(result, args.output, getattr(args, "admin_shape", None))
    if text:
        print(text)
    return 0
