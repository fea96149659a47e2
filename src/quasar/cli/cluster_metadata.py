"""``quasar initialize-cluster-metadata``: Pulsar's command of the same name.

Writes, into the metadata store (and the configuration store when one is given),
what a cluster needs before its first broker starts: the cluster record
(``/admin/clusters/<cluster>`` with its service URLs), the tenants ``public`` and
``pulsar``, the namespaces ``public/default`` and ``pulsar/system``, and the
partitioned-topic metadata of the transaction coordinators' assign topic
(``--initial-num-transaction-coordinators`` partitions, 16 as in Pulsar). Each item
is created only if missing, so a second run changes nothing and says so; an existing
cluster record is left as it is (a differing one is reported).

Pulsar's options for BookKeeper, stream storage and the proxy are accepted by name
and refused: quasar stores ledgers itself and has no proxy.

This module holds the arguments only (``quasar`` builds its parser on every start);
``quasar.cli.cluster_init`` does the work and is imported when the command runs.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["COMMAND", "DEFAULT_TRANSACTION_COORDINATORS", "add_cluster_metadata_parser"]

COMMAND = "initialize-cluster-metadata"
# Pulsar's default for --initial-num-transaction-coordinators.
DEFAULT_TRANSACTION_COORDINATORS = 16

def add_cluster_metadata_parser(
    commands: Any, parents: list[argparse.ArgumentParser]
) -> None:
    """Register the subcommand on ``quasar``'s subparsers."""
    p = commands.add_parser(
        COMMAND, parents=parents,
        help="write a new cluster's metadata into ZooKeeper (Pulsar's command)",
    )
    p.add_argument("-c", "--cluster", required=True, help="cluster name")
    p.add_argument("-md", "--metadata-store", help="metadata store URL (zk:host:port/chroot)")
    p.add_argument("-zk", "--zookeeper", help="ZooKeeper connect string (deprecated)")
    p.add_argument(
        "-cms", "--configuration-metadata-store",
        help="configuration metadata store URL (default: the metadata store)",
    )
    p.add_argument(
        "-cs", "--configuration-store", help="configuration store connect string (deprecated)"
    )
    p.add_argument("-uw", "--web-service-url", help="web service URL (http://)")
    p.add_argument("-tw", "--web-service-url-tls", help="web service URL with TLS (https://)")
    p.add_argument("-ub", "--broker-service-url", help="broker service URL (pulsar://)")
    p.add_argument(
        "-tb", "--broker-service-url-tls", help="broker service URL with TLS (pulsar+ssl://)"
    )
    p.add_argument(
        "--initial-num-transaction-coordinators", type=int,
        default=DEFAULT_TRANSACTION_COORDINATORS,
        help=f"transaction coordinators of the cluster (default {DEFAULT_TRANSACTION_COORDINATORS})",
    )
    p.add_argument(
        "--zookeeper-session-timeout-ms", type=int, default=30_000,
        help="ZooKeeper session timeout (default 30000)",
    )
    for option in ("--existing-bk-metadata-service-uri", "--bookkeeper-metadata-service-uri",
                   "--initial-num-stream-storage-containers", "--proxy-url",
                   "--proxy-protocol"):
        p.add_argument(option, help=argparse.SUPPRESS)
