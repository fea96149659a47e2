"""``quasar``: the command-line entry point.

Subcommands::

    quasar standalone [--config FILE] [--data-dir DIR] [--port N] [--http-port N]
                      [--advertised-address HOST] [--set KEY=VALUE ...]
    quasar standalone --version   the version and which native extensions are active
    quasar broker --config FILE   a cluster member (docs/cluster.md)
    quasar config     [--config FILE] [--set KEY=VALUE ...]   print the effective config
    quasar admin ...  (see quasar.cli.admin)
    quasar tokens ... (JWT keys and tokens, see quasar.cli.tokens)
    quasar perf ...   (the benchmark tool, quasar.perf.main)
    quasar chaos ...  (the seeded chaos runner, quasar.cli.chaos)
    quasar initialize-cluster-metadata --cluster NAME --metadata-store zk:... [...]
                      (a new cluster's metadata in ZooKeeper, quasar.cli.cluster_metadata)
    quasar cluster up --brokers N [--data-dir DIR] [...]
                      (ZooKeeper and N brokers on this machine, quasar.cli.cluster_up)

Every subcommand also takes ``--log-level``. ``main`` returns the exit status:
0 success, 1 a failed operation, 2 a usage or configuration error.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import Any

from quasar.cli.admin import add_admin_parser, run_admin
from quasar.cli.chaos import run_chaos
from quasar.cli.cluster_metadata import add_cluster_metadata_parser
from quasar.cli.cluster_up import add_cluster_parser, run_cluster
from quasar.cli.logs import LOG_LEVELS, configure_logging
from quasar.cli.tokens import add_tokens_parser, run_tokens
from quasar.config import ServiceConfiguration
from quasar.native import status_lines

__all__ = ["build_parser", "main", "standalone_config"]


# Named standalone flags and the configuration keys they override.
_FLAG_KEYS = {
    "data_dir": "dataDir",
    "port": "brokerServicePort",
    "http_port": "webServicePort",
    "advertised_address": "advertisedAddress",
    "bind_address": "bindAddress",
}


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _common() -> argparse.ArgumentParser:
    # A parent parser so "--log-level" works after any subcommand; SUPPRESS keeps a
    # subcommand from overwriting a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=argparse.SUPPRESS,
        help="logging threshold (default INFO)",
    )
    return common


def _add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="a broker.conf-style file")
    parser.add_argument(
        "--set",
        dest="settings",
        metavar="KEY=VALUE",
        type=_key_value,
        action="append",
        default=[],
        help="override one configuration key (repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (exposed for tests and documentation)."""
    common = _common()
    parser = argparse.ArgumentParser(
        prog="quasar", description="A transactional broker speaking Pulsar's protocol."
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default="INFO",
        help="logging threshold (default INFO)",
    )
    commands = parser.add_subparsers(
        dest="subcommand", required=True, metavar="COMMAND"
    )

    standalone = commands.add_parser(
        "standalone", parents=[common], help="run a standalone broker"
    )
    _add_config_arguments(standalone)
    standalone.add_argument("--data-dir", metavar="DIR", help="dataDir")
    standalone.add_argument("--port", type=int, help="brokerServicePort (default 6650)")
    standalone.add_argument(
        "--http-port", type=int, help="webServicePort (default 8080)"
    )
    standalone.add_argument(
        "--advertised-address", metavar="HOST", help="advertisedAddress"
    )
    standalone.add_argument("--bind-address", metavar="HOST", help="bindAddress")
    standalone.add_argument(
        "--version",
        action="store_true",
        help="print the version and which native extensions are active, then exit",
    )

    broker = commands.add_parser(
        "broker", parents=[common],
        help="run a broker as a member of a cluster (metadataStoreUrl=zk:...)",
    )
    _add_config_arguments(broker)
    broker.add_argument("--data-dir", metavar="DIR", help="dataDir")
    broker.add_argument("--port", type=int, help="brokerServicePort (default 6650)")
    broker.add_argument("--http-port", type=int, help="webServicePort (default 8080)")
    broker.add_argument("--advertised-address", metavar="HOST", help="advertisedAddress")
    broker.add_argument("--bind-address", metavar="HOST", help="bindAddress")

    config = commands.add_parser(
        "config", parents=[common], help="print the effective configuration"
    )
    _add_config_arguments(config)

    add_admin_parser(commands, [common])
    add_tokens_parser(commands, [common])
    add_cluster_metadata_parser(commands, [common])
    add_cluster_parser(commands, [common])

    # Everything after "perf" belongs to the perf tool, which parses it itself (main
    # passes it through raw), so this subparser declares nothing, not even -h.
    commands.add_parser(
        "perf",
        add_help=False,
        help="run the benchmark tool (quasar perf -h for its help)",
    )
    # Likewise for the chaos runner.
    commands.add_parser(
        "chaos",
        add_help=False,
        help="run a seeded chaos workload under faults (quasar chaos -h for its help)",
    )
    return parser


def standalone_config(
    args: argparse.Namespace, env: dict[str, str] | None = None
) -> ServiceConfiguration:
    """The configuration a ``standalone`` (or ``config``) invocation asks for.

    Named flags and ``--set`` are the explicit overrides, the last source in the
    precedence order (defaults < file < environment < overrides).

    Raises:
        ValueError: a bad value or unknown key; OSError: unreadable file.
    """
    overrides: dict[str, Any] = dict(args.settings)
    for attr, key in _FLAG_KEYS.items():
        value = getattr(args, attr, None)
        if value is not None:
            overrides[key] = value
    return ServiceConfiguration.load(
        config_file=args.config,
        env=dict(os.environ) if env is None else env,
        overrides=overrides,
    )


def version_text() -> str:
    """``quasar <version>`` and one line per optional C extension (``quasar.native``)."""
    try:
        version = importlib.metadata.version("quasar-broker")
    except importlib.metadata.PackageNotFoundError:
        version = "(version unknown: the quasar-broker distribution is not installed)"
    return "\n".join([f"quasar {version}", *status_lines()]) + "\n"


def _run_standalone(args: argparse.Namespace) -> int:
    if args.version:
        sys.stdout.write(version_text())
        return 0
    try:
        config = standalone_config(args)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Imported on use, like the perf tool below: `quasar admin` and `quasar perf`
    # processes need not load the broker.
    from quasar.server.standalone import run

    run(config)
    return 0


def _run_broker(args: argparse.Namespace) -> int:
    try:
        config = standalone_config(args)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from quasar.server.cluster_broker import run

    run(config)
    return 0


def _run_config(args: argparse.Namespace) -> int:
    try:
        config = standalone_config(args)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(config.to_properties())
    return 0


def _run_initialize_cluster_metadata(args: argparse.Namespace) -> int:
    # Imported on use, like the broker: it loads the storage and resources layers.
    from quasar.cli.cluster_init import run_initialize_cluster_metadata

    return run_initialize_cluster_metadata(args)


def _run_perf(args: argparse.Namespace) -> int:
    from quasar.perf.main import main as perf_main

    return perf_main(list(args.perf_args))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand, return its status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if args.subcommand == "perf":
            # Global options cannot take the value "perf", so its first occurrence
            # is the subcommand.
            args.perf_args = argv[argv.index("perf") + 1 :]
        elif args.subcommand == "chaos":
            args.chaos_args = argv[argv.index("chaos") + 1 :]
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return int(exc.code or 0)
    configure_logging(args.log_level)
    runners = {
        "standalone": _run_standalone,
        "broker": _run_broker,
        "config": _run_config,
        "admin": run_admin,
        "tokens": run_tokens,
        "perf": _run_perf,
        "chaos": run_chaos,
        "initialize-cluster-metadata": _run_initialize_cluster_metadata,
        "cluster": run_cluster,
    }
    return runners[args.subcommand](args)


if __name__ == "__main__":
    raise SystemExit(main())
