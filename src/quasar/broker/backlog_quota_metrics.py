"""Pulsar's backlog-quota series of every loaded topic (a ``prometheus_client`` collector).

Labels ``cluster, namespace, topic``; all gauges, as Pulsar prints its topic series,
the eviction counter included:

* ``pulsar_storage_backlog_quota_limit``: the size quota in bytes (-1: none);
* ``pulsar_storage_backlog_quota_limit_time``: the age quota in seconds (-1: none);
* ``pulsar_storage_backlog_age_seconds``: age of the slowest subscription's oldest
  unacknowledged message at the last quota check;
* ``pulsar_storage_backlog_quota_exceeded_evictions_total{quota_type}``: evictions by
  ``consumer_backlog_eviction``, ``quota_type`` ``size`` or ``time``.

With ``exposeTopicLevelMetricsInPrometheus=false`` the series are per namespace
(labels ``cluster, namespace``), as the other topic series are: the largest limit and
backlog age of its topics, and the sum of their evictions.
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
        *,
        topic_level: bool = True,
    ) -> None:
        self._cluster = cluster
        self._topic_level = topic_level
        self._topics = topics
        self._quotas = quotas

    def collect(self) -> Iterator[Metric]:
        labels = _LABELS if self._topic_level else _LABELS[:2]
        limit = GaugeMetricFamily(
            "pulsar_storage_backlog_quota_limit",
            "Backlog size quota of the topic in bytes (-1: none)", labels=labels,
        )
        limit_time = GaugeMetricFamily(
            "pulsar_storage_backlog_quota_limit_time",
            "Backlog age quota of the topic in seconds (-1: none)", labels=labels,
        )
        age = GaugeMetricFamily(
            "pulsar_storage_backlog_age_seconds",
            "Age of the oldest unacknowledged message of the slowest subscription",
            labels=labels,
        )
        evictions = GaugeMetricFamily(
            "pulsar_storage_backlog_quota_exceeded_evictions_total",
            "Backlog evictions by consumer_backlog_eviction",
            labels=(*labels, "quota_type"),
        )
        # Per topic, or per namespace: (limit, limit time, age, size and time evictions).
        rows: dict[tuple[str, ...], list[float]] = {}
        for topic in self._topics():
            name = topic.topic_name
            if is_system_topic(name):
                continue
            key = (self._cluster, name.namespace_name, name.full)[: len(labels)]
            quotas = self._quotas.quotas(topic)
            size = quotas.get(DESTINATION_STORAGE)
            time = quotas.get(MESSAGE_AGE)
            state = self._quotas.states.get(topic.name) or TopicQuotaState()
            values = [
                -1 if size is None else size.limit_size,
                -1 if time is None else time.limit_time,
                state.backlog_age_s,
                state.size_evictions,
                state.time_evictions,
            ]
            held = rows.get(key)
            if held is None:
                rows[key] = values
            else:
                rows[key] = [*(max(a, b) for a, b in zip(held[:3], values[:3], strict=True)),
                             held[3] + values[3], held[4] + values[4]]
        for key, (size_limit, time_limit, backlog_age, by_size, by_time) in rows.items():
            limit.add_metric(key, size_limit)
            limit_time.add_metric(key, time_limit)
            age.add_metric(key, backlog_age)
            evictions.add_metric([*key, "size"], by_size)
            evictions.add_metric([*key, "time"], by_time)
        yield limit
        yield limit_time
        yield age
        yield evictions
