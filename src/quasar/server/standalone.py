"""Standalone mode: one process with embedded storage, the binary port and the admin port.

Start-up order: metadata store → managed-ledger factory (with its group-commit writer
thread) → broker service → system tenants and namespaces → binary listener → admin
HTTP listener. Shutdown (SIGTERM/SIGINT) runs in reverse: stop accepting, close topics
(flushing cursors), stop the writer, close the metadata store.

A failed fsync is fatal: the storage layer calls ``on_fatal`` and the process exits
with status 70 without retrying, because after a failed fsync the kernel may have
dropped the dirty pages and nothing written since can be trusted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

from quasar.broker.service import BrokerService, BrokerSettings
from quasar.storage.api import ManagedLedgerConfig, RetentionPolicy

from .connection import ServerConnection

log = logging.getLogger("quasar.standalone")

EXIT_FATAL_STORAGE = 70


def settings_from_config(config: Any) -> BrokerSettings:
    """Pick the broker core's settings out of the service configuration."""

    def get(name: str, default: Any) -> Any:
        return getattr(config, name, default)

    d = BrokerSettings()
    ledger = ManagedLedgerConfig(
        max_entries_per_ledger=get(
            "managed_ledger_max_entries_per_ledger", d.ledger.max_entries_per_ledger
        ),
        max_size_per_ledger_mb=get(
            "managed_ledger_max_size_per_ledger_mbytes", d.ledger.max_size_per_ledger_mb
        ),
        max_ledger_rollover_time_minutes=get(
            "managed_ledger_max_ledger_rollover_time_minutes",
            d.ledger.max_ledger_rollover_time_minutes,
        ),
        min_ledger_rollover_time_minutes=get(
            "managed_ledger_min_ledger_rollover_time_minutes",
            d.ledger.min_ledger_rollover_time_minutes,
        ),
        retention=RetentionPolicy(
            get("default_retention_time_in_minutes", 0),
            get("default_retention_size_in_mb", 0),
        ),
        cursor_persist_interval_ms=int(
            1000 / max(get("managed_ledger_default_mark_delete_rate_limit", 1.0), 0.001)
        ),
    )
    return BrokerSettings(
        cluster_name=get("cluster_name", d.cluster_name),
        advertised_address=get("advertised_address", d.advertised_address),
        broker_service_port=get("broker_service_port", d.broker_service_port),
        web_service_port=get("web_service_port", d.web_service_port),
        max_message_size=get("max_message_size", d.max_message_size),
        allow_auto_topic_creation=get("allow_auto_topic_creation", d.allow_auto_topic_creation),
        allow_auto_topic_creation_type=get(
            "allow_auto_topic_creation_type", d.allow_auto_topic_creation_type
        ),
        default_num_partitions=get("default_num_partitions", d.default_num_partitions),
        broker_deduplication_enabled=get(
            "broker_deduplication_enabled", d.broker_deduplication_enabled
        ),
        max_unacked_messages_per_consumer=get(
            "max_unacked_messages_per_consumer", d.max_unacked_messages_per_consumer
        ),
        ledger=ledger,
    )


class Standalone:
    """The running standalone broker (also used by tests in-process)."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.settings = settings_from_config(config)
        self.data_dir = Path(getattr(config, "data_dir", "./data"))
        self.service: BrokerService | None = None
        self._server: asyncio.base_events.Server | None = None
        self._admin_runner: Any = None
        self._stopped = asyncio.Event()
        self._store: Any = None
        self._ledgers: Any = None

    def _on_fatal(self, exc: BaseException) -> None:
        log.critical("fatal storage error, stopping without retry: %s", exc)
        logging.shutdown()
        os._exit(EXIT_FATAL_STORAGE)

    async def start(self) -> None:
        from quasar.storage import FileManagedLedgerFactory, SqliteMetadataStore

        self.data_dir.mkdir(parents=True, exist_ok=True)
        get = lambda n, d: getattr(self.config, n, d)  # noqa: E731
        self._store = SqliteMetadataStore(str(self.data_dir / "metadata.db"))
        self._ledgers = FileManagedLedgerFactory(
            str(self.data_dir / "ledgers"),
            self._store,
            journal_sync_data=get("journal_sync_data", True),
            journal_max_group_wait_ms=get("journal_max_group_wait_msec", 1),
            journal_buffered_writes_threshold_bytes=get(
                "journal_buffered_writes_threshold", 512 * 1024
            ),
            cache_size_bytes_max=get("managed_ledger_cache_size_mb", 64) * 1024 * 1024,
            on_fatal=self._on_fatal,
        )
        self.service = BrokerService(self.settings, self._ledgers, self._store)
        self._create_system_namespaces()
        loop = asyncio.get_running_loop()
        bind = get("bind_address", "0.0.0.0")
        max_pending = get("max_pending_publish_requests_per_connection", 1000)
        service = self.service
        self._server = await loop.create_server(
            lambda: ServerConnection(service, max_pending),
            host=bind,
            port=self.settings.broker_service_port,
            reuse_address=True,
        )
        await self._start_admin(bind)
        log.info(
            "quasar standalone ready: %s (admin %s), data in %s",
            self.settings.broker_service_url,
            self.settings.web_service_url,
            self.data_dir.resolve(),
        )

    def _create_system_namespaces(self) -> None:
        assert self.service is not None
        self.service.resources.bootstrap_standalone(self.settings.cluster_name)

    async def _start_admin(self, bind: str) -> None:
        try:
            from aiohttp import web

            from quasar.admin import create_admin_app
            from quasar.broker.admin_adapter import AdminAdapter
        except ImportError as e:  # admin package not present: binary port only
            log.warning("admin API unavailable: %s", e)
            return
        assert self.service is not None
        app = create_admin_app(AdminAdapter(self.service))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, bind, self.settings.web_service_port, reuse_address=True)
        await site.start()
        self._admin_runner = runner

    async def stop(self) -> None:
        log.info("shutting down")
        if self._server is not None:
            self._server.close()
        if self._admin_runner is not None:
            await self._admin_runner.cleanup()
        if self.service is not None:
            await self.service.close()
        if self._ledgers is not None:
            await self._ledgers.close()
        if self._store is not None:
            self._store.close()
        self._stopped.set()
        log.info("stopped")

    async def run_until_signal(self) -> None:
        await self.start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await self.stop()


def run(config: Any) -> None:
    """Run the standalone broker in the foreground until SIGTERM/SIGINT."""
    try:
        import uvloop
    except ImportError:  # uvloop is optional: plain asyncio works, only slower
        asyncio.run(Standalone(config).run_until_signal())
        return
    uvloop.run(Standalone(config).run_until_signal())
