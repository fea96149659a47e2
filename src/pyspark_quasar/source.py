"""The batch reader and the streaming reader (``DataSourceStreamReader``).

Both plan on the driver — one ``PartitionRange`` per partition with data, checked for
data loss (:mod:`pyspark_quasar.plan`) — and read on the executors with
:func:`~pyspark_quasar.partition_reader.read_partition`. Offsets are described in
:mod:`pyspark_quasar.positions`; the Spark checkpoint's offset log is the only record of
progress (``commit(end)`` keeps nothing on the broker). The broker's client, Arrow and
the admin API's HTTP code are imported where they are used: Spark imports this module
in processes that only unpickle the reader.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

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

from pyspark_quasar.names import base_topic, full_topic_name, partition_index
from pyspark_quasar.options import SourceOptions, UserPosition
from pyspark_quasar.plan import PartitionRange, ReadSettings, plan_ranges
from pyspark_quasar.positions import (
    EARLIEST,
    LATEST,
    Bound,
    decode_offset,
    encode_offset,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from pyspark_quasar.topics import BrokerView


def _read(partition: InputPartition, settings: ReadSettings) -> Iterator[pa.RecordBatch]:
    from pyspark_quasar.partition_reader import read_partition

    assert isinstance(partition, PartitionRange)
    yield from read_partition(partition, settings)


def _broker_view(opts: SourceOptions) -> BrokerView:
    from pyspark_quasar.topics import BrokerView

    return BrokerView(opts)


def _newest_ledgers(bounds: dict[str, Bound]) -> dict[str, int]:
    """The ledgers of the partitions' newest readable messages (``bounds`` just seen)."""
    return {t: b.ledger for t, b in bounds.items() if b.kind == "after"}


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


class QuasarBatchReader(DataSourceReader):
    """``spark.read.format("quasar")``: every partition from its start to its end."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.settings = ReadSettings.of(opts)

    def partitions(self) -> Sequence[InputPartition]:
        view = _broker_view(self.opts)
        try:
            starts: dict[str, Bound] = {}
            ends: dict[str, Bound] = {}
            newest: dict[str, Bound] = {}
            for p in view.partitions():
                if self.opts.starting_timestamp_ms is not None:
                    first = view.first_at_or_after(p, self.opts.starting_timestamp_ms)
                    starts[p] = first or view.last_message(p)
                else:
                    pos = _user_position(self.opts.starting, p, EARLIEST)
                    starts[p] = _resolve(view, p, pos)
                pos = _user_position(self.opts.ending, p, LATEST)
                ends[p] = _resolve(view, p, pos)
                if pos == LATEST:
                    newest[p] = ends[p]
            return plan_ranges(
                starts, ends, view.ledger_spans, _newest_ledgers(newest),
                self.opts.fail_on_data_loss,
            )
        finally:
            view.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.settings)


class QuasarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("quasar")`` with admission control and AvailableNow.

    One instance lives in the driver's reader worker for the whole run; its
    ``read`` runs on executors on a pickled copy, so everything it needs is in the
    partition and in ``settings``.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.settings = ReadSettings.of(opts)
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
            self._view = _broker_view(self.opts)
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
        for topic in starts.keys() - caps.keys():
            # No longer listed: deleted. Left out of the end offset, so planning
            # reports it (failOnDataLoss) and later offsets forget it.
            self.view.forget(topic)
        max_entries = max_bytes = None
        if isinstance(limit, ReadMaxRows):
            max_entries = limit.max_rows
            max_bytes = self.opts.max_bytes_per_trigger
        elif isinstance(limit, ReadMaxBytes):
            max_bytes = limit.max_bytes
        from pyspark_quasar.admission import limit_offsets

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
        # The caps of the latestOffset call that made ``end`` (none when a restarted
        # query replays its last batch, and AvailableNow's were frozen at its start):
        # their ledgers are known to be stored.
        fresh = self._latest if self._latest is not None and self._target is None else {}
        newest = _newest_ledgers(fresh)
        return plan_ranges(
            decode_offset(start), decode_offset(end), self.view.ledger_spans, newest,
            self.opts.fail_on_data_loss,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.settings)

    def commit(self, end: dict[str, str]) -> None:
        """Nothing to do: the offset log is the truth, and readers keep no cursor."""

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None
