"""Standalone mode: one process with embedded storage, the binary port and the admin port.

Start-up order: TLS context (a bad certificate stops here) → metadata store →
managed-ledger factory (with its group-commit writer thread) → broker service → system
tenants and namespaces → admin HTTP(S) listeners → binary TLS listener → binary
listener. Shutdown (SIGTERM/SIGINT) runs in reverse: stop accepting, close topics
(flushing cursors), stop the writer, close the metadata store.

A failed fsync is fatal: the storage layer calls ``on_fatal`` and the process exits
with status 70 without retrying, because after a failed fsync the kernel may have
dropped the dirty pages and nothing written since can be trusted.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import os
import signal
import sys
from typing import Any

from quasar.auth import (
    AuthenticationConfigError,
    AuthenticationService,
    AuthorizationService,
)
from quasar.broker.dashboard import DashboardSnapshot
from quasar.broker.dynamic_config import DynamicConfiguration
from quasar.broker.health_check import HealthChecker
from quasar.broker.metrics_broker import BrokerMetrics
from quasar.broker.operations import BrokerOperations
from quasar.broker.service import BrokerService
from quasar.broker.transactions import ClusterTransactionParts, TransactionService
from quasar.broker.txn_metrics import register_transaction_metrics
from quasar.config import ServiceConfiguration
from quasar.errors import MetadataError
from quasar.metrics import broker_registry
from quasar.native import log_native_extensions
from quasar.storage import FileManagedLedgerFactory
from quasar.storage.disk_space import DiskSpace
from quasar.storage.metadata.factory import describe, open_metadata_store

from .connection import ServerConnection
from .dynamic_settings import register_dynamic_settings
from .limits import ConnectionLimits
from .tls import ServerTls, TlsConfigurationError, TlsHandshake

log = logging.getLogger("quasar.standalone")

EXIT_FATAL_STORAGE = 70


class Standalone:
    """The running standalone broker (also used by tests in-process)."""

    # The command it runs as, in the start-up log line.
    command = "standalone"

    def __init__(self, config: ServiceConfiguration) -> None:
        self.config = config
        self.data_dir = config.broker.data_path
        self.service: BrokerService | None = None
        # Life-cycle state, health check and dynamic configuration (/admin/v2/brokers).
        self.operations: BrokerOperations | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._admin_runner: Any = None
        # This broker's /metrics (not prometheus_client's process-global default).
        self.metrics = broker_registry()
        # What all binary connections may hold together, and the refusals counted.
        self.limits = ConnectionLimits(config.broker, self.metrics)
        # The TLS listeners' shared context, built before anything starts so that a
        # bad certificate is a start-up error (TlsConfigurationError).
        self.tls: ServerTls | None = None
        if self._tls_on(config):
            self.tls = ServerTls(config.tls, registry=self.metrics)
        self._tls_checks: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self._store: Any = None
        self._ledgers: Any = None
        self.broker_metrics: BrokerMetrics | None = None
        # Built before anything is opened: a bad authentication configuration (an
        # unknown provider class, an unreadable htpasswd file) stops start-up here.
        self.authentication = AuthenticationService.from_config(config, self.metrics)

    def _on_fatal(self, exc: BaseException) -> None:
        log.critical("fatal storage error, stopping without retry: %s", exc)
        logging.shutdown()
        os._exit(EXIT_FATAL_STORAGE)

    async def start(self) -> None:
        log_native_extensions(log)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Full-disk refusals of both stores (quasar_storage_disk_full_total and
        # quasar_storage_writable).
        disk_space = DiskSpace()
        self.metrics.register(disk_space)
        # SQLite in the data directory, or ZooKeeper (metadataStoreUrl).
        self._store = open_metadata_store(
            self.config.metadata_store, self.data_dir, disk_space=disk_space
        )
        self._ledgers = FileManagedLedgerFactory(
            str(self.data_dir / "ledgers"),
            self._store,
            journal=self.config.journal,
            cache_size_bytes_max=self.config.managed_ledger.managed_ledger_cache_size_bytes,
            on_fatal=self._on_fatal,
            disk_space=disk_space,
            lock_file=self._data_dir_lock(),
            shared=self._data_dir_shared(),
        )
        self.service = BrokerService(
            self.config, self._ledgers, self._store, metrics=self.metrics
        )
        self.authorization = AuthorizationService(
            self.config.authorization, self.service.resources
        )
        self._create_system_namespaces()
        self._start_transactions()
        # Rates and storage buckets for the topic stats and /metrics.
        self.broker_metrics = BrokerMetrics(
            self.service, self.config.metrics, self.metrics, self._ledgers.fsync_latency()
        )
        self.broker_metrics.start()
        self.operations = self._broker_operations()
        self.service.start_namespace_policy_checks()
        loop = asyncio.get_running_loop()
        broker = self.config.broker
        bind = broker.bind_address
        warn_if_exposed(bind, self.authentication is not None)
        max_pending = broker.max_pending_publish_requests_per_connection
        keep_alive_s = broker.keep_alive_interval_seconds
        service = self.service
        authentication = self.authentication
        authorization = self.authorization
        limits = self.limits

        def connection() -> ServerConnection:
            return ServerConnection(
                service, max_pending, keep_alive_s, authentication, authorization, limits,
                refusals=service.refusals,
            )

        self._before_listening()
        # Admin first, then the TLS port, then the plain one: once the last binary
        # port accepts, the whole broker is ready.
        await self._start_admin(bind)
        if self.tls is not None:
            self._tls_checks = loop.create_task(self.tls.run_checks())
        if broker.broker_service_port_tls is not None:
            tls = self.tls
            assert tls is not None
            self._servers.append(
                await loop.create_server(
                    lambda: TlsHandshake(tls, connection(), "pulsar+ssl"),
                    host=bind,
                    port=broker.broker_service_port_tls,
                    reuse_address=True,
                )
            )
        if broker.broker_service_port is not None:
            self._servers.append(
                await loop.create_server(
                    connection, host=bind, port=broker.broker_service_port,
                    reuse_address=True,
                )
            )
        self.operations.mark_ready()
        tune_gc()
        urls = [
            broker.broker_service_url,
            broker.broker_service_url_tls,
            broker.web_service_url,
            broker.web_service_url_tls,
        ]
        log.info(
            "quasar %s ready: %s, data in %s, metadata in %s",
            self.command,
            ", ".join(u for u in urls if u is not None),
            self.data_dir.resolve(),
            describe(self.config.metadata_store, self.data_dir),
        )

    def _data_dir_lock(self) -> str:
        """The data directory's lock file: one standalone broker per directory."""
        return "LOCK"

    def _data_dir_shared(self) -> bool:
        """Whether other brokers write ledgers in the data directory (no: the lock
        keeps it to this one), so ledgers are fenced on ownership changes."""
        return False

    def _before_listening(self) -> None:
        """Runs once the broker service is built, before any port listens (a cluster
        member registers here: ``quasar.server.cluster_broker``)."""

    def _admin_options(self) -> dict[str, Any]:
        """Extra ``create_admin_app`` arguments (a cluster member's redirects)."""
        return {}

    @staticmethod
    def _tls_on(config: ServiceConfiguration) -> bool:
        broker = config.broker
        return (
            broker.broker_service_port_tls is not None
            or broker.web_service_port_tls is not None
        )

    def _create_system_namespaces(self) -> None:
        assert self.service is not None
        self.service.resources.bootstrap_standalone(self.config.broker.cluster_name)

    def _start_transactions(self) -> None:
        txn = self.config.transaction
        if not txn.transaction_coordinator_enabled:
            return
        assert self.service is not None
        service = TransactionService(
            self.service, txn, metrics=self.metrics,
            batch_size_max=self.service.input_bounds.max_batch_records,
            cluster=self._transaction_cluster_parts(),
        )
        service.create_assign_topic()
        self.service.transactions = service
        register_transaction_metrics(self.metrics, self.service, service)

    def _transaction_cluster_parts(self) -> ClusterTransactionParts | None:
        """What a cluster member changes in the transaction service (none here)."""
        return None

    def _broker_operations(self) -> BrokerOperations:
        """The brokers admin API's view of this broker; applies the dynamic
        configuration stored by earlier runs."""
        assert self.service is not None
        broker = self.config.broker
        web_port = broker.web_service_port
        if web_port is None:
            web_port = broker.web_service_port_tls
        # Pulsar's broker id: the advertised address and the web service port.
        broker_id = f"{broker.advertised_address}:{web_port}"
        health = HealthChecker(self._ledgers, broker.cluster_name, broker_id)
        dynamic = DynamicConfiguration(self.config, self._store)
        register_dynamic_settings(dynamic, self.service, self.authorization)
        dynamic.load()
        return BrokerOperations(health, dynamic)

    def _dashboard(self) -> DashboardSnapshot:
        """What the web dashboard at ``/`` shows (``quasar.broker.dashboard``)."""
        assert self.service is not None and self.operations is not None
        metrics = self.broker_metrics
        assert metrics is not None
        counts = self.limits.counts
        return DashboardSnapshot(
            self.service, self.operations,
            connections=lambda: counts.active,
            stats_updates=lambda: metrics.updater.updates,
        )

    async def _start_admin(self, bind: str) -> None:
        try:
            from aiohttp import web

            from quasar.admin import create_admin_app
            from quasar.broker.admin_adapter import AdminAdapter
        except ImportError as e:  # admin package not present: binary port only
            log.warning("admin API unavailable: %s", e)
            return
        assert self.service is not None
        app = create_admin_app(
            AdminAdapter(self.service),
            metrics=self.metrics,
            authentication=self.authentication,
            authorization=self.authorization,
            authenticate_metrics=self.config.authentication.authenticate_metrics_endpoint,
            operations=self.operations,
            refusals=self.service.refusals,
            dashboard=self._dashboard(),
            **self._admin_options(),
        )
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self._admin_runner = runner
        broker = self.config.broker
        if broker.web_service_port is not None:
            site = web.TCPSite(runner, bind, broker.web_service_port, reuse_address=True)
            await site.start()
        if broker.web_service_port_tls is not None:
            # Served through TlsHandshake rather than aiohttp's own TLS site, so that
            # a refused handshake is logged and counted as on the binary TLS port.
            tls, http = self.tls, runner.server
            assert tls is not None and http is not None
            self._servers.append(
                await asyncio.get_running_loop().create_server(
                    lambda: TlsHandshake(tls, http(), "https"),
                    host=bind,
                    port=broker.web_service_port_tls,
                    reuse_address=True,
                )
            )

    async def stop(self) -> None:
        log.info("shutting down")
        if self.operations is not None:
            self.operations.mark_closing()
        for server in self._servers:
            server.close()
        if self._tls_checks is not None:
            self._tls_checks.cancel()
        if self._admin_runner is not None:
            await self._admin_runner.cleanup()
        if self.broker_metrics is not None:
            await self.broker_metrics.stop()
        if self.service is not None:
            await self.service.close()
        if self._ledgers is not None:
            await self._ledgers.close()
        if self._store is not None:
            self._store.close()
        self._stopped.set()
        log.info("stopped")

    async def run_until_signal(self) -> None:
        try:
            await self.start()
        except MetadataError as exc:
            # An unreachable ZooKeeper (metadataStoreUrl) or an unusable metadata.db
            # is a start-up error: one line and exit status 1, not a traceback.
            print(f"error: cannot open the metadata store: {exc}", file=sys.stderr)
            raise SystemExit(1) from None
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await self.stop()


# Cyclic-GC thresholds for the broker process. The defaults (700, 10, 10) run a young
# collection every 700 allocations and walk every long-lived object often; at 10k
# msg/s that cost the broker ~20% of its CPU and 25-150 ms pauses (measured with the
# perf tool). Broker objects are mostly acyclic, so rarer
# collections lose nothing; objects alive after start-up are frozen out of them.
# A young collection walks the young objects still alive, and a message's objects
# (its dispatch info, pending-ack entries, receipt callback) live until its ack, tens
# to hundreds of ms: at 20,000 every collection found ~20,000 of them alive and
# collected nothing, 4.5 % of the loop at 14k msg/s unbatched. At 200,000 most are
# gone by the time it runs (GC time per 23 s run: 1,050 ms -> 40 ms).
GC_THRESHOLDS = (200_000, 10, 1_000)


def tune_gc() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


# The storage writer thread needs the GIL back after every write/fsync, and while the
# event loop is busy a waiting thread gets it only when the switch interval (5 ms by
# default) runs out: each durable round of a busy broker waited that long again. At
# 0.5 ms the hand-over is prompt; the loop pays only when a thread is actually waiting.
GIL_SWITCH_INTERVAL_S = 0.0005


def warn_if_exposed(bind_address: str, authentication_enabled: bool) -> bool:
    """Log a warning when the broker listens beyond loopback without authentication
    (anyone who can reach the port may then produce, consume and administer).
    Returns whether it warned."""
    try:
        loopback = ipaddress.ip_address(bind_address).is_loopback
    except ValueError:  # a host name: only "localhost" is known to stay local
        loopback = bind_address == "localhost"
    if loopback or authentication_enabled:
        return False
    log.warning(
        "listening on %s with authentication off: anyone who can reach the broker's "
        "ports can produce, consume and use the admin API (set authenticationEnabled "
        "or bind to loopback)",
        bind_address,
    )
    return True


def run(config: ServiceConfiguration) -> None:
    """Run the standalone broker in the foreground until SIGTERM/SIGINT."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        standalone = Standalone(config)
    except (AuthenticationConfigError, TlsConfigurationError) as e:
        # A start-up error like a bad configuration value: one line, exit status 2.
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        import uvloop
    except ImportError:  # uvloop is optional: plain asyncio works, only slower
        asyncio.run(standalone.run_until_signal())
        return
    uvloop.run(standalone.run_until_signal())
