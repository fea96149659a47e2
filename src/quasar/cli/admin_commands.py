"""How a ``quasar admin`` command is declared: a name in a group, and the coroutine it
runs against the admin API.

``run_admin`` (``quasar.cli.admin``) calls the parsed command's ``admin_command`` with
an ``AdminClient`` and prints the answer through ``admin_shape`` (``quasar.cli.output``;
None: the generic table).
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any

from quasar.cli.output import Shape
from quasar.client.admin import AdminClient

__all__ = ["Command", "add_command", "add_group"]

Command = Callable[[AdminClient, argparse.Namespace], Awaitable[Any]]


def add_group(groups: Any, name: str, help: str) -> Any:
    """A command group (``topics``, ``brokers``...) on ``quasar admin``; its
    subparsers, where its commands go."""
    parser = groups.add_parser(name, help=help)
    return parser.add_subparsers(dest="command", required=True, metavar="COMMAND")


def add_command(
    cmds: Any, name: str, run: Command, help: str, shape: Shape | None = None, **kwargs: Any
) -> argparse.ArgumentParser:
    """A command of a group that runs ``run``; ``shape`` gives its own table."""
    parser: argparse.ArgumentParser = cmds.add_parser(name, help=help, **kwargs)
    parser.set_defaults(admin_command=run, admin_shape=shape)
    return parser
