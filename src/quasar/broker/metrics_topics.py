"""Pulsar's topic, subscription, namespace and broker series on ``GET /metrics``.

``TopicMetricsCollector`` is a ``prometheus_client`` collector: at each scrape it
walks the loaded topics once and builds every family from what the topics already
hold (counters, and the rates and storage buckets the stats updater refreshed), so
nothing is mirrored on the publish or dispatch path, and a broker with thousands of
topics pays one pass per scrape.

What it writes follows Pulsar's ``/metrics`` (``docs/operations.md`` lists every
series):

* every series is a gauge, ``*_total`` ones too, as Pulsar prints them;
* with ``exposeTopicLevelMetricsInPrometheus`` (the default) the topic series are
  labelled ``cluster, namespace, topic`` (with
  ``splitTopicAndPartitionLabelInPrometheus``, ``topic`` is the partitioned topic's
  name and ``partition`` the index, -1 for a topic that is not a partition), the
  subscription series add ``subscription``, and consumer and producer series are
  written when their keys are on; without it the same names are summed per
  namespace (labels ``cluster, namespace``) and no subscription, consumer or producer
  series are written;
* ``pulsar_topics_count`` per namespace, and the broker-wide ``pulsar_broker_*`` sums
  (label ``cluster``), are always written.

The broker's own system topics are loaded topics like any other and appear too,
as they do in Pulsar.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from quasar.config import MetricsConfig
from quasar.storage.stats_buckets import (
    ENTRY_LATENCY_BOUNDS_MS,
    ENTRY_SIZE_BOUNDS_BYTES,
    StatsBuckets,
    bucket_suffixes,
    size_bound_suffix,
)

from .stats_rates import average_msg_size
from .topic import PersistentTopic

__all__ = ["TopicMetricsCollector"]

Labels = dict[str, str]


def _bucket_names(
    prefix: str, bounds: Sequence[float], spell: Callable[[float], str] | None = None
) -> tuple[str, ...]:
    return (
        *(f"{prefix}_{suffix}" for suffix in bucket_suffixes(bounds, spell)),
        f"{prefix}_count",
        f"{prefix}_sum",
    )


WRITE_LATENCY_NAMES = _bucket_names("pulsar_storage_write_latency", ENTRY_LATENCY_BOUNDS_MS)
ENTRY_SIZE_NAMES = _bucket_names("pulsar_entry_size", ENTRY_SIZE_BOUNDS_BYTES, size_bound_suffix)

# The topic series, in the order ``_topic_values`` computes them.
TOPIC_SERIES: tuple[tuple[str, str], ...] = (
    ("pulsar_subscriptions_count", "Subscriptions of the topic"),
    ("pulsar_producers_count", "Producers connected to the topic"),
    ("pulsar_consumers_count", "Consumers connected to the topic"),
    ("pulsar_rate_in", "Messages published per second"),
    ("pulsar_rate_out", "Messages delivered per second, all subscriptions"),
    ("pulsar_throughput_in", "Bytes published per second"),
    ("pulsar_throughput_out", "Bytes delivered per second, all subscriptions"),
    ("pulsar_average_msg_size", "Average size in bytes of the messages published"),
    ("pulsar_in_messages_total", "Messages published"),
    ("pulsar_in_bytes_total", "Bytes published"),
    ("pulsar_out_messages_total", "Messages delivered"),
    ("pulsar_out_bytes_total", "Bytes delivered"),
    ("pulsar_storage_size", "Bytes the topic's ledgers hold"),
    ("pulsar_storage_logical_size", "Bytes the topic's ledgers hold (no replication)"),
    ("pulsar_storage_backlog_size", "Estimated bytes after the slowest subscription"),
    ("pulsar_storage_offloaded_size", "Bytes offloaded to tiered storage (none)"),
    ("pulsar_msg_backlog", "Entries not acknowledged, summed over the subscriptions"),
    ("pulsar_storage_write_rate", "Entries written to storage per second"),
    ("pulsar_storage_read_rate", "Entries read from storage per second"),
    ("pulsar_delayed_message_index_size_bytes",
     "Bytes of the subscriptions' delayed-delivery indexes (24 per message)"),
    *((n, "Add-entry latency in ms, last stats period (per bucket; _sum in ms)")
      for n in WRITE_LATENCY_NAMES),
    *((n, "Entry sizes in bytes, last stats period (per bucket; _sum in bytes)")
      for n in ENTRY_SIZE_NAMES),
)
_TOPIC_INDEX = {name: i for i, (name, _) in enumerate(TOPIC_SERIES)}
# A namespace's average message size is not the sum of its topics' averages.
_AVERAGE_MSG_SIZE = _TOPIC_INDEX["pulsar_average_msg_size"]
_RATE_IN = _TOPIC_INDEX["pulsar_rate_in"]
_THROUGHPUT_IN = _TOPIC_INDEX["pulsar_throughput_in"]

SUBSCRIPTION_SERIES: tuple[tuple[str, str], ...] = (
    ("pulsar_subscription_back_log", "Entries not acknowledged"),
    ("pulsar_subscription_back_log_no_delayed", "Entries not acknowledged, not delayed"),
    ("pulsar_subscription_msg_rate_out", "Messages delivered per second"),
    ("pulsar_subscription_msg_throughput_out", "Bytes delivered per second"),
    ("pulsar_subscription_unacked_messages", "Messages delivered and not acknowledged"),
    ("pulsar_subscription_consumers_count", "Consumers connected"),
    ("pulsar_subscription_msg_rate_redeliver", "Messages redelivered per second"),
    ("pulsar_subscription_blocked_on_unacked_messages",
     "1 if every consumer reached its unacked-messages limit"),
    ("pulsar_subscription_msg_rate_expired", "Messages expired per second"),
    ("pulsar_subscription_total_msg_expired", "Messages expired"),
    ("pulsar_subscription_delayed", "Messages held back until their delivery time"),
    # The topic families, written once more per subscription, as Pulsar does.
    ("pulsar_out_messages_total", "Messages delivered"),
    ("pulsar_out_bytes_total", "Bytes delivered"),
)

CONSUMER_SERIES: tuple[tuple[str, str], ...] = (
    ("pulsar_consumer_msg_rate_out", "Messages delivered per second"),
    ("pulsar_consumer_msg_throughput_out", "Bytes delivered per second"),
    ("pulsar_consumer_msg_rate_redeliver", "Messages redelivered per second"),
    ("pulsar_consumer_unacked_messages", "Messages delivered and not acknowledged"),
    ("pulsar_consumer_blocked_on_unacked_messages",
     "1 if the consumer reached its unacked-messages limit"),
    ("pulsar_consumer_available_permits", "Permits the consumer has granted"),
)

PRODUCER_SERIES: tuple[tuple[str, str], ...] = (
    ("pulsar_producer_msg_rate_in", "Messages published per second"),
    ("pulsar_producer_msg_throughput_in", "Bytes published per second"),
    ("pulsar_producer_msg_average_Size", "Average size in bytes of the messages published"),
)

BROKER_SERIES: tuple[tuple[str, str], ...] = (
    ("pulsar_broker_topics_count", "Topics loaded on the broker"),
    ("pulsar_broker_subscriptions_count", "Subscriptions on the broker"),
    ("pulsar_broker_producers_count", "Producers connected to the broker"),
    ("pulsar_broker_consumers_count", "Consumers connected to the broker"),
    ("pulsar_broker_rate_in", "Messages published per second"),
    ("pulsar_broker_rate_out", "Messages delivered per second"),
    ("pulsar_broker_throughput_in", "Bytes published per second"),
    ("pulsar_broker_throughput_out", "Bytes delivered per second"),
    ("pulsar_broker_storage_size", "Bytes all topics' ledgers hold"),
    ("pulsar_broker_storage_logical_size", "Bytes all topics' ledgers hold"),
    ("pulsar_broker_storage_write_rate", "Entries written to storage per second"),
    ("pulsar_broker_storage_read_rate", "Entries read from storage per second"),
    ("pulsar_broker_msg_backlog", "Entries not acknowledged, all subscriptions"),
)
# The topic series each broker series after the topics count sums.
_BROKER_FROM_TOPIC = tuple(
    _TOPIC_INDEX[name.replace("pulsar_broker_", "pulsar_")]
    for name, _ in BROKER_SERIES[1:]
)


def _buckets(stats: StatsBuckets) -> list[float]:
    return [*stats.values, stats.count, stats.sum]


def _topic_values(topic: PersistentTopic) -> list[float]:
    msg_out = bytes_out = 0
    for sub in topic.subscriptions.values():
        m, b, _ = sub.out_counters()
        msg_out += m
        bytes_out += b
    ledger = topic.ledger
    size = ledger.total_size
    return [
        len(topic.subscriptions),
        len(topic.producers),
        topic.consumer_count(),
        topic.rate_in.msg_rate,
        topic.rate_out.msg_rate,
        topic.rate_in.byte_rate,
        topic.rate_out.byte_rate,
        average_msg_size(topic.rate_in),
        topic.msg_in,
        topic.bytes_in,
        msg_out,
        bytes_out,
        size,
        size,
        topic.backlog_size(),
        0,
        topic.msg_backlog(),
        topic.storage_write.msg_rate,
        topic.storage_read.msg_rate,
        topic.delayed_index_size_bytes(),
        *_buckets(ledger.stats.add_entry_latency_ms),
        *_buckets(ledger.stats.entry_size_bytes),
    ]


class _Gauge(Metric):
    """A gauge family that keeps its samples as ``(labels, value)`` pairs and builds
    ``prometheus_client`` samples only when an encoder reads them: the scrape reads
    the topics on the event loop, and the encoder, which runs in a worker thread
    (``quasar.metrics.http``), pays for the sample objects there."""

    def __init__(self, name: str, documentation: str) -> None:
        self.pairs: list[tuple[Labels, float]] = []
        super().__init__(name, documentation, "gauge")

    @property
    def samples(self) -> list[Sample]:
        name = self.name
        return [Sample(name, labels, value) for labels, value in self.pairs]

    @samples.setter
    def samples(self, samples: list[Sample]) -> None:
        self.pairs = [(s.labels, s.value) for s in samples]


class _Families:
    """Gauge families by name, in the order first asked for."""

    def __init__(self) -> None:
        self._by_name: dict[str, _Gauge] = {}

    def declare(self, series: Iterable[tuple[str, str]]) -> list[_Gauge]:
        out = []
        for name, doc in series:
            family = self._by_name.get(name)
            if family is None:
                family = self._by_name[name] = _Gauge(name, doc)
            out.append(family)
        return out

    @staticmethod
    def add(families: list[_Gauge], labels: Labels, values: Iterable[float]) -> None:
        for family, value in zip(families, values, strict=True):
            family.pairs.append((labels, float(value)))

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._by_name.values())


class _NamespaceSums(NamedTuple):
    topics: int
    values: list[float]


class TopicMetricsCollector(Collector):
    """The topic-derived series of one broker."""

    def __init__(
        self,
        topics: Callable[[], Iterable[PersistentTopic]],
        cluster: str,
        settings: MetricsConfig,
    ) -> None:
        """``topics``: the loaded topics at the time of the call."""
        self._topics = topics
        self._cluster = cluster
        self._settings = settings

    def describe(self) -> list[Metric]:
        # The names depend on the topics present; registering needs no check of them.
        return []

    def collect(self) -> Iterator[Metric]:
        settings = self._settings
        topic_level = settings.expose_topic_level_metrics_in_prometheus
        families = _Families()
        topic_families = families.declare(TOPIC_SERIES)
        sub_families = families.declare(SUBSCRIPTION_SERIES) if topic_level else []
        consumer_families = (
            families.declare(CONSUMER_SERIES)
            if topic_level and settings.expose_consumer_level_metrics_in_prometheus
            else []
        )
        producer_families = (
            families.declare(PRODUCER_SERIES)
            if topic_level and settings.expose_producer_level_metrics_in_prometheus
            else []
        )
        topics_count = families.declare([("pulsar_topics_count", "Topics loaded")])
        broker_families = families.declare(BROKER_SERIES)
        cluster = self._cluster
        namespaces: dict[str, _NamespaceSums] = {}
        broker = [0.0] * len(BROKER_SERIES)
        for topic in list(self._topics()):
            values = _topic_values(topic)
            namespace = topic.topic_name.namespace_name
            sums = namespaces.get(namespace)
            if sums is None:
                namespaces[namespace] = _NamespaceSums(1, list(values))
            else:
                namespaces[namespace] = _NamespaceSums(
                    sums.topics + 1, [a + b for a, b in zip(sums.values, values, strict=True)]
                )
            for i, index in enumerate(_BROKER_FROM_TOPIC, start=1):
                broker[i] += values[index]
            broker[0] += 1
            if not topic_level:
                continue
            labels = self._topic_labels(topic, cluster, namespace)
            families.add(topic_families, labels, values)
            self._add_subscriptions(families, sub_families, consumer_families, topic, labels)
            for producer in topic.producers.values() if producer_families else ():
                families.add(
                    producer_families,
                    {**labels, "producer_name": producer.producer_name,
                     "producer_id": str(producer.producer_id)},
                    (producer.rate_in.msg_rate, producer.rate_in.byte_rate,
                     average_msg_size(producer.rate_in)),
                )
        for namespace, sums in sorted(namespaces.items()):
            labels = {"cluster": cluster, "namespace": namespace}
            families.add(topics_count, labels, (sums.topics,))
            if not topic_level:
                values = sums.values
                # An average of a namespace is its throughput over its rate.
                rate_in = values[_RATE_IN]
                values[_AVERAGE_MSG_SIZE] = values[_THROUGHPUT_IN] / rate_in if rate_in else 0
                families.add(topic_families, labels, values)
        families.add(broker_families, {"cluster": cluster}, broker)
        yield from families

    def _topic_labels(self, topic: PersistentTopic, cluster: str, namespace: str) -> Labels:
        name = topic.topic_name
        if not self._settings.split_topic_and_partition_label_in_prometheus:
            return {"cluster": cluster, "namespace": namespace, "topic": name.full}
        return {
            "cluster": cluster,
            "namespace": namespace,
            "topic": name.base.full if name.is_partition else name.full,
            "partition": str(name.partition_index if name.is_partition else -1),
        }

    @staticmethod
    def _add_subscriptions(
        families: _Families,
        sub_families: list[_Gauge],
        consumer_families: list[_Gauge],
        topic: PersistentTopic,
        labels: Labels,
    ) -> None:
        for name, sub in topic.subscriptions.items():
            sub_labels = {**labels, "subscription": name}
            backlog = sub.backlog()
            delayed = sub.delayed_messages()
            msg_out, bytes_out, _ = sub.out_counters()
            families.add(
                sub_families,
                sub_labels,
                (
                    backlog,
                    max(backlog - delayed, 0),
                    sub.rate_out.msg_rate,
                    sub.rate_out.byte_rate,
                    sub.unacked_messages(),
                    sub.consumer_count,
                    sub.rate_redeliver.msg_rate,
                    1 if sub.blocked_on_unacked() else 0,
                    sub.rate_expired.msg_rate,
                    sub.total_msg_expired,
                    delayed,
                    msg_out,
                    bytes_out,
                ),
            )
            for c in sub.dispatcher.consumers if consumer_families and sub.dispatcher else ():
                families.add(
                    consumer_families,
                    {**sub_labels, "consumer_name": c.consumer_name,
                     "consumer_id": str(c.consumer_id)},
                    (
                        c.rate_out.msg_rate,
                        c.rate_out.byte_rate,
                        c.rate_redeliver.msg_rate,
                        c.unacked_messages,
                        1 if c.blocked_on_unacked else 0,
                        c.permits,
                    ),
                )
