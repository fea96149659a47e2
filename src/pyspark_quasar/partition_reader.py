"""Reading one partition's range ``(start, end]`` on an executor, as Arrow batches.

A task opens a reader on its partition (a non-durable subscription: nothing is left
on the broker) with the worker process's client (:mod:`pyspark_quasar.worker`). Only
committed data arrives — the broker holds dispatch at the max read position and
filters aborted transactions and markers — so the task only has to stop at ``end``,
and to notice messages of the range that were deleted before it read them: the
reader then skips from one ledger to a later one over a ledger that held range
entries when the range was planned and is gone now (:mod:`pyspark_quasar.ledgers`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

import pyspark_quasar.worker as worker
from pyspark_quasar.data_loss import (
    DataLoss,
    DataLossError,
    bound_text,
    log,
    report,
    until_text,
)
from pyspark_quasar.ledgers import is_deleted, skipped_ledgers
from pyspark_quasar.plan import PartitionRange, ReadSettings
from pyspark_quasar.positions import EARLIEST, Bound, is_past
from pyspark_quasar.schema import BatchBuilder
from pyspark_quasar.security import admin_ssl_context, authentication
from pyspark_quasar.topics import fetch_ledger_spans
from quasar.client import aio
from quasar.client.admin import AdminClient
from quasar.client.message_id import MessageId
from quasar.errors import AdminError, ConnectError, Timeout

__all__ = ["DataLossError", "PartitionRange", "ReadSettings", "read_partition"]


def _start_id(start: Bound) -> tuple[MessageId, bool]:
    if start.kind == EARLIEST:
        return MessageId.earliest, False
    mid = MessageId(-1, start.ledger, start.entry, start.batch)
    return mid, start.kind == "from"


def _read_before(start: Bound) -> tuple[int, int] | None:
    """The entry position the range starts after (None: the partition's beginning)."""
    if start.kind == EARLIEST:
        return None
    if start.kind == "after" and start.batch < 0:
        return (start.ledger, start.entry)
    return (start.ledger, start.entry - 1)  # the entry itself, or the rest of its batch


def read_partition(part: PartitionRange, settings: ReadSettings) -> Iterator[pa.RecordBatch]:
    """Yield the range's messages in order, ``arrow_batch_rows`` rows at a time.

    Raises:
        DataLossError: ``failOnDataLoss=true`` and messages of the range are gone
            (otherwise the task logs a warning and goes on with what is stored).
    """
    start, end = Bound.parse(part.start), Bound.parse(part.end)
    if start.is_empty_range_to(end):
        return
    reader = worker.run(_open(part.topic, start, settings))
    try:
        progress = _Progress(part, start, end, settings)
        builder = BatchBuilder(part.topic)
        done = False
        while not done:
            done = worker.run(_fill(reader, builder, progress))
            if len(builder):
                yield builder.flush()
    finally:
        worker.run(reader.close())


async def _open(topic: str, start: Bound, settings: ReadSettings) -> aio.Reader:
    client = await worker.client(settings.conn)
    start_id, inclusive = _start_id(start)
    return await client.create_reader(
        topic,
        start_id,
        receiver_queue_size=settings.receiver_queue_size,
        start_message_id_inclusive=inclusive,
    )


class _Progress:
    """Where a task's reading stands, and the data-loss checks on it."""

    def __init__(
        self, part: PartitionRange, start: Bound, end: Bound, settings: ReadSettings
    ) -> None:
        self.topic = part.topic
        self.planned = part.planned
        self.start = start
        self.end = end
        self.end_key = (end.ledger, end.entry)
        self.settings = settings
        # The position read last (ledger -1: nothing, the range starts at the beginning).
        self.ledger, self.entry = _read_before(start) or (-1, -1)

    @property
    def last(self) -> tuple[int, int] | None:
        return None if self.ledger < 0 else (self.ledger, self.entry)

    async def ledger_changed(
        self, prev: tuple[int, int] | None, cur: tuple[int, int]
    ) -> None:
        """The reader moved from ``prev`` to ``cur`` in another ledger: were range
        entries skipped, and deleted?"""
        skipped = skipped_ledgers(prev, cur, self.end_key, self.planned)
        if not skipped:
            return
        # Skipped entries may be markers or aborted messages (never delivered): lost
        # only if their ledger is gone. Asked once per such skip.
        try:
            conn = self.settings.conn
            async with AdminClient(
                conn.admin_url,
                authentication=authentication(conn.security),
                ssl_context=admin_ssl_context(conn),
            ) as admin:
                spans = await fetch_ledger_spans(admin, self.topic)
        except (AdminError, ConnectError, Timeout) as exc:
            log.warning(
                "%s: cannot tell whether ledgers %s were deleted (admin API: %s)",
                self.topic, skipped, exc,
            )
            return
        gone = [x for x in skipped if is_deleted(spans, x)]
        if gone:
            report(
                DataLoss(
                    self.topic, self._gap_start(prev), until_text(cur),
                    f"ledger {', '.join(map(str, gone))} deleted before the task read it",
                ),
                self.settings.fail_on_data_loss,
            )

    def end_missing(self) -> DataLoss:
        return DataLoss(
            self.topic,
            self._gap_start(self.last),
            f"up to {self.end.ledger}:{self.end.entry} (the range's end)",
            "the broker has no more messages: deleted by retention?",
        )

    def _gap_start(self, last: tuple[int, int] | None) -> str:
        if last is None or last == _read_before(self.start):
            return bound_text(self.start)
        return f"after {last[0]}:{last[1]}"


async def _fill(reader: aio.Reader, builder: BatchBuilder, progress: _Progress) -> bool:
    """Add messages to ``builder`` until it is full or the range's end is reached."""
    settings = progress.settings
    end = progress.end
    # The position read last is kept in locals on the per-message path.
    ledger_now, entry_now = progress.ledger, progress.entry
    try:
        while len(builder) < settings.arrow_batch_rows:
            try:
                msg = await reader.read_next(settings.poll_timeout_ms)
            except Timeout:
                if await reader.has_message_available():
                    continue  # slow, not gone
                report(progress.end_missing(), settings.fail_on_data_loss)
                return True
            mid = msg.message_id()
            ledger, entry = mid.ledger_id(), mid.entry_id()
            if ledger != ledger_now:
                prev = None if ledger_now < 0 else (ledger_now, entry_now)
                await progress.ledger_changed(prev, (ledger, entry))
                ledger_now = ledger
            entry_now = entry
            include, done = is_past(ledger, entry, mid.batch_index(), mid.batch_size(), end)
            if include:
                builder.add(msg)
            if done:
                return True
        return False
    finally:
        progress.ledger, progress.entry = ledger_now, entry_now
