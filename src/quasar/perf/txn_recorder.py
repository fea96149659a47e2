"""Samples of ``quasar perf transaction``: per-transaction outcomes and latencies.

``TxnRecorder`` has the interface ``Reporter`` drives (``fold``, ``start_measuring``,
``measuring``, ``messages``, ``last_time``), so the run's warm-up and time limit work
as in the other modes, but one sample is a *transaction* (or, with
``--txn-disable``, one iteration of the same loop), not a message:

* ``transaction``: from ``new_transaction()`` being called to the commit or abort
  completing (the whole loop body: open, receive, ack, produce, end);
* ``commit`` / ``abort``: from ``commit()`` / ``abort()`` being called to its
  completion (every ack and send is awaited before, so this is END_TXN alone);
* ``open``: ``new_transaction()`` alone;
* ``ack``: acknowledging the received messages in the transaction (all acks
  concurrently, each awaiting the broker's answer); not recorded without transactions
  (plain acks are grouped and not answered);
* ``send``: sending the transaction's messages (pipelined) until the last receipt.

What is left of ``transaction`` is waiting for input messages.

Counters: committed and aborted transactions (an abort chosen by ``--abort-ratio``),
failed ones (errors, by exception type), messages produced and consumed in
transactions that ended as intended, bytes produced.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from quasar.perf.histogram import Histogram

__all__ = ["LATENCIES", "TxnRecorder", "TxnSnapshot", "TxnTotals"]

LATENCIES = ("transaction", "commit", "abort", "open", "ack", "send")


def _histograms() -> dict[str, Histogram]:
    return {name: Histogram() for name in LATENCIES}


@dataclass
class TxnTotals:
    """Counts and latencies over some span (an interval, the run, the window)."""

    committed: int = 0
    aborted: int = 0
    errors: int = 0
    produced: int = 0
    consumed: int = 0
    produced_bytes: int = 0
    latency_us: dict[str, Histogram] = field(default_factory=_histograms)
    error_types: Counter[str] = field(default_factory=Counter)

    @property
    def transactions(self) -> int:
        """Transactions that ended as intended (committed or aborted on purpose)."""
        return self.committed + self.aborted

    def add(self, other: TxnTotals) -> None:
        self.committed += other.committed
        self.aborted += other.aborted
        self.errors += other.errors
        self.produced += other.produced
        self.consumed += other.consumed
        self.produced_bytes += other.produced_bytes
        for name, hist in other.latency_us.items():
            self.latency_us[name].merge(hist)
        self.error_types.update(other.error_types)


TxnSnapshot = TxnTotals


class TxnRecorder:
    """Thread-safe sink of transaction outcomes (times: ``time.monotonic()``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fold_lock = threading.RLock()
        self._interval = TxnTotals()
        self.run = TxnTotals()
        self.window = TxnTotals()
        self.measuring = False
        self.measure_start: float | None = None
        self.measure_cpu_start = 0.0
        self.last_time: float | None = None
        self.first_error: str | None = None

    # --- samples ----------------------------------------------------------------------

    def _mark(self, now: float) -> None:
        self.last_time = now
        if self.measure_start is None and self.measuring:
            self.measure_start = now

    def record(
        self,
        *,
        committed: bool,
        txn_us: float,
        end_us: float | None,
        open_us: float | None,
        ack_us: float | None = None,
        send_us: float | None = None,
        produced: int,
        consumed: int,
        produced_bytes: int,
        now: float,
    ) -> None:
        """One transaction that ended as intended (committed, or aborted on purpose).

        ``end_us`` / ``open_us`` / ``ack_us`` are None without transactions
        (``--txn-disable``); ``ack_us`` / ``send_us`` are None when the loop neither
        consumes nor produces.
        """
        with self._lock:
            t = self._interval
            if committed:
                t.committed += 1
            else:
                t.aborted += 1
            t.produced += produced
            t.consumed += consumed
            t.produced_bytes += produced_bytes
            t.latency_us["transaction"].record(txn_us)
            if end_us is not None:
                t.latency_us["commit" if committed else "abort"].record(end_us)
            if open_us is not None:
                t.latency_us["open"].record(open_us)
            if ack_us is not None:
                t.latency_us["ack"].record(ack_us)
            if send_us is not None:
                t.latency_us["send"].record(send_us)
            self._mark(now)

    def error(self, exc: BaseException, now: float) -> None:
        """A transaction (or iteration) that failed."""
        kind = type(exc).__name__
        with self._lock:
            self._interval.errors += 1
            self._interval.error_types[kind] += 1
            if self.first_error is None:
                self.first_error = f"{kind}: {exc}"
            self._mark(now)

    # --- the Reporter's interface -------------------------------------------------------

    @property
    def messages(self) -> int:
        """Transactions ended so far, failed ones included (the progress 'total')."""
        return self.run.transactions + self.run.errors

    def completed(self) -> int:
        with self._lock:
            i = self._interval
            return self.messages + i.transactions + i.errors

    def fold(self) -> TxnTotals:
        """Close the current interval and add it to the run (and window) totals."""
        with self._fold_lock:
            return self._fold()

    def _fold(self) -> TxnTotals:
        with self._lock:
            snap, self._interval = self._interval, TxnTotals()
            measuring = self.measuring
        self.run.add(snap)
        if measuring:
            self.window.add(snap)
        return snap

    def start_measuring(self, now: float) -> TxnTotals:
        """End the warm-up (see ``Recorder.start_measuring``)."""
        with self._fold_lock:
            snap = self._fold()
            with self._lock:
                self.measuring = True
                self.measure_start = now if self.messages else None
                self.measure_cpu_start = time.process_time()
        return snap

    def window_seconds(self) -> float:
        if self.measure_start is None or self.last_time is None:
            return 0.0
        return max(0.0, self.last_time - self.measure_start)
