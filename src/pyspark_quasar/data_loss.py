"""``failOnDataLoss``: noticing that messages a query needs are gone, and reporting it.

Kafka's and Spark's meaning: when data the query still has to read is no longer
stored — deleted by retention, or with its topic — ``failOnDataLoss=true`` (the
default) fails the query with an error naming the topic, the partition and the
missing range; ``false`` logs a warning and goes on from the earliest message still
stored. The driver checks every planned range against the partition's ledger list;
a task checks what its reader delivers (the reader skips what is deleted meanwhile).
Like Kafka's, the check may raise a false alarm (see :mod:`pyspark_quasar.ledgers`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark_quasar.ledgers import LedgerSpan, first_position, is_deleted
from pyspark_quasar.names import partition_index
from pyspark_quasar.positions import EARLIEST, Bound

log = logging.getLogger("pyspark_quasar")

_FAIL_HINT = (
    " Some data may have been lost because it is not stored any more: deleted by the "
    "broker's retention before the query read it, or the topic was deleted. To go on "
    'from the earliest message still stored, set the source option "failOnDataLoss" '
    'to "false"; to keep data until the query reads it, give the namespace a '
    "retention time longer than the query's trigger interval and downtime."
)


class DataLossError(RuntimeError):
    """Messages the query needs are gone from the broker (retention, deletion)."""


@dataclass(frozen=True)
class DataLoss:
    """Messages of ``topic`` in a span described by ``after`` and ``until`` are gone."""

    topic: str
    after: str  # "after 12:40", "from 12:40" or "from the partition's beginning"
    until: str  # "before 15:0 (the first message still stored)", ...
    cause: str

    def message(self) -> str:
        return (
            f"{self.topic} (partition {partition_index(self.topic)}): the messages "
            f"{self.after} {self.until} are no longer stored ({self.cause})."
        )


def bound_text(bound: Bound) -> str:
    if bound.kind == EARLIEST:
        return "from the partition's beginning"
    return f"{bound.kind} {bound.ledger}:{bound.entry}"


def until_text(position: tuple[int, int] | None) -> str:
    """Where the gap ends: the next message the reader has (or the first stored)."""
    if position is None:
        return "up to the partition's end (it stores no message now)"
    return f"before {position[0]}:{position[1]} (the first message still stored)"


def range_loss(
    topic: str, start: Bound, end: Bound, spans: list[LedgerSpan] | None
) -> DataLoss | None:
    """The driver's check of a planned range ``(start, end]``; None if all is stored.

    ``spans`` is the partition's ledger list now (None: the partition is gone).
    """
    if spans is None:
        return DataLoss(
            topic, bound_text(start), f"up to {end.ledger}:{end.entry} (the range's end)",
            "the partition was deleted",
        )
    for ledger in (start.ledger if start.kind != EARLIEST else None, end.ledger):
        if ledger is not None and ledger >= 0 and is_deleted(spans, ledger):
            return DataLoss(
                topic, bound_text(start), until_text(first_position(spans)),
                f"ledger {ledger} was deleted",
            )
    return None


def report(loss: DataLoss, fail_on_data_loss: bool) -> None:
    """Raise (``failOnDataLoss=true``) or log a warning.

    Raises:
        DataLossError: ``fail_on_data_loss`` is set.
    """
    if fail_on_data_loss:
        raise DataLossError(loss.message() + _FAIL_HINT)
    log.warning(
        "%s Going on with the messages still stored (failOnDataLoss=false).",
        loss.message(),
    )
