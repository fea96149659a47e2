"""Reading one partition's range ``(start, end]`` on an executor, as Arrow batches.

Each Spark task opens its own asyncio client and a reader on its partition (a reader
is a non-durable subscription: nothing is left on the broker). Only committed data
arrives — the broker holds dispatch at the max read position and filters aborted
transactions and markers — so the task only has to stop at ``end``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from pyspark_quasar.positions import EARLIEST, Bound, is_past
from pyspark_quasar.schema import BatchBuilder
from quasar.client import aio
from quasar.client.exceptions import Timeout
from quasar.client.message_id import MessageId


class DataLossError(RuntimeError):
    """Messages of the planned range are gone from the broker (retention, deletion)."""


class PartitionRange(InputPartition):
    """One Spark task's work: partition ``topic``, messages in ``(start, end]``."""

    def __init__(self, topic: str, start: Bound, end: Bound) -> None:
        super().__init__((topic, str(start), str(end)))
        self.topic = topic
        self.start = str(start)
        self.end = str(end)

    def __repr__(self) -> str:
        return f"PartitionRange({self.topic}, {self.start}, {self.end})"


@dataclass(frozen=True)
class ReadSettings:
    service_url: str
    operation_timeout_s: int
    poll_timeout_ms: int
    receiver_queue_size: int
    arrow_batch_rows: int
    fail_on_data_loss: bool


def _start_id(start: Bound) -> tuple[MessageId, bool]:
    if start.kind == EARLIEST:
        return MessageId.earliest, False
    mid = MessageId(-1, start.ledger, start.entry, start.batch)
    return mid, start.kind == "from"


def read_partition(part: PartitionRange, settings: ReadSettings) -> Iterator[pa.RecordBatch]:
    """Yield the range's messages in order, ``arrow_batch_rows`` rows at a time.

    Raises:
        DataLossError: the range's last message never arrives and the broker has
            nothing more to read (``failOnDataLoss=true``; otherwise the task ends
            with what it got).
    """
    start, end = Bound.parse(part.start), Bound.parse(part.end)
    if start.is_empty_range_to(end):
        return
    loop = asyncio.new_event_loop()
    try:
        session = loop.run_until_complete(_open(part.topic, start, settings))
        try:
            builder = BatchBuilder(part.topic)
            done = False
            while not done:
                done = loop.run_until_complete(
                    _fill(session, builder, end, settings)
                )
                if len(builder):
                    yield builder.flush()
        finally:
            loop.run_until_complete(session[0].close())
    finally:
        loop.close()


async def _open(
    topic: str, start: Bound, settings: ReadSettings
) -> tuple[aio.Client, aio.Reader]:
    client = aio.Client(
        settings.service_url, operation_timeout_seconds=settings.operation_timeout_s
    )
    start_id, inclusive = _start_id(start)
    try:
        reader = await client.create_reader(
            topic,
            start_id,
            receiver_queue_size=settings.receiver_queue_size,
            start_message_id_inclusive=inclusive,
        )
    except BaseException:
        await client.close()
        raise
    return client, reader


async def _fill(
    session: tuple[aio.Client, aio.Reader],
    builder: BatchBuilder,
    end: Bound,
    settings: ReadSettings,
) -> bool:
    """Add messages to ``builder`` until it is full or ``end`` is reached (True)."""
    _, reader = session
    while len(builder) < settings.arrow_batch_rows:
        try:
            msg = await reader.read_next(settings.poll_timeout_ms)
        except Timeout:
            if await reader.has_message_available():
                continue  # slow, not gone
            if settings.fail_on_data_loss:
                raise DataLossError(
                    f"{reader.topic()}: the planned range ends at {end} but the broker "
                    "has no more messages (deleted by retention?); set "
                    "failOnDataLoss=false to continue without them"
                ) from None
            return True
        mid = msg.message_id()
        include, done = is_past(
            mid.ledger_id(), mid.entry_id(), mid.batch_index(), mid.batch_size(), end
        )
        if include:
            builder.add(msg)
        if done:
            return True
    return False
