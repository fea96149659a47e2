"""``quasar cluster up``: ZooKeeper and N cluster members on this machine, to try
quasar out.

It checks everything it can before starting anything (N, the ports, the extra
``broker.conf``, ZooKeeper's package), then starts a ZooKeeper server of its own
(``DIR/zookeeper``, loopback; ``--zookeeper`` names an existing one instead), writes
the cluster's metadata as ``quasar initialize-cluster-metadata`` does (a second run
over the same directory finds it and changes nothing), starts the members on
consecutive ports sharing ``DIR/data`` and prints the service URL, the admin URLs
and the log files. It then stays in the foreground: SIGINT (Ctrl-C) or SIGTERM stops
the members (SIGTERM, so each releases its bundles), then ZooKeeper, and exits 0; a
process that exits by itself meanwhile is reported with its log's tail and
everything is stopped, exit status 1. Usage and configuration errors exit with 2.

The children run in sessions of their own, so a Ctrl-C typed in the terminal reaches
only this command, which stops them in that order.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from quasar.cli.cluster_metadata import DEFAULT_TRANSACTION_COORDINATORS
from quasar.config import ServiceConfiguration
from quasar.local.broker import BrokerMember
from quasar.local.cluster import LocalCluster
from quasar.local.probe import port_taken
from quasar.local.zookeeper import ZooKeeperServer, missing_reason
from quasar.storage.metadata.url import parse_metadata_store_url

__all__ = ["add_cluster_parser", "run_cluster"]

DEFAULT_DATA_DIR = "quasar-cluster"
DEFAULT_CLUSTER = "local"
# How long the processes have to start, and to stop before they are killed: a
# member's start is mostly imports and ZooKeeper round trips; its stop waits for
# topics to close.
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
# How often the running cluster's processes are looked at.
WATCH_INTERVAL_S = 0.2
LOG_TAIL_LINES = 30

# Keys this command sets for every member itself: a --config or --set naming one
# is refused rather than overridden without a word.
OWNED_KEYS = {
    "clusterName": "--cluster",
    "metadataStoreUrl": "--zookeeper",
    "zookeeperServers": "--zookeeper",
    "configurationMetadataStoreUrl": "--zookeeper (one store for everything)",
    "configurationStoreServers": "--zookeeper (one store for everything)",
    "brokerServicePort": "--base-port",
    "webServicePort": "--base-web-port",
    "brokerServicePortTls": "nothing: the members listen in plaintext on loopback",
    "webServicePortTls": "nothing: the members listen in plaintext on loopback",
    "brokerClientTlsEnabled": "nothing: the members listen in plaintext on loopback",
    "dataDir": "--data-dir",
    "advertisedAddress": "nothing: the members advertise 127.0.0.1",
    "bindAddress": "nothing: the members listen on 127.0.0.1",
}
_KEY = re.compile(r"\s*([^=:\s]+)\s*[=:]")


class _StopRequested(Exception):
    """SIGINT or SIGTERM arrived: stop the cluster."""


class UsageError(ValueError):
    """An argument or the configuration cannot start the cluster (exit status 2)."""


def add_cluster_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``quasar cluster up`` on ``quasar``'s subparsers."""
    cluster = commands.add_parser(
        "cluster", parents=parents, help="run a cluster on this machine (cluster up)"
    )
    actions = cluster.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    up = actions.add_parser(
        "up", parents=parents,
        help="start ZooKeeper and N brokers here and run them in the foreground",
    )
    up.add_argument("--brokers", type=int, default=1, help="members to start (default 1)")
    up.add_argument(
        "--data-dir", default=DEFAULT_DATA_DIR, metavar="DIR",
        help=f"ZooKeeper's data, the members' shared data and the logs (default "
        f"./{DEFAULT_DATA_DIR})",
    )
    up.add_argument(
        "--zookeeper", metavar="zk:HOST:PORT[/CHROOT]",
        help="use this ZooKeeper instead of starting one (default chroot /quasar/CLUSTER)",
    )
    up.add_argument(
        "--zookeeper-port", type=int, default=2181,
        help="the port of the ZooKeeper server started here (default 2181)",
    )
    up.add_argument("--cluster", default=DEFAULT_CLUSTER, help="clusterName (default local)")
    up.add_argument(
        "--base-port", type=int, default=6650,
        help="member i's brokerServicePort is BASE+i (default 6650)",
    )
    up.add_argument(
        "--base-web-port", type=int, default=8080,
        help="member i's webServicePort is BASE+i (default 8080)",
    )
    up.add_argument("--config", metavar="FILE", help="broker.conf keys for every member")
    up.add_argument(
        "--set", dest="settings", metavar="KEY=VALUE", action="append", default=[],
        help="one broker.conf key for every member (repeatable)",
    )
    up.add_argument(
        "--transaction-coordinators", type=int, default=DEFAULT_TRANSACTION_COORDINATORS,
        help="partitions of the coordinators' assign topic, when the cluster is new "
        f"(default {DEFAULT_TRANSACTION_COORDINATORS})",
    )


def run_cluster(args: argparse.Namespace) -> int:
    """Run ``quasar cluster up`` until a signal; the exit status."""
    try:
        cluster, metadata_url = _plan(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    previous = {
        sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        return _run(args, cluster, metadata_url)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _StopRequested(signal.Signals(signum).name)


def _plan(args: argparse.Namespace) -> tuple[LocalCluster, str]:
    """The cluster the arguments describe, checked before anything starts.

    Raises:
        UsageError: a bad argument, a refused key, a port in use.
        RuntimeError: ZooKeeper cannot be started here (no Java or package).
    """
    if args.brokers < 1:
        raise UsageError(f"--brokers must be at least 1, got {args.brokers}")
    if args.transaction_coordinators < 1:
        raise UsageError("--transaction-coordinators must be at least 1")
    settings = _settings(args.settings)
    config_file = Path(args.config).resolve() if args.config else None
    _refuse_owned_keys(settings, config_file)
    data_dir = Path(args.data_dir).resolve()
    metadata_url = _metadata_url(args)
    own_settings = {"clusterName": args.cluster, "metadataStoreUrl": metadata_url}
    # A member would refuse the same configuration, N times over, after ZooKeeper
    # started: say it once, before anything starts.
    from quasar.server.cluster_broker import (
        ClusterConfigurationError,
        check_cluster_config,
    )

    try:
        check_cluster_config(ServiceConfiguration.load(
            config_file=config_file,
            overrides={**settings, **own_settings, "brokerServicePort": args.base_port,
                       "webServicePort": args.base_web_port},
        ))
    except (ValueError, OSError, ClusterConfigurationError) as exc:
        raise UsageError(str(exc)) from None
    ports = _ports(args)
    zookeeper = None
    if args.zookeeper is None:
        reason = missing_reason()
        if reason is not None:
            raise RuntimeError(f"cannot start ZooKeeper: {reason}")
        zookeeper = ZooKeeperServer(
            data_dir / "zookeeper", args.zookeeper_port,
            log_path=data_dir / "logs" / "zookeeper.log", new_session=True,
            die_with_parent=True,
        )
    members = [
        BrokerMember(
            i, data_dir / "data", port, web_port,
            log_path=data_dir / "logs" / f"broker-{i}.log",
            settings={**settings, **own_settings}, config_file=config_file,
            new_session=True, die_with_parent=True,
        )
        for i, (port, web_port) in enumerate(ports)
    ]
    return LocalCluster(members, zookeeper), metadata_url


def _settings(pairs: list[str]) -> dict[str, str]:
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set expects KEY=VALUE, got {pair!r}")
        settings[key.strip()] = value.strip()
    return settings


def _refuse_owned_keys(settings: dict[str, str], config_file: Path | None) -> None:
    named = [(key, "--set") for key in settings]
    if config_file is not None:
        try:
            lines = config_file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UsageError(f"cannot read --config: {exc}") from None
        for line in lines:
            match = _KEY.match(line)
            if match and not line.lstrip().startswith(("#", "!")):
                named.append((match.group(1), str(config_file)))
    for key, where in named:
        if key in OWNED_KEYS:
            raise UsageError(
                f"{key} (in {where}) is set by quasar cluster up for every member; "
                f"use {OWNED_KEYS[key]}"
            )


def _metadata_url(args: argparse.Namespace) -> str:
    if args.zookeeper is None:
        if not 0 < args.zookeeper_port < 65536:
            raise UsageError(f"--zookeeper-port {args.zookeeper_port} is not a port")
        return f"zk:127.0.0.1:{args.zookeeper_port}/quasar/{args.cluster}"
    if not args.zookeeper.startswith("zk:"):
        raise UsageError(f"--zookeeper expects zk:host:port[/chroot], got {args.zookeeper!r}")
    try:
        url = parse_metadata_store_url(args.zookeeper)
    except ValueError as exc:
        raise UsageError(f"--zookeeper: {exc}") from None
    return str(url) if url.chroot else f"{url}/quasar/{args.cluster}"


def _ports(args: argparse.Namespace) -> list[tuple[int, int]]:
    """Each member's (binary, web) port, checked free and apart from each other."""
    binary = [args.base_port + i for i in range(args.brokers)]
    web = [args.base_web_port + i for i in range(args.brokers)]
    for flag, ports in (("--base-port", binary), ("--base-web-port", web)):
        if ports[0] < 1 or ports[-1] > 65535:
            raise UsageError(f"{flag} {ports[0]}: ports {ports[0]}-{ports[-1]} are not all ports")
    wanted = binary + web + ([] if args.zookeeper else [args.zookeeper_port])
    if len(set(wanted)) != len(wanted):
        raise UsageError(
            f"the ports overlap: brokers {binary[0]}-{binary[-1]}, web {web[0]}-{web[-1]}"
            + ("" if args.zookeeper else f", ZooKeeper {args.zookeeper_port}")
        )
    for port in wanted:
        if port_taken(port):
            raise UsageError(
                f"port {port} is in use on 127.0.0.1 (another broker, ZooKeeper or a "
                "previous quasar cluster up still running?); choose others with "
                "--base-port, --base-web-port or --zookeeper-port"
            )
    return list(zip(binary, web, strict=True))


def _run(args: argparse.Namespace, cluster: LocalCluster, metadata_url: str) -> int:
    status = 1
    try:
        try:
            _start(args, cluster, metadata_url)
        except (RuntimeError, TimeoutError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        _print_ready(args, cluster, metadata_url)
        status = _watch(cluster)
    except _StopRequested as exc:
        print(f"{exc}: stopping the cluster", flush=True)
        status = 0
    finally:
        # A second Ctrl-C must not cut the stop short and leave members running.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        status = _stop(cluster, status)
    return status


def _start(args: argparse.Namespace, cluster: LocalCluster, metadata_url: str) -> None:
    """Raises: RuntimeError or TimeoutError with what failed."""
    if cluster.zookeeper is not None:
        print(f"starting ZooKeeper on {cluster.zookeeper.connect_string}", flush=True)
        cluster.start_zookeeper(START_TIMEOUT_S)
        print(
            f"ZooKeeper {cluster.zookeeper.connect_string} (pid {cluster.zookeeper.pid}), "
            f"log {cluster.zookeeper.log_path}", flush=True,
        )
    _initialize(args, cluster, metadata_url)
    print(f"starting {len(cluster.members)} broker(s)", flush=True)
    cluster.start_members(START_TIMEOUT_S)


def _initialize(args: argparse.Namespace, cluster: LocalCluster, metadata_url: str) -> None:
    # Imported on use, as by `quasar initialize-cluster-metadata`: it loads the
    # storage and resources layers.
    from quasar.cli.cluster_init import run_initialize_cluster_metadata

    # The ZooKeeper client's connection notices would bury the command's output.
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    members = cluster.members
    init_args = argparse.Namespace(
        cluster=args.cluster, metadata_store=metadata_url, zookeeper=None,
        configuration_metadata_store=None, configuration_store=None,
        web_service_url="http://" + ",".join(
            f"{m.advertised_address}:{m.http_port}" for m in members
        ),
        web_service_url_tls=None,
        broker_service_url=_service_url(cluster), broker_service_url_tls=None,
        initial_num_transaction_coordinators=args.transaction_coordinators,
        zookeeper_session_timeout_ms=30_000,
    )
    if run_initialize_cluster_metadata(init_args) != 0:
        raise RuntimeError(f"could not initialize cluster {args.cluster} in {metadata_url}")


def _service_url(cluster: LocalCluster) -> str:
    return "pulsar://" + ",".join(m.address for m in cluster.members)


def _print_ready(args: argparse.Namespace, cluster: LocalCluster, metadata_url: str) -> None:
    for m in cluster.members:
        print(f"{m.name}: {m.url} admin {m.admin_url} (pid {m.pid}), log {m.log_path}")
    print(f"metadata store: {metadata_url}")
    print(f"data directory: {cluster.members[0].data_dir}")
    print(f"service URL: {_service_url(cluster)}")
    print("admin URLs: " + " ".join(m.admin_url for m in cluster.members))
    print(
        f"ready: cluster {args.cluster} with {len(cluster.members)} broker(s); "
        "Ctrl-C stops it", flush=True,
    )


def _watch(cluster: LocalCluster) -> int:
    """Wait until a process of the cluster exits (a signal ends the wait first)."""
    while (gone := cluster.exited()) is None:
        time.sleep(WATCH_INTERVAL_S)  # the polling interval of an unbounded watch
    assert gone.proc is not None
    print(
        f"error: {gone.name} (pid {gone.pid}) exited unexpectedly with status "
        f"{gone.proc.returncode}; the last lines of {gone.log_path}:\n"
        f"{gone.log_tail(LOG_TAIL_LINES)}",
        file=sys.stderr, flush=True,
    )
    return 1


def _stop(cluster: LocalCluster, status: int) -> int:
    """Stop the cluster; ``status``, or 1 if a process did not stop cleanly."""
    codes = cluster.stop(STOP_TIMEOUT_S)
    for name, code in codes.items():
        # A JVM ended by SIGTERM exits with 128 + 15 after its shutdown hooks ran.
        if code not in (0, -signal.SIGTERM, 128 + signal.SIGTERM) and status == 0:
            print(f"error: {name} exited with status {code} while stopping", file=sys.stderr)
            status = 1
    print("stopped", flush=True)
    return status
