"""``pulsar_txn_tc_preserver_*``: the terminated-transaction preservers, per coordinator.

A collector for ``quasar.metrics.Registry`` that reads each loaded coordinator's
``PreserverStats`` at scrape time (nothing is mirrored on the hot path). Labels:
``cluster`` and ``coordinator_id``. PR #20356 of the PIP exported only
``pulsar_txn_preserver_produce_latency``; quasar's flush latency histogram is the same
measurement (one round of writes to ``__terminated_txn_state_{tcId}``), in seconds.

================================================  =========  =====================================
name                                              type       what
================================================  =========  =====================================
pulsar_txn_tc_preserver_entries                   gauge      terminated transactions held
pulsar_txn_tc_preserver_client_names              gauge      client names with an entry
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

import math
from collections.abc import Callable, Iterable

from quasar.metrics import MetricFamily, Sample
from quasar.metrics.registry import format_value

from .preserver import PreserverStats

PREFIX = "pulsar_txn_tc_preserver"

_GAUGES = (
    ("entries", "entries", "Terminated transactions the coordinator's preserver holds"),
    ("client_names", "client_names", "Client names with at least one preserved transaction"),
)
_COUNTERS = (
    ("appends_total", "appends", "Terminated transactions appended to the preserver"),
    ("flushes_total", "flushes", "Preserver flush rounds that wrote to the system topic"),
    ("flush_failures_total", "flush_failures", "Preserver flush rounds that failed"),
    ("messages_written_total", "messages_written",
     "Messages written to __terminated_txn_state (one per client name per round)"),
    ("trimmed_total", "trimmed",
     "Preserved transactions dropped because a client name held transactionMetaPersistCount"),
    ("expirations_total", "expirations",
     "Preserved transactions dropped after transactionMetaPersistTimeInHour"),
    ("restored_total", "restored", "Preserved transactions loaded when a coordinator started"),
)


class PreserverMetrics:
    """Collector over ``preservers()``: ``(coordinator id, stats)`` of each loaded one."""

    def __init__(
        self, cluster: str, preservers: Callable[[], Iterable[tuple[int, PreserverStats]]]
    ) -> None:
        self._cluster = cluster
        self._preservers = preservers

    def collect(self) -> list[MetricFamily]:
        families: dict[str, MetricFamily] = {}

        def family(suffix: str, kind: str, help_: str) -> MetricFamily:
            name = f"{PREFIX}_{suffix}"
            if name not in families:
                families[name] = MetricFamily(name, kind, help_)
            return families[name]

        for suffix, _, help_ in _GAUGES:
            family(suffix, "gauge", help_)
        for suffix, _, help_ in _COUNTERS:
            family(suffix, "counter", help_)
        latency = family("flush_latency_seconds", "histogram", "Duration of a preserver flush round")
        for tc_id, stats in sorted(self._preservers(), key=lambda p: p[0]):
            labels = (("cluster", self._cluster), ("coordinator_id", str(tc_id)))
            for suffix, attr, _ in (*_GAUGES, *_COUNTERS):
                family(suffix, "", "").samples.append(
                    Sample(f"{PREFIX}_{suffix}", labels, float(getattr(stats, attr)))
                )
            hist = stats.flush_latency
            cumulative = 0
            for bound_ms, n in zip((*hist.bounds, math.inf), hist.counts, strict=True):
                cumulative += n
                le = format_value(bound_ms / 1000.0)
                latency.samples.append(
                    Sample(f"{latency.name}_bucket", (*labels, ("le", le)), float(cumulative))
                )
            latency.samples.append(Sample(f"{latency.name}_sum", labels, hist.sum / 1000.0))
            latency.samples.append(Sample(f"{latency.name}_count", labels, float(hist.count)))
        return list(families.values())
