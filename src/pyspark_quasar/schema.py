"""The source's fixed row schema in Arrow's terms (``SOURCE_SCHEMA_DDL`` in the package
is Spark's), and row building."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pyspark_quasar.names import partition_index

_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("messageId", pa.string()),
        ("publishTime", pa.timestamp("us", tz="UTC")),
        ("eventTime", pa.timestamp("us", tz="UTC")),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("producerName", pa.string()),
    ]
)


class BatchBuilder:
    """Accumulates messages of one partition into Arrow record batches (column lists)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.partition = partition_index(topic)
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes] = []
        self.ledgers: list[int] = []
        self.entries: list[int] = []
        self.batches: list[int] = []
        self.publish: list[int] = []
        self.event: list[int | None] = []
        self.props: list[list[tuple[str, str]]] = []
        self.producers: list[str] = []

    def __len__(self) -> int:
        return len(self.values)

    def add(self, msg: Any) -> None:
        # The per-message cost of a read: keep it to the accessor calls.
        mid = msg.message_id()
        key = msg.partition_key()
        self.keys.append(key.encode() if key else None)
        self.values.append(msg.data())
        self.ledgers.append(mid.ledger_id())
        self.entries.append(mid.entry_id())
        self.batches.append(mid.batch_index())
        self.publish.append(msg.publish_timestamp())
        event = msg.event_timestamp()
        self.event.append(event or None)
        props = msg.properties()
        self.props.append(list(props.items()) if props else [])
        self.producers.append(msg.producer_name())

    def flush(self) -> pa.RecordBatch:
        n = len(self.values)
        ms = pa.timestamp("ms", tz="UTC")
        message_ids = pc.binary_join_element_wise(
            pc.cast(pa.array(self.ledgers, pa.int64()), pa.string()),
            pc.cast(pa.array(self.entries, pa.int64()), pa.string()),
            pc.cast(pa.array(self.batches, pa.int64()), pa.string()),
            ":",
        )
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(self.keys, pa.binary()),
                pa.array(self.values, pa.binary()),
                pa.array([self.topic] * n, pa.string()),
                pa.array([self.partition] * n, pa.int32()),
                message_ids,
                pa.array(self.publish, pa.int64()).cast(ms).cast(_TS),
                pa.array(self.event, pa.int64()).cast(ms).cast(_TS),
                pa.array(self.props, pa.map_(pa.string(), pa.string())),
                pa.array(self.producers, pa.string()),
            ],
            schema=ARROW_SCHEMA,
        )
        self._reset()
        return batch
