"""The executor side of the sink: one task attempt publishes its rows.

Exactly-once: the attempt opens one transaction under the client name
``<sinkId>-p<partition>``, publishes every row in it, waits for every receipt and
returns the transaction id in its commit message; it never commits. Any failure
aborts the attempt's own transaction (best effort: what a killed task leaves open
the driver's sweep aborts). At-least-once: plain sends, flushed before returning.

Input columns: ``value`` (binary or string, required), ``key`` (binary or string),
``topic`` (string; the ``topic`` option wins), ``properties`` (map<string,string>),
``eventTime`` (timestamp).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pyspark_quasar.commit_message import QuasarCommitMessage, TaskIdentity
from pyspark_quasar.decisions import TxnRecord
from pyspark_quasar.faults import fail_point
from pyspark_quasar.options import EXACTLY_ONCE, SinkOptions
from pyspark_quasar.security import client_options
from quasar.client import aio


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    idx = batch.schema.get_field_index(name)
    return None if idx < 0 else batch.column(idx)


def _as_bytes(col: pa.Array | None, n: int) -> list[Any]:
    if col is None:
        return [None] * n
    return list(col.to_pylist())


def _event_ms(col: pa.Array | None, n: int) -> list[int | None]:
    if col is None:
        return [None] * n
    if pa.types.is_timestamp(col.type):
        col = pc.cast(col, pa.timestamp("ms", tz=col.type.tz)).cast(pa.int64())
    return list(col.to_pylist())


def _values_only(batch: pa.RecordBatch) -> bool:
    """True when no row has a key, properties, event time or topic of its own (a
    null or an empty map of properties is none, as on the per-row path)."""
    for name in ("key", "properties", "eventTime", "topic"):
        col = _column(batch, name)
        if col is None or col.null_count == len(col):
            continue
        if name == "properties" and pa.types.is_map(col.type):
            offsets = col.offsets
            if len(offsets) and offsets[-1].as_py() == offsets[0].as_py():
                continue
        return False
    return True


def _key_str(key: Any) -> str | None:
    if key is None:
        return None
    if isinstance(key, bytes):
        return key.decode("utf-8", "surrogateescape")
    return str(key)


class _Publisher:
    """One task attempt's client, transaction and producers (on one event loop)."""

    def __init__(self, opts: SinkOptions, ident: TaskIdentity) -> None:
        self.opts = opts
        self.ident = ident
        self.exactly_once = opts.delivery_guarantee == EXACTLY_ONCE
        self.client: aio.Client | None = None
        self.txn: aio.Transaction | None = None
        self.producers: dict[str, aio.Producer] = {}
        self.errors: list[BaseException] = []
        self.rows = 0

    async def open(self) -> None:
        kwargs: dict[str, Any] = client_options(self.opts.conn)
        if self.exactly_once:
            kwargs.update(enable_transaction=True, client_name=self.ident.client_name)
        self.client = aio.Client(
            self.opts.conn.service_url,
            operation_timeout_seconds=self.opts.conn.operation_timeout_s,
            **kwargs,
        )
        if self.exactly_once:
            self.txn = await self.client.new_transaction(self.opts.txn_timeout_ms)

    async def _producer(self, topic: str) -> aio.Producer:
        p = self.producers.get(topic)
        if p is None:
            assert self.client is not None
            p = await self.client.create_producer(
                topic,
                batching_enabled=True,
                batching_max_messages=self.opts.batching_max_messages,
                batching_max_allowed_size_in_bytes=self.opts.batching_max_bytes,
                batching_max_publish_delay_ms=5,
                block_if_queue_full=True,
                max_pending_messages=self.opts.max_pending_messages,
            )
            self.producers[topic] = p
        return p

    def _done(self, error: BaseException | None, _mid: Any) -> None:
        if error is not None and len(self.errors) < 10:
            self.errors.append(error)

    async def publish(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        values_col = _column(batch, "value")
        if values_col is None:
            raise ValueError("the quasar sink needs a 'value' column")
        if self.opts.topic is not None and _values_only(batch):
            await self._publish_values(self.opts.topic, values_col)
            return
        values = values_col.to_pylist()
        keys = _as_bytes(_column(batch, "key"), n)
        topics_col = _column(batch, "topic") if self.opts.topic is None else None
        topics = _as_bytes(topics_col, n) if topics_col is not None else None
        props = _as_bytes(_column(batch, "properties"), n)
        events = _event_ms(_column(batch, "eventTime"), n)
        fixed = self.opts.topic
        producer = await self._producer(fixed) if fixed is not None else None
        for i in range(n):
            if self.errors:
                raise self.errors[0]
            value = values[i]
            if value is None:
                raise ValueError("the quasar sink cannot write a null value")
            if isinstance(value, str):
                value = value.encode()
            if producer is None:
                assert topics is not None
                topic = topics[i]
                if not topic:
                    raise ValueError("no topic: set the topic option or a topic column")
                p = await self._producer(topic)
            else:
                p = producer
            kwargs: dict[str, Any] = {}
            if keys[i] is not None:
                kwargs["partition_key"] = _key_str(keys[i])
            if props[i]:
                kwargs["properties"] = dict(props[i])
            if events[i] is not None:
                kwargs["event_timestamp"] = int(events[i])
            if self.txn is not None:
                kwargs["txn"] = self.txn
            await p.send_async(value, self._done, **kwargs)
        self.rows += n

    async def _publish_values(self, topic: str, values_col: pa.Array) -> None:
        """A batch that is only values, to one topic: handed to the producer as a
        list of payloads, which it packs into batch entries without an object, a
        callback or a transaction operation per row."""
        if values_col.null_count:
            raise ValueError("the quasar sink cannot write a null value")
        if self.errors:
            raise self.errors[0]
        if not pa.types.is_binary(values_col.type):
            # UTF-8 strings are already their bytes; large types fit one batch entry.
            values_col = values_col.cast(pa.binary())
        producer = await self._producer(topic)
        await producer.send_payloads_async(values_col.to_pylist(), self._done, txn=self.txn)
        self.rows += len(values_col)

    async def finish(self) -> None:
        await asyncio.gather(*(p.flush() for p in self.producers.values()))
        if self.errors:
            raise self.errors[0]

    async def abort(self) -> None:
        if self.txn is not None:
            try:
                await self.txn.abort()
            except Exception:  # best effort: the driver's sweep aborts what is left
                pass

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()


def write_task(
    opts: SinkOptions,
    ident: TaskIdentity,
    batches: Iterator[pa.RecordBatch],
    fail_points: str | None,
) -> QuasarCommitMessage:
    """Publish every row of the task's input; see the module docstring.

    Raises:
        whatever publishing raised, after aborting the attempt's transaction.
    """
    loop = asyncio.new_event_loop()
    pub = _Publisher(opts, ident)
    try:
        try:
            loop.run_until_complete(pub.open())
            for batch in batches:
                loop.run_until_complete(pub.publish(batch))
            loop.run_until_complete(pub.finish())
            fail_point(
                fail_points, "task.write", ident.batch_id, ident.partition, ident.attempt
            )
        except BaseException:
            loop.run_until_complete(pub.abort())
            raise
        finally:
            loop.run_until_complete(pub.close())
    finally:
        loop.close()
    record = None
    if pub.txn is not None:
        tid = pub.txn.id
        record = TxnRecord(
            most=int(tid[0]),
            least=int(tid[1]),
            client=ident.client_name,
            partition=ident.partition,
            attempt=ident.attempt,
            rows=pub.rows,
        )
    return QuasarCommitMessage(
        sink_id=ident.sink_id,
        batch_id=ident.batch_id,
        partition=ident.partition,
        attempt=ident.attempt,
        rows=pub.rows,
        txn=record,
    )
