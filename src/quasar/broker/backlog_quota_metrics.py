"""Pulsar's backlog-quota series of every loaded topic (a ``prometheus_client`` collector).

Labels ``cluster, namespace, topic``; all gauges, as Pulsar prints its topic series,
the eviction counter included:

* ``pulsar_storage_backlog_quota_limit``: the size quota in bytes (-1: none);
* ``pulsar_storage_backlog_quota_limit_time``: the age quota in seconds (-1: none);
* ``pulsar_storage_backlog_age_seconds``: age of the slowest subscription's oldest
  unacknowledged message at the last quota check;
* ``pulsar_storage_backlog_quota_exceeded_evictions_total{quota_type}``: evictions by
  ``consumer_backlog_eviction``, ``quota_type`` ``size`` or ``time``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from quasar.protocol.topic_name import is_system_topic

from .backlog_quota import (
    DESTINATION_STORAGE,
    MESSAGE_AGE,
    BacklogQuotaManager,
    TopicQuotaState,
)
from .topic import PersistentTopic

__all__ = ["BacklogQuotaMetrics"]

_LABELS = ("cluster", "namespace", "topic")


class BacklogQuotaMetrics(Collector):
    def __init__(
        self,
        cluster: str,
        topics: Callable[[], list[PersistentTopic]],
        quotas: BacklogQuotaManager,
    ) -> None:
        self._cluster = cluster
        self._topics = topics
        self._quotas = quotas

    def collect(self) -> Iterator[Metric]:
        limit = GaugeMetricFamily(
            "pulsar_storage_backlog_quota_limit",
            "Backlog size quota of the topic in bytes (-1: none)", labels=_LABELS,
        )
        limit_time = GaugeMetricFamily(
            "pulsar_storage_backlog_quota_limit_time",
            "Backlog age quota of the topic in seconds (-1: none)", labels=_LABELS,
        )
        age = GaugeMetricFamily(
            "pulsar_storage_backlog_age_seconds",
            "Age of the oldest unacknowledged message of the slowest subscription",
            labels=_LABELS,
        )
        evictions = GaugeMetricFamily(
            "pulsar_storage_backlog_quota_exceeded_evictions_total",
            "Backlog evictions by consumer_backlog_eviction",
            labels=(*_LABELS, "quota_type"),
        )
        for topic in self._topics():
            name = topic.topic_name
            if is_system_topic(name):
                continue
            labels = [self._cluster, name.namespace_name, name.full]
            quotas = self._quotas.quotas(topic)
            size = quotas.get(DESTINATION_STORAGE)
            time = quotas.get(MESSAGE_AGE)
            limit.add_metric(labels, -1 if size is None else size.limit_size)
            limit_time.add_metric(labels, -1 if time is None else time.limit_time)
            state = self._quotas.states.get(topic.name) or TopicQuotaState()
            age.add_metric(labels, state.backlog_age_s)
            evictions.add_metric([*labels, "size"], state.size_evictions)
            evictions.add_metric([*labels, "time"], state.time_evictions)
        yield limit
        yield limit_time
        yield age
        yield evictions
