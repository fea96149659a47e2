"""PIP-160 metrics of the batched writers, one set per kind of log.

Names are ``{prefix}_batched_log_...`` with the prefix ``pulsar_txn_tc`` (coordinator
logs, labels ``cluster`` and ``coordinator_id``) or ``pulsar_pending_ack`` (pending-ack
logs, label ``cluster``). Buckets are PIP-160's; the delay histogram observes seconds,
as its name says (Pulsar observes milliseconds against bounds 1, 5, 10; quasar's
bounds 0.001, 0.005, 0.01 s are the same boundaries in the unit of the name).
Nothing of these is recorded while batching is off.

Two counters of quasar's own, recorded whether batching is on or off, make the
gain visible: ``quasar_{txn_tc|pending_ack}_log_records_written_total`` and
``quasar_{txn_tc|pending_ack}_log_entries_written_total`` (entries per record is 1.0
with batching off).

``BatchedLogMetrics`` is a ``prometheus_client`` collector. The histograms are the
library's; the counts are plain integers of each writer's ``BatchedLogStats``, read
at scrape time. The four ``triggering_count_by_*`` families are counters, exposed as
Pulsar's Prometheus client exposes them: ``# TYPE {name} counter`` and one sample
``{name}_total`` per label set.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum

from prometheus_client import Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

RECORDS_PER_ENTRY_BUCKETS = (10, 50, 100, 200, 500, 1000)
ENTRY_SIZE_BUCKETS = (128, 512, 1024, 2048, 4096, 16_384, 102_400, 1_232_896)
OLDEST_RECORD_DELAY_BUCKETS_S = (0.001, 0.005, 0.01)

TC_PREFIX = "pulsar_txn_tc"
PENDING_ACK_PREFIX = "pulsar_pending_ack"


class Trigger(Enum):
    """Why a batch was written."""

    RECORDS = "records"
    SIZE = "size"
    DELAY = "delay_time"
    FORCE = "force"


_TRIGGER_HELP = {
    Trigger.RECORDS: "Batched {what} entries written because max records was reached",
    Trigger.SIZE: "Batched {what} entries written because max size was reached",
    Trigger.DELAY: "Batched {what} entries written because max delay passed",
    Trigger.FORCE: "Flushes forced by a single {what} record at or above max size",
}


class BatchedLogMetrics(Collector):
    """The seven PIP-160 metrics and quasar's two counters of one kind of log."""

    def __init__(self, prefix: str, labelnames: tuple[str, ...], what: str) -> None:
        self._prefix = f"{prefix}_batched_log"
        self._own = "quasar_" + prefix.removeprefix("pulsar_")
        self._what = what
        self.labelnames = labelnames
        self._stats: dict[tuple[str, ...], BatchedLogStats] = {}
        p = self._prefix
        self.records_per_entry = Histogram(
            f"{p}_records_count_per_entry",
            f"Records per batched {what} entry",
            labelnames,
            buckets=RECORDS_PER_ENTRY_BUCKETS,
            registry=None,
        )
        self.entry_size = Histogram(
            f"{p}_entry_size_bytes",
            f"Size in bytes of batched {what} entries",
            labelnames,
            buckets=ENTRY_SIZE_BUCKETS,
            registry=None,
        )
        self.oldest_record_delay = Histogram(
            f"{p}_oldest_record_delay_time_seconds",
            f"Time the oldest record of a batched {what} entry spent in the buffer",
            labelnames,
            buckets=OLDEST_RECORD_DELAY_BUCKETS_S,
            registry=None,
        )

    def child(self, *values: str) -> BatchedLogStats:
        """The series of one writer (or of all writers sharing these label values),
        created at zero so they show from the moment the writer exists.

        Raises:
            ValueError: not one value per label name.
        """
        if len(values) != len(self.labelnames):
            raise ValueError(f"labels {self.labelnames}, got {len(values)} values")
        stats = self._stats.get(values)
        if stats is None:
            stats = self._stats[values] = BatchedLogStats(self, values)
        return stats

    def remove(self, *values: str) -> None:
        """Forget one writer's series."""
        if self._stats.pop(values, None) is not None:
            for hist in self._histograms():
                hist.remove(*values)

    def _histograms(self) -> tuple[Histogram, ...]:
        return (self.records_per_entry, self.entry_size, self.oldest_record_delay)

    def collect(self) -> Iterator[Metric]:
        for hist in self._histograms():
            for family in hist.collect():
                # The creation time (``_created``) is an OpenMetrics extra that
                # Pulsar does not export.
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
                yield family
        stats = sorted(self._stats.items())
        for trigger in Trigger:
            by_trigger = CounterMetricFamily(
                f"{self._prefix}_triggering_count_by_{trigger.value}",
                _TRIGGER_HELP[trigger].format(what=self._what),
                labels=self.labelnames,
            )
            for values, s in stats:
                by_trigger.add_metric(values, s.triggers[trigger])
            yield by_trigger
        records = CounterMetricFamily(
            f"{self._own}_log_records_written_total",
            f"Records appended to {self._what}s",
            labels=self.labelnames,
        )
        entries = CounterMetricFamily(
            f"{self._own}_log_entries_written_total",
            f"Managed-ledger entries written to {self._what}s (batched or not)",
            labels=self.labelnames,
        )
        for values, s in stats:
            records.add_metric(values, s.records_written)
            entries.add_metric(values, s.entries_written)
        yield records
        yield entries


def coordinator_log_metrics() -> BatchedLogMetrics:
    return BatchedLogMetrics(TC_PREFIX, ("cluster", "coordinator_id"), "transaction log")


def pending_ack_log_metrics() -> BatchedLogMetrics:
    return BatchedLogMetrics(PENDING_ACK_PREFIX, ("cluster",), "pending-ack log")


class BatchedLogStats:
    """What one writer records: counts here, distributions in the histograms."""

    __slots__ = ("triggers", "records_written", "entries_written", "_records", "_size",
                 "_delay")

    def __init__(self, metrics: BatchedLogMetrics, values: tuple[str, ...]) -> None:
        self.triggers = dict.fromkeys(Trigger, 0)
        self.records_written = 0
        self.entries_written = 0
        self._records = metrics.records_per_entry.labels(*values)
        self._size = metrics.entry_size.labels(*values)
        self._delay = metrics.oldest_record_delay.labels(*values)

    def batch_written(
        self, trigger: Trigger | None, records: int, size_bytes: int, oldest_delay_ms: float
    ) -> None:
        """A batch of ``records`` went out as one entry of ``size_bytes``."""
        self._records.observe(records)
        self._size.observe(size_bytes)
        self._delay.observe(max(oldest_delay_ms, 0.0) / 1000.0)
        if trigger is not None:
            self.triggers[trigger] += 1

    def written(self, records: int) -> None:
        """One entry holding ``records`` records was handed to the ledger."""
        self.entries_written += 1
        self.records_written += records

    def forced(self) -> None:
        """A record at or above max size was written alone."""
        self.triggers[Trigger.FORCE] += 1
