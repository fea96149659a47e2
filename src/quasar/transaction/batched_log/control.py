"""``BatchedLogControl``: the run-time switch and status of one kind of batched log.

A broker has two: one for its coordinator logs, one for its pending-ack logs. Each
holds the configured thresholds, the current on/off switch (PIP-160 makes it dynamic:
the admin API flips it without a restart; the configuration key decides it at the
next start), the metrics the writers record, and the writers alive now, so the
switch reaches them and the admin status can list them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from prometheus_client.registry import CollectorRegistry

from quasar.clock import Clock
from quasar.storage.api import ManagedLedger

from ..scheduler import Scheduler
from .config import BatchedWriteConfig
from .metrics import BatchedLogMetrics, coordinator_log_metrics, pending_ack_log_metrics
from .writer import TxnLogBufferedWriter

T = TypeVar("T")


class BatchedLogControl:
    """Settings, switch, metrics and live writers of one kind of log."""

    def __init__(
        self,
        settings: BatchedWriteConfig,
        metrics: BatchedLogMetrics,
        *,
        cluster: str,
        per_writer_labels: bool,
    ) -> None:
        self._settings = settings
        self.metrics = metrics
        self.cluster = cluster
        self._per_writer_labels = per_writer_labels
        self._writers: weakref.WeakValueDictionary[str, TxnLogBufferedWriter[object]] = (
            weakref.WeakValueDictionary()
        )

    @property
    def settings(self) -> BatchedWriteConfig:
        return self._settings

    @property
    def enabled(self) -> bool:
        return self._settings.enabled

    def set_enabled(self, enabled: bool) -> None:
        """Switch batching for every writer alive now and every later one."""
        self._settings = replace(self._settings, enabled=enabled)
        for writer in list(self._writers.values()):
            writer.set_enabled(enabled)

    def status(self) -> list[tuple[str, bool]]:
        """``(writer name, batching on)`` of every live writer, sorted by name."""
        return sorted((name, w.enabled) for name, w in list(self._writers.items()))

    def new_writer(
        self,
        ledger: ManagedLedger,
        name: str,
        encode: Callable[[T], bytes],
        *,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
    ) -> TxnLogBufferedWriter[T]:
        """A writer following this switch; it leaves the status when it closes."""
        labels = (self.cluster, name) if self._per_writer_labels else (self.cluster,)
        writer: TxnLogBufferedWriter[T] = TxnLogBufferedWriter(
            ledger,
            encode,
            self._settings,
            scheduler=scheduler,
            clock=clock,
            stats=self.metrics.child(*labels),
            name=name,
            on_close=self._closed,
        )
        self._writers[name] = writer  # type: ignore[assignment]
        return writer

    def _closed(self, writer: TxnLogBufferedWriter[T]) -> None:
        if self._writers.get(writer.name) is writer:
            del self._writers[writer.name]
            if self._per_writer_labels:
                self.metrics.remove(self.cluster, writer.name)


class BatchedLogs:
    """The broker's two controls, and their metrics in a registry."""

    def __init__(
        self,
        log_settings: BatchedWriteConfig,
        pending_ack_settings: BatchedWriteConfig,
        *,
        cluster: str,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.coordinator = BatchedLogControl(
            log_settings, coordinator_log_metrics(), cluster=cluster, per_writer_labels=True
        )
        self.pending_ack = BatchedLogControl(
            pending_ack_settings, pending_ack_log_metrics(), cluster=cluster,
            per_writer_labels=False,
        )
        self._registry = registry
        if registry is not None:
            registry.register(self.coordinator.metrics)
            registry.register(self.pending_ack.metrics)

    def close(self) -> None:
        """Take the metrics out of the registry."""
        if self._registry is not None:
            self._registry.unregister(self.coordinator.metrics)
            self._registry.unregister(self.pending_ack.metrics)
            self._registry = None
