"""Records the broker found unreadable in its own logs, and the metric that counts them.

``quasar_corrupt_records_total{cluster, log}`` counts distinct unreadable records
(by log name and position), so a coordinator or subscription that fails again on
every load attempt is counted once, not once per attempt. ``log`` is the kind of log:

======================  ==========================================================
``transaction_log``     a coordinator's ``__transaction_log_N``
``pending_ack_log``     a subscription's ``..__transaction_pending_ack``
``buffer_snapshot``     a topic's transaction-buffer snapshot (recovery falls back
                        to replaying the topic, so nothing stops serving)
``system_table``        a record of a table the broker keeps in a compacted system
                        topic (the snapshot tables, each coordinator's
                        ``__terminated_txn_state_N``); the table skips it, losing
                        that key's value, and keeps serving
======================  ==========================================================

Pulsar has no such metric; the name follows quasar's own ``quasar_`` metrics.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from enum import Enum

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from quasar.errors import CorruptRecordError

log = logging.getLogger(__name__)

METRIC = "quasar_corrupt_records"
# Distinct records remembered for counting once; beyond this each sighting counts.
SEEN_MAX = 10_000


class CorruptLog(Enum):
    TRANSACTION_LOG = "transaction_log"
    PENDING_ACK_LOG = "pending_ack_log"
    BUFFER_SNAPSHOT = "buffer_snapshot"
    SYSTEM_TABLE = "system_table"


class CorruptRecords(Collector):
    """Counts unreadable records per kind of log (a ``prometheus_client`` collector)."""

    def __init__(self, cluster: str = "standalone") -> None:
        self._cluster = cluster
        self.counts: dict[CorruptLog, int] = dict.fromkeys(CorruptLog, 0)
        self._seen: set[tuple[CorruptLog, str | None, str | None]] = set()

    def found(self, kind: CorruptLog, exc: CorruptRecordError) -> None:
        """Count ``exc``'s record (once per log and position) and log it."""
        key = (kind, exc.log_name, exc.position)
        if key in self._seen:
            return
        if len(self._seen) < SEEN_MAX:
            self._seen.add(key)
        self.counts[kind] += 1
        log.error("unreadable record in %s %s at %s: %s",
                  kind.value, exc.log_name or "?", exc.position or "?", exc)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            METRIC,
            "Records the broker could not read in its own logs (distinct log and position)",
            labels=("cluster", "log"),
        )
        for kind, count in self.counts.items():
            family.add_metric([self._cluster, kind.value], count)
        yield family
