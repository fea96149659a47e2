"""PySpark data source ``quasar``: batch and streaming reads, an exactly-once sink.

Spark finds it without a registration call: its Python worker registers every
top-level module named ``pyspark_*`` that has a ``DefaultSource``::

    spark.read.format("quasar").option("service.url", "pulsar://127.0.0.1:6650")
        .option("topic", "in").load()

    (df.writeStream.format("quasar").option("service.url", ...)
        .option("topic", "out").option("checkpointLocation", "/ckpt").start())

Options, schema, guarantees and failure behaviour: ``docs/spark.md``. The connector
uses only ``quasar.client`` (enforced by ``tests/test_layering.py``). Nothing here
connects to anything until Spark asks for data: ``DataSource`` objects are built many
times, in many processes, and Spark imports this package in each of them (the data
source lookup, planning, every task's Python worker), so it imports no client, no
Arrow and no HTTP code itself: each part imports what it needs when it is used.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from pyspark_quasar.options import ConnectionOptions, SinkOptions, SourceOptions

__all__ = ["SOURCE_SCHEMA_DDL", "DefaultSource", "QuasarDataSource"]

# The source's rows in Spark's terms; pyspark_quasar.schema builds them in Arrow's.
SOURCE_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, messageId string, "
    "publishTime timestamp, eventTime timestamp, properties map<string,string>, "
    "producerName string"
)


class QuasarDataSource(DataSource):
    """The ``quasar`` format (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "quasar"

    def schema(self) -> str:
        return SOURCE_SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        from pyspark_quasar.source import QuasarBatchReader

        opts = SourceOptions.parse(self.options, streaming=False)
        _check_security(opts.conn)
        return QuasarBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from pyspark_quasar.source import QuasarStreamReader

        opts = SourceOptions.parse(self.options, streaming=True)
        _check_security(opts.conn)
        return QuasarStreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pyspark_quasar.sink import QuasarBatchWriter

        opts = SinkOptions.parse(self.options)
        _check_security(opts.conn)
        return QuasarBatchWriter(opts, self._fail_points())

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pyspark_quasar.sink import QuasarStreamWriter

        opts = SinkOptions.parse(self.options)
        _check_security(opts.conn)
        return QuasarStreamWriter(opts, self._fail_points())

    def _fail_points(self) -> str | None:
        value = self.options.get("test.failpoints")
        return None if value is None else str(value)


def _check_security(conn: ConnectionOptions) -> None:
    """Fail the query's definition on credentials or TLS settings that cannot be
    used (the check needs the client package, imported here on use)."""
    from pyspark_quasar.security import check_security

    check_security(conn)


DefaultSource = QuasarDataSource
