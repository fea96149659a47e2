"""What a sink task attempt is and what it reports to the driver's commit.

Kept apart from the task's writer: the driver's commit runs in a Python process that
unpickles these messages, and importing them must not import pyarrow (a few hundred
milliseconds of the first micro-batch, whose commit process starts cold).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import WriterCommitMessage

from pyspark_quasar.decisions import TxnRecord


@dataclass
class QuasarCommitMessage(WriterCommitMessage):
    """What a successful task attempt reports to the driver's commit."""

    sink_id: str
    batch_id: int
    partition: int
    attempt: int
    rows: int
    txn: TxnRecord | None  # None: at-least-once


@dataclass(frozen=True)
class TaskIdentity:
    sink_id: str
    batch_id: int
    partition: int
    attempt: int

    @property
    def client_name(self) -> str:
        return client_name(self.sink_id, self.partition)


def client_name(sink_id: str, partition: int) -> str:
    """The client name of a sink's transactions for one Spark partition."""
    return f"{sink_id}-p{partition}"
