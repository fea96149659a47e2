"""Whether the data directory's disk takes writes: full-disk episodes, counted.

A write refused for lack of space (``ENOSPC``, ``EDQUOT``, SQLite's "database or disk
is full") is not a storage failure: nothing written before it is in doubt, and the
same write succeeds once space is freed. The stores report each such refusal here and
each write that succeeded afterwards, so an operator sees the episode in
``quasar_storage_disk_full_total`` and ``quasar_storage_writable``, and in the log once
when it starts and once when it ends rather than once per refused message.

Called from the storage writer thread and the metadata writer thread alike, hence the
lock; ``written`` costs one attribute read while the disk is writable (the hot path).
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

LEDGERS = "ledgers"  # the ledger files (group commit, ledger creation)
METADATA = "metadata"  # the SQLite metadata store
STORES = (LEDGERS, METADATA)

_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """True for an ``OSError`` that says the disk (or the quota) is full."""
    return isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS


class DiskSpace(Collector):
    """Full-disk refusals per store, and whether each store's last write succeeded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused = dict.fromkeys(STORES, 0)
        self._full = dict.fromkeys(STORES, False)
        self._any_full = False

    def refused(self, store: str, cause: object) -> None:
        """A write to ``store`` was refused for lack of space."""
        with self._lock:
            self._refused[store] += 1
            starts = not self._full[store]
            self._full[store] = True
            self._any_full = True
        if starts:
            log.warning(
                "%s: the disk is full (%s); writes fail with a retryable error until "
                "space is freed",
                store,
                cause,
            )

    def written(self, store: str) -> None:
        """A write to ``store`` succeeded."""
        if not self._any_full:
            return
        with self._lock:
            ends = self._full[store]
            self._full[store] = False
            self._any_full = any(self._full.values())
        if ends:
            log.warning("%s: the disk takes writes again", store)

    def writable(self, store: str) -> bool:
        return not self._full[store]

    def refusals(self, store: str) -> int:
        return self._refused[store]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            refused = dict(self._refused)
            full = dict(self._full)
        counter = CounterMetricFamily(
            "quasar_storage_disk_full",
            "Writes refused because the disk was full (each fails with a retryable "
            "error)",
            labels=["store"],
        )
        gauge = GaugeMetricFamily(
            "quasar_storage_writable",
            "1 unless the store's last write was refused for lack of space",
            labels=["store"],
        )
        for store in STORES:
            counter.add_metric([store], refused[store])
            gauge.add_metric([store], 0 if full[store] else 1)
        yield counter
        yield gauge
