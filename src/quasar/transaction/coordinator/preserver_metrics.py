"""``pulsar_txn_tc_preserver_*``: the terminated-transaction preservers, per coordinator.

A ``prometheus_client`` collector that reads each loaded coordinator's
``PreserverStats`` at scrape time (nothing is mirrored on the hot path). Labels:
``cluster`` and ``coordinator_id``. Pulsar's implementation of the PIP exports only
``pulsar_txn_preserver_produce_latency``; quasar's flush latency histogram is the same
measurement (one round of writes to ``__terminated_txn_state_{tcId}``), in seconds.

================================================  =========  =====================================
name                                              type       what
================================================  =========  =====================================
pulsar_txn_tc_preserver_entries                   gauge      terminated transactions held
pulsar_txn_tc_preserver_client_names              gauge      (owner, client name) keys with an entry
pulsar_txn_tc_preserver_appends_total             counter    entries added
pulsar_txn_tc_preserver_flushes_total             counter    flush rounds that wrote
pulsar_txn_tc_preserver_flush_failures_total      counter    flush rounds that failed
pulsar_txn_tc_preserver_messages_written_total    counter    messages (one per name per round)
pulsar_txn_tc_preserver_trimmed_total             counter    dropped by transactionMetaPersistCount
pulsar_txn_tc_preserver_expirations_total         counter    dropped by transactionMetaPersistTimeInHour
pulsar_txn_tc_preserver_restored_total            counter    entries loaded at coordinator start
pulsar_txn_tc_preserver_flush_latency_seconds     histogram  duration of a flush round
================================================  =========  =====================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .preserver import FLUSH_LATENCY_METRIC, PreserverStats

PREFIX = "pulsar_txn_tc_preserver"
LABELS = ("cluster", "coordinator_id")

_GAUGES = (
    ("entries", "entries", "Terminated transactions the coordinator's preserver holds"),
    ("client_names", "client_names",
     "Client names, per owner role, with at least one preserved transaction"),
)
_COUNTERS = (
    ("appends_total", "appends", "Terminated transactions appended to the preserver"),
    ("flushes_total", "flushes", "Preserver flush rounds that wrote to the system topic"),
    ("flush_failures_total", "flush_failures", "Preserver flush rounds that failed"),
    ("messages_written_total", "messages_written",
     "Messages written to __terminated_txn_state (one per owner and client name per round)"),
    ("trimmed_total", "trimmed",
     "Preserved transactions dropped because a client name held transactionMetaPersistCount"),
    ("expirations_total", "expirations",
     "Preserved transactions dropped after transactionMetaPersistTimeInHour"),
    ("restored_total", "restored", "Preserved transactions loaded when a coordinator started"),
)


class PreserverMetrics(Collector):
    """Collector over ``preservers()``: ``(coordinator id, stats)`` of each loaded one."""

    def __init__(
        self, cluster: str, preservers: Callable[[], Iterable[tuple[int, PreserverStats]]]
    ) -> None:
        self._cluster = cluster
        self._preservers = preservers

    def collect(self) -> Iterator[Metric]:
        preservers = sorted(self._preservers(), key=lambda p: p[0])
        for suffix, attr, help_ in _GAUGES:
            gauge = GaugeMetricFamily(f"{PREFIX}_{suffix}", help_, labels=LABELS)
            for tc_id, stats in preservers:
                gauge.add_metric([self._cluster, str(tc_id)], float(getattr(stats, attr)))
            yield gauge
        for suffix, attr, help_ in _COUNTERS:
            counter = CounterMetricFamily(f"{PREFIX}_{suffix}", help_, labels=LABELS)
            for tc_id, stats in preservers:
                counter.add_metric([self._cluster, str(tc_id)], float(getattr(stats, attr)))
            yield counter
        latency = Metric(FLUSH_LATENCY_METRIC, "Duration of a preserver flush round",
                         "histogram")
        for tc_id, stats in preservers:
            labels = {"cluster": self._cluster, "coordinator_id": str(tc_id)}
            for family in stats.flush_latency.collect():
                for s in family.samples:
                    # ``_created`` is an OpenMetrics extra that Pulsar does not export.
                    if not s.name.endswith("_created"):
                        latency.add_sample(s.name, {**labels, **s.labels}, s.value)
        yield latency
