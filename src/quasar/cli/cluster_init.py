"""The work of ``quasar initialize-cluster-metadata`` (``quasar.cli.cluster_metadata``
declares its arguments): open the stores the options name, create what is missing,
report what was created, or that nothing was.
"""

from __future__ import annotations

import argparse
import sys

from quasar.broker.transactions import TC_ASSIGN_TOPIC
from quasar.errors import AlreadyExistsError, QuasarError
from quasar.resources.clusters import ClusterData, ClusterResources
from quasar.resources.store import PulsarResources
from quasar.storage.api import MetadataStore
from quasar.storage.metadata.config import MetadataStoreConfig
from quasar.storage.metadata.factory import open_metadata_store

__all__ = ["initialize", "run_initialize_cluster_metadata"]

# Pulsar options that quasar refuses, and why.
_UNSUPPORTED = {
    "existing_bk_metadata_service_uri": "quasar stores ledgers itself (no BookKeeper)",
    "bookkeeper_metadata_service_uri": "quasar stores ledgers itself (no BookKeeper)",
    "initial_num_stream_storage_containers": "quasar has no BookKeeper stream storage",
    "proxy_url": "quasar has no proxy",
    "proxy_protocol": "quasar has no proxy",
}


def run_initialize_cluster_metadata(args: argparse.Namespace) -> int:
    """Run the command; 0 done (or nothing to do), 1 the store failed, 2 bad usage."""
    try:
        config = _store_config(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        store = open_metadata_store(config, data_dir=None)
    except QuasarError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        created, notes = initialize(store, args)
    except QuasarError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    where = config.metadata_url()
    for note in notes:
        print(note)
    if not created:
        print(f"cluster {args.cluster} is already initialized in {where}: nothing changed")
    else:
        for item in created:
            print(f"created {item}")
        print(f"cluster {args.cluster} initialized in {where}")
    return 0


def initialize(store: MetadataStore, args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Create what is missing; returns ``(created items, notes)``.

    Raises:
        QuasarError: the store failed (``MetadataError``) or a name is invalid.
    """
    created: list[str] = []
    notes: list[str] = []
    data = ClusterData(
        service_url=args.web_service_url,
        service_url_tls=args.web_service_url_tls,
        broker_service_url=args.broker_service_url,
        broker_service_url_tls=args.broker_service_url_tls,
    )
    clusters = ClusterResources(store)
    try:
        clusters.create(args.cluster, data)
        created.append(f"cluster {args.cluster}")
    except AlreadyExistsError:
        existing = clusters.get(args.cluster)
        if existing != data:
            notes.append(
                f"cluster {args.cluster} exists with other service URLs, left as it is: "
                f"{existing.to_json() if existing else {}}"
            )
    resources = PulsarResources(store)
    created += resources.bootstrap_standalone(args.cluster)
    wanted = args.initial_num_transaction_coordinators
    coordinators = resources.partitioned_topics.get(TC_ASSIGN_TOPIC)
    if coordinators is not None and coordinators.partitions != wanted:
        notes.append(
            f"partitioned topic {TC_ASSIGN_TOPIC} exists with "
            f"{coordinators.partitions} partitions, left as it is "
            f"(this run's --initial-num-transaction-coordinators is {wanted})"
        )
    if coordinators is None:
        try:
            resources.partitioned_topics.create(
                TC_ASSIGN_TOPIC, args.initial_num_transaction_coordinators
            )
            created.append(
                f"partitioned topic {TC_ASSIGN_TOPIC} "
                f"({args.initial_num_transaction_coordinators} partitions)"
            )
        except AlreadyExistsError:
            pass
    return created, notes


def _store_config(args: argparse.Namespace) -> MetadataStoreConfig:
    """The metadata store settings the options name.

    Raises:
        ValueError: a refused option, no metadata store, or a bad URL.
    """
    for attr, why in _UNSUPPORTED.items():
        if getattr(args, attr, None) is not None:
            option = "--" + attr.replace("_", "-")
            raise ValueError(f"{option} is not supported: {why}")
    if args.initial_num_transaction_coordinators < 1:
        raise ValueError("--initial-num-transaction-coordinators must be at least 1")
    metadata = args.metadata_store or (f"zk:{args.zookeeper}" if args.zookeeper else "")
    if not metadata:
        raise ValueError("--metadata-store is required (zk:host:port/chroot)")
    configuration = args.configuration_metadata_store or (
        f"zk:{args.configuration_store}" if args.configuration_store else ""
    )
    return MetadataStoreConfig(
        metadata_store_url=metadata,
        configuration_metadata_store_url=configuration,
        metadata_store_session_timeout_millis=args.zookeeper_session_timeout_ms,
    )
