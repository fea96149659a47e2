"""The source's fixed row schema, in Spark's and in Arrow's terms, and row building."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pyspark_quasar.topics import partition_index

SOURCE_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, messageId string, "
    "publishTime timestamp, eventTime timestamp, properties map<string,string>, "
    "producerName string"
)

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
        self.ids: list[str] = []
        self.publish: list[int] = []
        self.event: list[int | None] = []
        self.props: list[list[tuple[str, str]]] = []
        self.producers: list[str] = []

    def __len__(self) -> int:
        return len(self.values)

    def add(self, msg: Any) -> None:
        mid = msg.message_id()
        key = msg.partition_key()
        self.keys.append(key.encode() if key else None)
        self.values.append(msg.data())
        self.ids.append(f"{mid.ledger_id()}:{mid.entry_id()}:{mid.batch_index()}")
        self.publish.append(msg.publish_timestamp() * 1000)
        event = msg.event_timestamp()
        self.event.append(event * 1000 if event else None)
        props = msg.properties()
        self.props.append(list(props.items()) if props else [])
        self.producers.append(msg.producer_name())

    def flush(self) -> pa.RecordBatch:
        n = len(self.values)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(self.keys, pa.binary()),
                pa.array(self.values, pa.binary()),
                pa.array([self.topic] * n, pa.string()),
                pa.array([self.partition] * n, pa.int32()),
                pa.array(self.ids, pa.string()),
                pa.array(self.publish, pa.timestamp("us", tz="UTC")),
                pa.array(self.event, pa.timestamp("us", tz="UTC")),
                pa.array(self.props, pa.map_(pa.string(), pa.string())),
                pa.array(self.producers, pa.string()),
            ],
            schema=ARROW_SCHEMA,
        )
        self._reset()
        return batch
