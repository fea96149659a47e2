"""A quasar cluster for tests: ZooKeeper and several ``quasar broker`` processes.

``ClusterProcess`` initializes the cluster's metadata in ZooKeeper
(``quasar initialize-cluster-metadata``, under a chroot of its own), then starts
``brokers`` cluster members on free loopback ports, all sharing one data directory
as brokers on one host may. Each member is a ``BrokerProcess`` running
``quasar broker``; they are killed (SIGKILL), stopped (SIGTERM), paused (SIGSTOP)
and resumed (SIGCONT) one by one. ``service_url`` names every broker
(``pulsar://h:p1,h:p2``), so a client carries on when one of them is gone.

The ZooKeeper server is passed in (tests share one, keeping apart by chroot) or
started here; ``session_timeout_ms`` is the members' ZooKeeper session timeout, short
in tests that wait for a dead broker's session to expire. ``tls_only`` gives every
member TLS ports only (``brokerServicePortTls``, ``webServicePortTls``; the
certificate settings go in ``settings``); ``service_url`` is then ``pulsar+ssl://``.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

from quasar.testing.process import BrokerProcess, free_port
from quasar.testing.zookeeper import ZooKeeperProcess

__all__ = ["ClusterProcess"]

_CHROOTS = itertools.count()


class ClusterProcess:
    """ZooKeeper (given or own) and ``brokers`` cluster members."""

    def __init__(
        self,
        work_dir: Path,
        zookeeper: ZooKeeperProcess | None = None,
        *,
        brokers: int = 2,
        cluster_name: str = "test-cluster",
        session_timeout_ms: int = 4000,
        settings: dict[str, str] | None = None,
        transaction_coordinators: int | None = None,
        tls_only: bool = False,
    ) -> None:
        """``transaction_coordinators``: the partitions of the coordinators' assign
        topic (``initialize-cluster-metadata``'s default when ``None``)."""
        self._coordinators = transaction_coordinators
        self.tls_only = tls_only
        self.work_dir = Path(work_dir)
        self._own_zookeeper = zookeeper is None
        self.zookeeper = zookeeper or ZooKeeperProcess(self.work_dir / "zookeeper")
        self.cluster_name = cluster_name
        self.chroot = f"/cluster-{os.getpid()}-{next(_CHROOTS)}"
        self.data_dir = self.work_dir / "data"
        settings = {
            "clusterName": cluster_name,
            "metadataStoreSessionTimeoutMillis": str(session_timeout_ms),
            "metadataStoreOperationTimeoutSeconds": "10",
            # Load reports every second, so load-manager choices see fresh counts.
            "loadBalancerReportUpdateMinIntervalMillis": "1000",
            **(settings or {}),
        }
        self.brokers = [
            BrokerProcess(
                self.data_dir,
                settings=dict(settings),
                command="broker",
                log_path=self.work_dir / f"broker-{i}.log",
                tls_port=free_port() if tls_only else None,
                https_port=free_port() if tls_only else None,
                plaintext=not tls_only,
            )
            for i in range(brokers)
        ]

    @property
    def metadata_store_url(self) -> str:
        return self.zookeeper.url(self.chroot)

    @property
    def service_url(self) -> str:
        """Every broker's binary address in one Pulsar service URL."""
        if self.tls_only:
            return "pulsar+ssl://" + ",".join(
                f"localhost:{b.tls_port}" for b in self.brokers
            )
        return "pulsar://" + ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    def broker_id(self, broker: BrokerProcess) -> str:
        """Pulsar's broker id of a member: advertisedAddress:webServicePort (the TLS
        one when it has no plaintext port)."""
        port = broker.https_port if self.tls_only else broker.http_port
        return f"{broker.advertised_address}:{port}"

    def start(self, ready_timeout_s: float = 60.0) -> ClusterProcess:
        if self._own_zookeeper:
            self.zookeeper.start()
        first = self.brokers[0]
        coordinators = (
            [] if self._coordinators is None
            else ["--initial-num-transaction-coordinators", str(self._coordinators)]
        )
        subprocess.run(
            [
                sys.executable, "-m", "quasar.cli.main", "initialize-cluster-metadata",
                "--cluster", self.cluster_name,
                "--metadata-store", self.metadata_store_url,
                *(
                    ["--web-service-url-tls", first.https_url,
                     "--broker-service-url-tls", first.tls_url]
                    if self.tls_only
                    else ["--web-service-url", first.admin_url,
                          "--broker-service-url", first.url]
                ),
                *coordinators,
            ],
            check=True, capture_output=True, timeout=ready_timeout_s,
        )
        for broker in self.brokers:
            broker.settings["metadataStoreUrl"] = self.metadata_store_url
        try:
            for broker in self.brokers:
                broker.start(ready_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def pause(self, broker: BrokerProcess) -> None:
        """SIGSTOP: the broker stops answering anyone, ZooKeeper included."""
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGSTOP)

    def resume(self, broker: BrokerProcess) -> None:
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        for broker in self.brokers:
            if broker.proc is not None and broker.proc.poll() is None:
                broker.proc.send_signal(signal.SIGCONT)  # a paused one cannot exit
            broker.stop()
        if self._own_zookeeper:
            self.zookeeper.stop()

    def __enter__(self) -> ClusterProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
