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
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from quasar.metrics import Counter, Histogram, MetricFamily, Registry

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


class BatchedLogMetrics:
    """The seven metrics of one kind of log; a collector for a ``Registry``."""

    def __init__(self, prefix: str, labelnames: tuple[str, ...], what: str) -> None:
        p = f"{prefix}_batched_log"
        own = "quasar_" + prefix.removeprefix("pulsar_")
        self.labelnames = labelnames
        self.records_written = Counter(
            f"{own}_log_records_written_total", f"Records appended to {what}s", labelnames
        )
        self.entries_written = Counter(
            f"{own}_log_entries_written_total",
            f"Managed-ledger entries written to {what}s (batched or not)",
            labelnames,
        )
        self.records_per_entry = Histogram(
            f"{p}_records_count_per_entry",
            f"Records per batched {what} entry",
            labelnames,
            buckets=RECORDS_PER_ENTRY_BUCKETS,
        )
        self.entry_size = Histogram(
            f"{p}_entry_size_bytes",
            f"Size in bytes of batched {what} entries",
            labelnames,
            buckets=ENTRY_SIZE_BUCKETS,
        )
        self.oldest_record_delay = Histogram(
            f"{p}_oldest_record_delay_time_seconds",
            f"Time the oldest record of a batched {what} entry spent in the buffer",
            labelnames,
            buckets=OLDEST_RECORD_DELAY_BUCKETS_S,
        )
        self.triggers = {
            Trigger.RECORDS: Counter(
                f"{p}_triggering_count_by_records",
                f"Batched {what} entries written because max records was reached",
                labelnames,
            ),
            Trigger.SIZE: Counter(
                f"{p}_triggering_count_by_size",
                f"Batched {what} entries written because max size was reached",
                labelnames,
            ),
            Trigger.DELAY: Counter(
                f"{p}_triggering_count_by_delay_time",
                f"Batched {what} entries written because max delay passed",
                labelnames,
            ),
            Trigger.FORCE: Counter(
                f"{p}_triggering_count_by_force",
                f"Flushes forced by a single {what} record at or above max size",
                labelnames,
            ),
        }

    def child(self, *values: str) -> BatchedLogStats:
        """The series of one writer (or of all writers sharing these label values)."""
        return BatchedLogStats(self, values)

    def remove(self, *values: str) -> None:
        for metric in self._metrics():
            metric.remove(*values)

    def _metrics(self) -> list[Counter | Histogram]:
        return [self.records_per_entry, self.entry_size, self.oldest_record_delay,
                *self.triggers.values(), self.records_written, self.entries_written]

    def collect(self) -> Iterable[MetricFamily]:
        for metric in self._metrics():
            yield from metric.collect()

    def register(self, registry: Registry) -> None:
        registry.register(self)


def coordinator_log_metrics() -> BatchedLogMetrics:
    return BatchedLogMetrics(TC_PREFIX, ("cluster", "coordinator_id"), "transaction log")


def pending_ack_log_metrics() -> BatchedLogMetrics:
    return BatchedLogMetrics(PENDING_ACK_PREFIX, ("cluster",), "pending-ack log")


class BatchedLogStats:
    """What one writer records (the children of each metric for its labels)."""

    __slots__ = ("_records", "_size", "_delay", "_triggers", "_records_written",
                 "_entries_written")

    def __init__(self, metrics: BatchedLogMetrics, values: tuple[str, ...]) -> None:
        self._records_written = metrics.records_written.labels(*values)
        self._entries_written = metrics.entries_written.labels(*values)
        self._records = metrics.records_per_entry.labels(*values)
        self._size = metrics.entry_size.labels(*values)
        self._delay = metrics.oldest_record_delay.labels(*values)
        self._triggers = {t: c.labels(*values) for t, c in metrics.triggers.items()}

    def batch_written(
        self, trigger: Trigger | None, records: int, size_bytes: int, oldest_delay_ms: float
    ) -> None:
        """A batch of ``records`` went out as one entry of ``size_bytes``."""
        self._records.observe(records)
        self._size.observe(size_bytes)
        self._delay.observe(max(oldest_delay_ms, 0.0) / 1000.0)
        if trigger is not None:
            self._triggers[trigger].inc()

    def written(self, records: int) -> None:
        """One entry holding ``records`` records was handed to the ledger."""
        self._entries_written.inc()
        self._records_written.inc(records)

    def forced(self) -> None:
        """A record at or above max size was written alone."""
        self._triggers[Trigger.FORCE].inc()
