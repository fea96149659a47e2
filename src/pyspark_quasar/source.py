"""The batch reader and the streaming reader (``DataSourceStreamReader``).

Both plan on the driver — one ``PartitionRange`` per partition with data — and read on
the executors with :func:`read_partition`. Offsets are described in
:mod:`pyspark_quasar.positions`; the Spark checkpoint's offset log is the only record of
progress (``commit(end)`` keeps nothing on the broker).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from pyspark_quasar.admission import limit_offsets
from pyspark_quasar.options import SourceOptions, UserPosition
from pyspark_quasar.partition_reader import PartitionRange, ReadSettings, read_partition
from pyspark_quasar.positions import (
    EARLIEST,
    LATEST,
    Bound,
    decode_offset,
    encode_offset,
)
from pyspark_quasar.topics import (
    BrokerView,
    base_topic,
    full_topic_name,
    partition_index,
)


def _settings(opts: SourceOptions) -> ReadSettings:
    return ReadSettings(
        service_url=opts.conn.service_url,
        operation_timeout_s=opts.conn.operation_timeout_s,
        poll_timeout_ms=opts.poll_timeout_ms,
        receiver_queue_size=opts.receiver_queue_size,
        arrow_batch_rows=opts.arrow_batch_rows,
        fail_on_data_loss=opts.fail_on_data_loss,
    )


def _user_position(
    spec: UserPosition | dict[str, dict[str, UserPosition]], partition: str, default: str
) -> UserPosition:
    if not isinstance(spec, dict):
        return spec
    parts = spec.get(base_topic(partition))
    if parts is None:
        for topic, p in spec.items():
            if full_topic_name(topic) == base_topic(partition):
                parts = p
                break
    if parts is None:
        return default
    return parts.get(str(partition_index(partition)), default)


def _resolve(view: BrokerView, partition: str, pos: UserPosition) -> Bound:
    if isinstance(pos, Bound):
        return pos
    if pos == EARLIEST:
        return Bound.earliest()
    assert pos == LATEST
    return view.last_message(partition)


def _plan(starts: dict[str, Bound], ends: dict[str, Bound]) -> list[InputPartition]:
    out: list[InputPartition] = []
    for topic, end in sorted(ends.items()):
        start = starts.get(topic, Bound.earliest())
        if not start.is_empty_range_to(end):
            out.append(PartitionRange(topic, start, end))
    return out


class QuasarBatchReader(DataSourceReader):
    """``spark.read.format("quasar")``: every partition from its start to its end."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.settings = _settings(opts)

    def partitions(self) -> Sequence[InputPartition]:
        view = BrokerView(self.opts)
        try:
            starts: dict[str, Bound] = {}
            ends: dict[str, Bound] = {}
            for p in view.partitions():
                if self.opts.starting_timestamp_ms is not None:
                    first = view.first_at_or_after(p, self.opts.starting_timestamp_ms)
                    starts[p] = first or view.last_message(p)
                else:
                    pos = _user_position(self.opts.starting, p, EARLIEST)
                    starts[p] = _resolve(view, p, pos)
                ends[p] = _resolve(view, p, _user_position(self.opts.ending, p, LATEST))
            return _plan(starts, ends)
        finally:
            view.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PartitionRange)
        yield from read_partition(partition, self.settings)


class QuasarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("quasar")`` with admission control and AvailableNow.

    One instance lives in the driver's reader worker for the whole run; its
    ``read`` runs on executors on a pickled copy, so everything it needs is in the
    partition and in ``settings``.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.settings = _settings(opts)
        self._view: BrokerView | None = None
        self._target: dict[str, Bound] | None = None  # Trigger.AvailableNow
        self._latest: dict[str, Bound] | None = None

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_view"] = None  # the driver's client stays on the driver
        return state

    @property
    def view(self) -> BrokerView:
        if self._view is None:
            self._view = BrokerView(self.opts)
        return self._view

    def initialOffset(self) -> dict[str, str]:
        view = self.view
        bounds: dict[str, Bound] = {}
        for p in view.partitions():
            if self.opts.starting_timestamp_ms is not None:
                first = view.first_at_or_after(p, self.opts.starting_timestamp_ms)
                bounds[p] = first or view.last_message(p)
            else:
                pos = _user_position(self.opts.starting, p, LATEST)
                bounds[p] = _resolve(view, p, pos)
        return encode_offset(bounds)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_records_per_trigger is not None:
            return ReadMaxRows(self.opts.max_records_per_trigger)
        if self.opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        view = self.view
        self._target = {p: view.last_message(p) for p in view.partitions()}

    def _caps(self) -> dict[str, Bound]:
        if self._target is not None:
            return dict(self._target)
        view = self.view
        # Partitions added to a topic (or topics matching the pattern) since the
        # last trigger join here and are read from their start.
        return {p: view.last_message(p) for p in view.partitions()}

    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        starts = decode_offset(start)
        caps = self._caps()
        for topic, bound in starts.items():
            caps.setdefault(topic, bound)  # a partition no longer listed stays put
        max_entries = max_bytes = None
        if isinstance(limit, ReadMaxRows):
            max_entries = limit.max_rows
            max_bytes = self.opts.max_bytes_per_trigger
        elif isinstance(limit, ReadMaxBytes):
            max_bytes = limit.max_bytes
        ends = limit_offsets(
            starts, caps, self.view.ledger_spans, max_entries, max_bytes
        )
        # Never move a partition backwards (a cap behind the start means the broker
        # lost data; the range is empty and the read side reports it).
        for topic, end in list(ends.items()):
            s = starts.get(topic)
            if s is not None and s.kind != EARLIEST and (
                end.kind != "after" or end.key < s.key
            ):
                ends[topic] = s
        self._latest = caps
        return encode_offset(ends)

    def reportLatestOffset(self) -> dict[str, str] | None:
        return None if self._latest is None else encode_offset(self._latest)

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        return _plan(decode_offset(start), decode_offset(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PartitionRange)
        yield from read_partition(partition, self.settings)

    def commit(self, end: dict[str, str]) -> None:
        """Nothing to do: the offset log is the truth, and readers keep no cursor."""

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None
