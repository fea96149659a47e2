"""``TxnLogBufferedWriter``: PIP-160's buffer between a transaction log and its ledger.

Records are appended serialised. With batching off, each is one entry. With it on,
records wait in a buffer, and the buffer is written as one batched entry
(``entry_format``) as soon as one threshold is reached:

* ``max_records`` records are buffered (trigger ``records``);
* their bytes reach ``max_size`` (trigger ``size``);
* ``max_delay_in_millis`` has passed since the *first* record of the batch arrived
  (trigger ``delay_time``). The timer is one-shot, armed by the first record and
  cancelled by any other flush: nothing runs while the buffer is empty, and a slow
  ledger is never handed a queue of periodic ticks.

A record of ``max_size`` or more would make an oversized batch: the buffer is
written first, then that record alone, un-batched (trigger ``force``), so log order
is kept.

Each ``append`` returns a future of the record's ``LogPosition``. The managed ledger
completes adds in call order, and a batch's futures are resolved in buffer order from
its add's completion, so every caller's callback runs in log order. A batch of n
records resolves record i with ``(entry, batch_index=i, batch_size=n)``; a failed
write fails every record in it with the storage error. After ``close`` (or while the
ledger is closed) appends fail with ``ManagedLedgerClosed``, through the future.

The writer neither reads nor deletes: the log on top replays entries and deletes
records by batch index itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import Generic, TypeVar

from quasar.clock import Clock, SystemClock
from quasar.errors import ManagedLedgerClosed
from quasar.storage.api import ManagedLedger, Position

from ..scheduler import AsyncioScheduler, Scheduler, TimerHandle
from .config import BatchedWriteConfig
from .entry_format import HEADER_SIZE, encode_batched_entry, record_overhead
from .metrics import BatchedLogStats, Trigger
from .position import LogPosition

log = logging.getLogger(__name__)

T = TypeVar("T")


class TxnLogBufferedWriter(Generic[T]):
    """Buffers records of one log and writes them as batched entries."""

    def __init__(
        self,
        ledger: ManagedLedger,
        encode: Callable[[T], bytes],
        settings: BatchedWriteConfig,
        *,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
        stats: BatchedLogStats | None = None,
        name: str = "",
        on_close: Callable[[TxnLogBufferedWriter[T]], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self._encode = encode
        self._settings = settings
        self._scheduler: Scheduler = scheduler if scheduler is not None else AsyncioScheduler()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._stats = stats
        self.name = name
        self._on_close = on_close
        self._enabled = False
        self._closed = False
        self._records: list[bytes] = []
        self._futures: list[asyncio.Future[LogPosition]] = []
        self._bytes = 0
        self._first_at_ms = 0.0
        self._timer: TimerHandle | None = None
        self.entries_written = 0
        self.records_written = 0
        self.set_enabled(settings.enabled)

    # ------------------------------------------------------------------ state

    @property
    def enabled(self) -> bool:
        """Batching is on (records may share an entry)."""
        return self._enabled

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def settings(self) -> BatchedWriteConfig:
        return self._settings

    @property
    def buffered(self) -> int:
        """Records waiting in the buffer."""
        return len(self._records)

    def set_enabled(self, enabled: bool) -> None:
        """Switch batching at run time. Switching off writes the buffer first, so
        records keep their order. With ``max_records <= 1`` batching stays off."""
        if enabled and self._settings.max_records <= 1:
            log.warning(
                "%s: batched writes need max records > 1 (got %d); writing single records",
                self.name, self._settings.max_records,
            )
            enabled = False
        if not enabled and self._records:
            self._flush(None)
        self._enabled = enabled

    # ------------------------------------------------------------------ writing

    def append(self, record: T) -> asyncio.Future[LogPosition]:
        """Append one record; the future resolves with its position once durable.

        Raises (through the future): ``ManagedLedgerClosed`` when closed, and the
        storage error of the entry the record went into.
        """
        out: asyncio.Future[LogPosition] = asyncio.get_running_loop().create_future()
        if self._closed:
            out.set_exception(ManagedLedgerClosed(f"{self.name}: buffered writer is closed"))
            return out
        data = self._encode(record)
        if not self._enabled:
            self._write_alone(data, out)
            return out
        s = self._settings
        if len(data) >= s.max_size:
            if self._records:
                self._flush(None)
            if self._stats is not None:
                self._stats.forced()
            self._write_alone(data, out)
            return out
        if not self._records:
            self._first_at_ms = self._clock.monotonic_ms()
            self._timer = self._scheduler.call_later(s.max_delay_in_millis, self._on_delay)
        self._records.append(data)
        self._futures.append(out)
        self._bytes += len(data)
        if len(self._records) >= s.max_records:
            self._flush(Trigger.RECORDS)
        elif self._bytes >= s.max_size:
            self._flush(Trigger.SIZE)
        return out

    def flush(self) -> None:
        """Write whatever is buffered now (no trigger is counted)."""
        if self._records:
            self._flush(None)

    def _on_delay(self) -> None:
        self._timer = None
        if self._records:
            self._flush(Trigger.DELAY)

    def _flush(self, trigger: Trigger | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        records, futures = self._records, self._futures
        self._records, self._futures, self._bytes = [], [], 0
        data = encode_batched_entry(records)
        if self._stats is not None:
            self._stats.batch_written(
                trigger, len(records), len(data),
                self._clock.monotonic_ms() - self._first_at_ms,
            )
        try:
            self._ledger.append_entry(data, partial(_complete, futures))
        except Exception as exc:
            _fail_all(futures, exc)
            return
        self.entries_written += 1
        self.records_written += len(records)
        if self._stats is not None:
            self._stats.written(len(records))

    def _write_alone(self, data: bytes, out: asyncio.Future[LogPosition]) -> None:
        # Entries are appended with a storage callback that resolves the records'
        # futures directly (here and in ``_flush``): no future per entry in between,
        # so a record's owner learns of it one loop turn sooner, and alone and
        # batched entries resolve in append order alike.
        try:
            self._ledger.append_entry(data, partial(_complete_alone, out))
        except Exception as exc:
            out.set_exception(exc)
            return
        self.entries_written += 1
        self.records_written += 1
        if self._stats is not None:
            self._stats.written(1)

    # ------------------------------------------------------------------ closing

    async def close(self) -> None:
        """Write what is buffered, then refuse further appends (idempotent).

        The buffered records' futures still resolve from their entry's completion.
        """
        if self._closed:
            return
        self.flush()
        self._closed = True
        if self._on_close is not None:
            self._on_close(self)


def _complete(
    futures: list[asyncio.Future[LogPosition]],
    position: Position | None,
    exc: BaseException | None,
) -> None:
    """The storage callback of a batched entry: resolve each record's future."""
    if exc is not None:
        _fail_all(futures, exc)
        return
    assert position is not None
    n = len(futures)
    for i, fut in enumerate(futures):
        if not fut.done():
            fut.set_result(LogPosition(position, i, n))


def _complete_alone(
    out: asyncio.Future[LogPosition], position: Position | None, exc: BaseException | None
) -> None:
    """The storage callback of a record written alone (no batch index)."""
    if out.done():
        return
    if exc is not None:
        out.set_exception(exc)
    else:
        assert position is not None
        out.set_result(LogPosition(position))


def _fail_all(futures: list[asyncio.Future[LogPosition]], exc: BaseException) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_exception(exc)


# A batch is this much bigger than the sum of its records (header + per-record tags),
# for callers that size buffers.
def batched_entry_size(record_sizes: list[int]) -> int:
    return HEADER_SIZE + sum(n + record_overhead(n) for n in record_sizes)
