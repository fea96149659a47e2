"""What the driver hands a task: one ``PartitionRange`` per partition with data.

Planning checks that what each range needs is still stored (``failOnDataLoss``, see
:mod:`pyspark_quasar.data_loss`): the start's ledger (the last message read, or a
user-given start) and the end's. It asks the admin API for the partition's ledger
list unless the range lies in the ledger that holds the partition's newest message
(seen moments ago), which is a tailing query's usual case. With
``failOnDataLoss=false`` a range whose start is gone is read from the earliest
message still stored, and a range that is gone altogether is dropped.

This module and those it imports stay light: Spark unpickles the reader (and so
imports them) in processes that only plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

from pyspark_quasar.data_loss import DataLoss, bound_text, range_loss, report
from pyspark_quasar.ledgers import (
    LedgerSpan,
    PlannedLedgers,
    is_deleted,
    planned_ledgers,
)
from pyspark_quasar.options import ClientSecurity, ConnectionOptions, SourceOptions
from pyspark_quasar.positions import EARLIEST, Bound


class PartitionRange(InputPartition):
    """One Spark task's work: partition ``topic``, messages in ``(start, end]``.

    ``planned`` is the partition's ledgers from the start's to the end's as the
    driver saw them stored (None when it did not ask: a range in one ledger).
    """

    def __init__(
        self, topic: str, start: Bound, end: Bound, planned: PlannedLedgers | None = None
    ) -> None:
        super().__init__((topic, str(start), str(end)))
        self.topic = topic
        self.start = str(start)
        self.end = str(end)
        self.planned = planned

    def __repr__(self) -> str:
        return f"PartitionRange({self.topic}, {self.start}, {self.end})"


@dataclass(frozen=True)
class ReadSettings:
    """What a task needs to read (pickled to the executors with each task)."""

    service_url: str
    admin_url: str
    operation_timeout_s: int
    poll_timeout_ms: int
    receiver_queue_size: int
    arrow_batch_rows: int
    fail_on_data_loss: bool
    # Credentials and TLS: strings, turned into credentials on the executor.
    security: ClientSecurity = field(default_factory=ClientSecurity)

    @property
    def conn(self) -> ConnectionOptions:
        return ConnectionOptions(
            self.service_url, self.admin_url, self.operation_timeout_s, self.security
        )

    @staticmethod
    def of(opts: SourceOptions) -> ReadSettings:
        return ReadSettings(
            service_url=opts.conn.service_url,
            admin_url=opts.conn.admin_url,
            operation_timeout_s=opts.conn.operation_timeout_s,
            poll_timeout_ms=opts.poll_timeout_ms,
            receiver_queue_size=opts.receiver_queue_size,
            arrow_batch_rows=opts.arrow_batch_rows,
            fail_on_data_loss=opts.fail_on_data_loss,
            security=opts.conn.security,
        )


def plan_ranges(
    starts: dict[str, Bound],
    ends: dict[str, Bound],
    ledger_spans: Callable[[str], list[LedgerSpan] | None],
    newest_ledgers: dict[str, int],
    fail_on_data_loss: bool,
) -> list[InputPartition]:
    """The ranges ``(starts[p], ends[p]]`` with data, checked for data loss.

    ``newest_ledgers`` maps partitions to the ledger of their newest readable
    message as just seen. A partition in ``starts`` but not in ``ends`` was deleted.

    Raises:
        DataLossError: ``fail_on_data_loss`` and messages a range needs are gone.
    """
    for topic in sorted(set(starts) - set(ends)):
        report(
            DataLoss(topic, bound_text(starts[topic]), "up to its end", "the partition was deleted"),
            fail_on_data_loss,
        )
    out: list[InputPartition] = []
    for topic, end in sorted(ends.items()):
        start = starts.get(topic, Bound.earliest())
        if start.is_empty_range_to(end):
            continue
        if start.kind != EARLIEST and start.ledger == end.ledger == newest_ledgers.get(topic):
            out.append(PartitionRange(topic, start, end))
            continue
        spans = ledger_spans(topic)
        loss = range_loss(topic, start, end, spans)
        if loss is not None:
            report(loss, fail_on_data_loss)
            if spans is None or is_deleted(spans, end.ledger):
                continue  # nothing of the range is stored
            start = Bound.earliest()
        planned = None
        if spans is not None:
            first = None if start.kind == EARLIEST else start.ledger
            planned = planned_ledgers(spans, first, end.ledger)
        out.append(PartitionRange(topic, start, end, planned))
    return out
