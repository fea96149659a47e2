"""One broker's topic stats machinery: the stats updater and the series it feeds.

``BrokerMetrics`` is what the composition root builds once the broker service
exists: it starts the periodic stats update (rates, storage buckets) and registers
the topic-derived collector and the storage fsync histogram in the broker's
registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from quasar.config import MetricsConfig

from .metrics_topics import TopicMetricsCollector
from .non_persistent_metrics import NonPersistentMetricsCollector
from .service import BrokerService
from .stats_updater import StatsUpdater
from .topic import PersistentTopic

__all__ = ["BrokerMetrics"]


class WithoutCreated(Collector):
    """A library metric without its ``_created`` samples (an OpenMetrics extra that
    Pulsar does not export, and that quasar's other series leave out too)."""

    def __init__(self, inner: Collector) -> None:
        self._inner = inner

    def collect(self) -> Iterator[Metric]:
        for family in self._inner.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


class BrokerMetrics:
    """The stats updater and the topic series of one broker."""

    def __init__(
        self,
        service: BrokerService,
        settings: MetricsConfig,
        registry: CollectorRegistry,
        fsync_latency: Collector | None = None,
    ) -> None:
        """``fsync_latency``: the storage's fsync histogram, when it has one (the
        file storage does; memory storage does not).

        Raises:
            ValueError: a collector's names are already registered in ``registry``.
        """

        def topics() -> Iterable[PersistentTopic]:
            return service.topics.values()

        self.updater = StatsUpdater(
            topics,
            settings.stats_update_frequency_in_secs,
            service.clock,
            also_refresh=service.non_persistent.refresh_rates,
        )
        registry.register(
            TopicMetricsCollector(topics, service.cluster_name, settings)
        )
        registry.register(
            NonPersistentMetricsCollector(
                lambda: service.non_persistent.topics.values(), service.cluster_name, settings
            )
        )
        if fsync_latency is not None:
            registry.register(WithoutCreated(fsync_latency))

    def start(self) -> None:
        self.updater.start()

    async def stop(self) -> None:
        await self.updater.stop()
