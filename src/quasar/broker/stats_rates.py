"""Per-second rates of the broker's counters, as Pulsar's stats report them.

Producers, consumers, subscriptions and topics count messages and bytes with plain
integers on the hot path. Every ``statsUpdateFrequencyInSecs`` the stats updater
(``stats_updater.py``) hands each ``MessageRate`` the counters' current values and the
time since its last update; the rate is the difference over that time. Both the
topic stats JSON (``msgRateIn``, ``msgThroughputOut``, ...) and the Prometheus series
(``pulsar_rate_in``, ...) read the result, so they always agree.
"""

from __future__ import annotations

__all__ = ["MessageRate", "average_msg_size", "estimated_backlog_size"]

from collections.abc import Iterable

from quasar.storage.api import LedgerInfo, Position


class MessageRate:
    """Messages and bytes per second over the last stats period."""

    __slots__ = ("msg_rate", "byte_rate", "_msgs", "_bytes")

    def __init__(self) -> None:
        self.msg_rate = 0.0
        self.byte_rate = 0.0
        self._msgs = 0
        self._bytes = 0

    def update(self, msgs: int, size: int, elapsed_s: float) -> None:
        """The counters now read ``msgs`` and ``size``, ``elapsed_s`` after the last
        update. A counter that went down (a counter summed over consumers lost one
        that left) gives a rate of 0 for that period rather than a negative one."""
        if elapsed_s > 0:
            self.msg_rate = max(msgs - self._msgs, 0) / elapsed_s
            self.byte_rate = max(size - self._bytes, 0) / elapsed_s
        self._msgs = msgs
        self._bytes = size


def average_msg_size(rate: MessageRate) -> float:
    """Pulsar's ``averageMsgSize``: throughput over rate, 0 when nothing flowed."""
    return rate.byte_rate / rate.msg_rate if rate.msg_rate > 0 else 0.0


def estimated_backlog_size(ledgers: Iterable[LedgerInfo], mark_delete: Position) -> int:
    """Bytes after ``mark_delete``: whole ledgers after its ledger, and of its own
    ledger the share of its entries that follow it (entries of one ledger are taken
    as equally large, as Pulsar's estimate does)."""
    total = 0
    for info in ledgers:
        if info.ledger_id > mark_delete.ledger_id:
            total += info.size
        elif info.ledger_id == mark_delete.ledger_id and info.entries > 0:
            after = info.entries - (mark_delete.entry_id + 1)
            if after > 0:
                total += info.size * after // info.entries
    return total
