"""Transaction metrics: coordinators, transaction buffers and pending acks, Pulsar's names.

Per coordinator (labels ``cluster, coordinator_id``), printed as gauges as Pulsar
prints its coordinator series, ``*_total`` included::

    pulsar_txn_active_count                 live transactions (OPEN, COMMITTING, ABORTING)
    pulsar_txn_created_total                transactions opened (replayed ones included)
    pulsar_txn_committed_total              transactions committed
    pulsar_txn_aborted_total                transactions aborted (timeouts included)
    pulsar_txn_timeout_total                transactions aborted by their timeout
    pulsar_txn_append_log_total             records appended to the coordinator log
    pulsar_txn_execution_latency_le_<ms>    open-to-end time, per bucket, last interval
    quasar_txn_oldest_open_age_seconds      age of the oldest live transaction (0: none)

Per topic with a transaction buffer (labels ``cluster, namespace, topic``), gauges::

    pulsar_txn_tb_active_total              open transactions with entries on the topic
    pulsar_txn_tb_committed_total           transactions committed on the topic
    pulsar_txn_tb_aborted_total             transactions aborted on the topic
    quasar_txn_topic_oldest_open_age_seconds  age of the oldest of them (0: none)
    quasar_txn_topic_held_back_entries      entries after the max-read position: written,
                                            but invisible to every reader until the
                                            oldest open transaction ends

Per subscription with pending acks (labels ``namespace, topic, subscription``), from
Pulsar's pending-ack handle stats, with their Prometheus types::

    pulsar_txn_tp_committed_count_total{status=succeed|failed}   counter
    pulsar_txn_tp_aborted_count_total{status=succeed|failed}     counter
    pulsar_txn_tp_commit_latency{quantile=0.5|0.9|0.99|0.999}    summary (ms)

A transaction's age is measured from its open time on its coordinator, so it
survives a broker restart. The execution-latency buckets count the transactions that
ended during the last statistics interval (Pulsar's ``StatsBuckets``); the collector
closes an interval when a scrape finds it over.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from quasar.clock import Clock
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import ManagedLedger, Position
from quasar.storage.stats_buckets import bucket_suffixes

from .buffer import TopicTransactionBuffer
from .coordinator import TransactionCoordinator
from .coordinator.coordinator import EXECUTION_LATENCY_BUCKETS_MS
from .pending_ack import PendingAckHandle

__all__ = [
    "COMMIT_LATENCY_QUANTILES",
    "STATS_INTERVAL_MS",
    "TopicTransactions",
    "TransactionMetrics",
    "held_back_entries",
]

#: Pulsar's ``statsUpdateFrequencyInSecs`` default: the length of one interval of the
#: execution-latency buckets.
STATS_INTERVAL_MS = 60_000
#: The quantiles of Pulsar's ``pulsar_txn_tp_commit_latency`` summary.
COMMIT_LATENCY_QUANTILES = (0.5, 0.9, 0.99, 0.999)

TC_LABELS = ("cluster", "coordinator_id")
TB_LABELS = ("cluster", "namespace", "topic")
TP_LABELS = ("namespace", "topic", "subscription")

_TC_COUNTERS = (
    ("pulsar_txn_created_total", "created", "Transactions created"),
    ("pulsar_txn_committed_total", "committed", "Transactions committed"),
    ("pulsar_txn_aborted_total", "aborted", "Transactions aborted"),
    ("pulsar_txn_timeout_total", "timed_out", "Transactions aborted by their timeout"),
    ("pulsar_txn_append_log_total", "appended", "Records appended to the coordinator log"),
)


@dataclass(frozen=True)
class TopicTransactions:
    """One loaded topic's transaction parts, as the broker hands them to the metrics."""

    topic: str
    namespace: str
    ledger: ManagedLedger
    buffer: TopicTransactionBuffer
    # (subscription name, its pending-ack handle), for subscriptions that have one.
    pending_acks: Sequence[tuple[str, PendingAckHandle]]


def held_back_entries(ledger: ManagedLedger, max_read: Position) -> int:
    """Entries written after ``max_read``: readers cannot see them until the
    transaction holding the max-read position back ends."""
    last = ledger.last_confirmed_entry
    if last <= max_read:
        return 0
    return ledger.count_entries(Position(max_read.ledger_id, max_read.entry_id + 1), last)


class TransactionMetrics(Collector):
    """Collector over the loaded coordinators and the topics' transaction parts."""

    def __init__(
        self,
        cluster: str,
        coordinators: Callable[[], Iterable[TransactionCoordinator]],
        topics: Callable[[], Iterable[TopicTransactions]],
        clock: Clock,
        *,
        stats_interval_ms: int = STATS_INTERVAL_MS,
    ) -> None:
        self._cluster = cluster
        self._coordinators = coordinators
        self._topics = topics
        self._clock = clock
        self._interval_ms = stats_interval_ms
        self._interval_start = clock.monotonic_ms()

    def collect(self) -> Iterator[Metric]:
        coordinators = sorted(self._coordinators(), key=lambda tc: tc.tc_id)
        self._refresh_intervals(coordinators)
        now_ms = self._clock.wall_ms()
        opened: dict[TxnID, int] = {}
        for tc in coordinators:
            opened.update(tc.open_timestamps())
        yield from self._coordinator_metrics(coordinators, opened, now_ms)
        topics = sorted(self._topics(), key=lambda t: t.topic)
        yield from self._buffer_metrics(topics, opened, now_ms)
        yield from self._pending_ack_metrics(topics)

    def _refresh_intervals(self, coordinators: Sequence[TransactionCoordinator]) -> None:
        now = self._clock.monotonic_ms()
        if now - self._interval_start < self._interval_ms:
            return
        self._interval_start = now
        for tc in coordinators:
            tc.stats.execution_latency.refresh()

    def _coordinator_metrics(
        self,
        coordinators: Sequence[TransactionCoordinator],
        opened: dict[TxnID, int],
        now_ms: int,
    ) -> Iterator[Metric]:
        def labels(tc: TransactionCoordinator) -> list[str]:
            return [self._cluster, str(tc.tc_id)]

        active = GaugeMetricFamily(
            "pulsar_txn_active_count", "Live transactions", labels=TC_LABELS
        )
        for tc in coordinators:
            active.add_metric(labels(tc), float(tc.active_transactions()))
        yield active
        for name, attr, help_ in _TC_COUNTERS:
            gauge = GaugeMetricFamily(name, help_, labels=TC_LABELS)
            for tc in coordinators:
                gauge.add_metric(labels(tc), float(getattr(tc.stats, attr)))
            yield gauge
        suffixes = bucket_suffixes(EXECUTION_LATENCY_BUCKETS_MS)
        families = [
            GaugeMetricFamily(
                f"pulsar_txn_execution_latency_{suffix}",
                "Transactions ended in the last interval, by open-to-end time (ms)",
                labels=TC_LABELS,
            )
            for suffix in suffixes
        ]
        for tc in coordinators:
            for family, count in zip(families, tc.stats.execution_latency.values, strict=True):
                family.add_metric(labels(tc), float(count))
        yield from families
        oldest = GaugeMetricFamily(
            "quasar_txn_oldest_open_age_seconds",
            "Age of the coordinator's oldest live transaction (0: none)",
            labels=TC_LABELS,
        )
        for tc in coordinators:
            ages = [now_ms - ms for txn, ms in opened.items() if txn.most_bits == tc.tc_id]
            oldest.add_metric(labels(tc), _seconds(max(ages, default=0)))
        yield oldest

    def _buffer_metrics(
        self, topics: Sequence[TopicTransactions], opened: dict[TxnID, int], now_ms: int
    ) -> Iterator[Metric]:
        active = GaugeMetricFamily(
            "pulsar_txn_tb_active_total", "Open transactions on the topic", labels=TB_LABELS
        )
        committed = GaugeMetricFamily(
            "pulsar_txn_tb_committed_total", "Transactions committed on the topic",
            labels=TB_LABELS,
        )
        aborted = GaugeMetricFamily(
            "pulsar_txn_tb_aborted_total", "Transactions aborted on the topic",
            labels=TB_LABELS,
        )
        oldest = GaugeMetricFamily(
            "quasar_txn_topic_oldest_open_age_seconds",
            "Age of the oldest open transaction with entries on the topic (0: none)",
            labels=TB_LABELS,
        )
        held = GaugeMetricFamily(
            "quasar_txn_topic_held_back_entries",
            "Entries after the max-read position, invisible to readers until the "
            "oldest open transaction on the topic ends",
            labels=TB_LABELS,
        )
        for t in topics:
            values = [self._cluster, t.namespace, t.topic]
            buffer = t.buffer
            ongoing = buffer.ongoing_transactions()
            active.add_metric(values, float(len(ongoing)))
            committed.add_metric(values, float(buffer.committed_count))
            aborted.add_metric(values, float(buffer.aborted_count))
            ages = [now_ms - opened[txn] for txn in ongoing if txn in opened]
            oldest.add_metric(values, _seconds(max(ages, default=0)))
            held.add_metric(
                values, float(held_back_entries(t.ledger, buffer.max_read_position))
            )
        yield from (active, committed, aborted, oldest, held)

    def _pending_ack_metrics(self, topics: Sequence[TopicTransactions]) -> Iterator[Metric]:
        committed = CounterMetricFamily(
            "pulsar_txn_tp_committed_count",
            "Transaction commits on the subscription's pending acks",
            labels=(*TP_LABELS, "status"),
        )
        aborted = CounterMetricFamily(
            "pulsar_txn_tp_aborted_count",
            "Transaction aborts on the subscription's pending acks",
            labels=(*TP_LABELS, "status"),
        )
        latency = Metric(
            "pulsar_txn_tp_commit_latency",
            "Time to commit a transaction's pending acks (ms)",
            "summary",
        )
        for t in topics:
            for subscription, handle in sorted(t.pending_acks, key=lambda p: p[0]):
                values = [t.namespace, t.topic, subscription]
                c = handle.counters
                committed.add_metric([*values, "succeed"], float(c.committed))
                committed.add_metric([*values, "failed"], float(c.commit_failed))
                aborted.add_metric([*values, "succeed"], float(c.aborted))
                aborted.add_metric([*values, "failed"], float(c.abort_failed))
                labels = dict(zip(TP_LABELS, values, strict=True))
                samples = sorted(c.recent_commit_latencies_ms)
                for q in COMMIT_LATENCY_QUANTILES:
                    latency.add_sample(
                        latency.name, {**labels, "quantile": str(q)}, _quantile(samples, q)
                    )
                latency.add_sample(f"{latency.name}_count", labels, float(c.committed))
                latency.add_sample(f"{latency.name}_sum", labels, c.commit_latency_sum_ms)
        yield from (committed, aborted, latency)


def _seconds(ms: float) -> float:
    return max(ms, 0) / 1000.0


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ascending ``ordered`` (nearest rank); NaN when empty, as
    a Prometheus summary reports a quantile without observations."""
    if not ordered:
        return math.nan
    rank = max(math.ceil(q * len(ordered)) - 1, 0)
    return float(ordered[rank])
