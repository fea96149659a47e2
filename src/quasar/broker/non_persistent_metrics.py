"""The series of non-persistent topics on ``GET /metrics``.

Pulsar reports how many messages each subscription of a non-persistent topic drops
as ``pulsar_subscription_msg_drop_rate`` (messages per second over the last stats
period), labelled like the other subscription series. It is written only with
``exposeTopicLevelMetricsInPrometheus``, as the subscription series are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from quasar.config import MetricsConfig

from .non_persistent_topic import NonPersistentTopic

__all__ = ["NonPersistentMetricsCollector"]


class NonPersistentMetricsCollector(Collector):
    """``pulsar_subscription_msg_drop_rate`` of the loaded non-persistent topics."""

    def __init__(
        self,
        topics: Callable[[], Iterable[NonPersistentTopic]],
        cluster: str,
        settings: MetricsConfig,
    ) -> None:
        self._topics = topics
        self._cluster = cluster
        self._settings = settings

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        settings = self._settings
        if not settings.expose_topic_level_metrics_in_prometheus:
            return
        split = settings.split_topic_and_partition_label_in_prometheus
        names = ["cluster", "namespace", "topic", "subscription"]
        if split:
            names.insert(3, "partition")
        drop_rate = GaugeMetricFamily(
            "pulsar_subscription_msg_drop_rate",
            "Messages dropped per second on a non-persistent subscription",
            labels=names,
        )
        for topic in list(self._topics()):
            name = topic.topic_name
            labels = [self._cluster, name.namespace_name]
            if split:
                labels += [
                    name.base.full if name.is_partition else name.full,
                    str(name.partition_index if name.is_partition else -1),
                ]
            else:
                labels.append(name.full)
            for sub_name, sub in list(topic.subscriptions.items()):
                drop_rate.add_metric([*labels, sub_name], sub.rate_drop.msg_rate)
        yield drop_rate
