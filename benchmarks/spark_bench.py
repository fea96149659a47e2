#!/usr/bin/env python3
"""The Spark connector's throughput next to Spark-only baselines, in one script.

    python benchmarks/spark_bench.py [--rows 200000] [--size 1024] [--partitions 2]
                                     [--master local[2]] [--out FILE.json]
                                     [--only read,write,pipeline]

Starts a broker (``quasar standalone``, default configuration: fsync on) on free ports
with a temporary data directory and one Spark session (``local[2]``), then measures
rows/s over the micro-batches' durations (Spark's ``processedRowsPerSecond``: query
and JVM start-up excluded):

* ``read``: after one warm-up query (reported as "cold"), ``--rows`` values of ``--size`` bytes already in a ``--partitions``-partition
  topic, streamed with Trigger.AvailableNow into the ``noop`` sink.
  Baselines: Spark's ``rate`` source into ``noop`` (the engine's own ceiling on this
  machine), and the same rows read back from parquet into ``noop``.
  Floor: >= 50,000 rows/s of 1 KB values.
* ``write``: after one warm-up query (reported as "cold"), the same rows from parquet
  into the quasar sink, exactly once (one transaction per task, the driver's
  decision and commits per micro-batch), and at least once. Baseline: the same rows
  from parquet written to parquet. Floor: >= 20,000 rows/s exactly once; targets:
  exactly once >= 0.50 of the baseline, at least once >= 0.80.
* ``pipeline``: the example (``examples/spark_window_aggregation.py``): two topics,
  10-second windows, the totals into a third topic exactly once. Baseline: the same
  aggregation over the same events read from parquet into ``noop``.

``--only`` picks the parts (the read part always runs: the others use its parquet).
Nothing asserts the floors; the script prints them next to the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

READ_FLOOR = 50_000
WRITE_FLOOR = 20_000
# Targets for the writes as fractions of parquet -> parquet in the same run.
WRITE_EO_TARGET = 0.50
WRITE_ALO_TARGET = 0.80


def produce(url: str, topic: str, rows: int, size: int) -> None:
    import quasar.client as qc

    client = qc.Client(url)
    try:
        producer = client.create_producer(
            topic, batching_enabled=True, block_if_queue_full=True,
            max_pending_messages_across_partitions=10_000,
        )
        body = b"x" * (size - 8)
        failures: list[Any] = []
        for i in range(rows):
            producer.send_async(
                b"%08d" % i + body,
                lambda r, m: failures.append(r) if r != qc.Result.Ok else None,
            )
        producer.flush()
        assert not failures, failures[:3]
    finally:
        client.close()


def create_partitioned(admin_url: str, topic: str, partitions: int) -> None:
    import urllib.request

    path = topic.split("://", 1)[1]
    req = urllib.request.Request(
        f"{admin_url}/admin/v2/persistent/{path}/partitions",
        data=str(partitions).encode(), method="PUT",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=30).close()


def timed(query_factory: Any) -> tuple[float, int, float]:
    """Run a started-by-factory streaming query to its end: (seconds, input rows,
    seconds from start() to the end).

    The seconds are the micro-batches' own durations (``triggerExecution``: planning,
    reading, writing and the sink's commit), which is what Spark's
    ``processedRowsPerSecond`` divides by; the query's start-up (Python worker and
    planner processes, ~5 s) is left out, as the rate baseline leaves it out.
    """
    started = time.perf_counter()
    query = query_factory()
    query.awaitTermination()
    wall_s = time.perf_counter() - started
    progress = query.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    seconds = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return seconds, rows, wall_s


def bench_rate(spark: Any, seconds: float) -> float:
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 2_000_000)
        .option("numPartitions", 2).load()
        .writeStream.format("noop").trigger(processingTime="1 second").start()
    )
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        query.awaitTermination(1)
    query.stop()
    progress = [p for p in query.recentProgress if p["numInputRows"]][1:]  # skip warm-up
    rates = [p["processedRowsPerSecond"] for p in progress]
    return sum(rates) / len(rates) if rates else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--pipeline-events", type=int, default=20_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--only", default="read,write,pipeline",
        help="comma-separated parts to run (read, write, pipeline)",
    )
    args = parser.parse_args(argv)
    parts = set(args.only.split(","))

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import spark_window_aggregation as wa
    from pyspark.sql import SparkSession

    from quasar.testing.process import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    broker = BrokerProcess(work / "data").start()
    results: dict[str, Any] = {"rows": args.rows, "size": args.size,
                               "partitions": args.partitions, "master": args.master}
    try:
        spark = (
            SparkSession.builder.master(args.master).appName("quasar-spark-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        url, admin = broker.url, broker.admin_url

        def quasar_opts(rw: Any) -> Any:
            return rw.format("quasar").option("service.url", url).option("admin.url", admin)

        src = "persistent://public/default/bench-in"
        create_partitioned(admin, src, args.partitions)
        t0 = time.perf_counter()
        produce(url, src, args.rows, args.size)
        results["produce_rows_per_s"] = args.rows / (time.perf_counter() - t0)

        # -- read -----------------------------------------------------------------
        # A first query pays for cold Python workers (imports of pyarrow, pyspark and
        # the client in each) and the JVM's warm-up; it is reported but not the figure.
        secs, n, wall = timed(lambda: quasar_opts(spark.readStream).option("topic", src)
                              .option("startingOffsets", "earliest").load()
                              .writeStream.format("noop").trigger(availableNow=True).start())
        results["read_cold_rows_per_s"] = n / secs
        results["read_cold_query_wall_s"] = wall
        secs, n, wall = timed(lambda: quasar_opts(spark.readStream).option("topic", src)
                              .option("startingOffsets", "earliest").load()
                              .writeStream.format("noop").trigger(availableNow=True).start())
        assert n == args.rows, (n, args.rows)
        results["read_rows_per_s"] = n / secs
        results["read_query_wall_s"] = wall
        results["rate_noop_rows_per_s"] = bench_rate(spark, 15)
        parquet = work / "rows.parquet"
        t0 = time.perf_counter()
        quasar_opts(spark.read).option("topic", src).load().select("key", "value") \
            .write.parquet(str(parquet))
        results["batch_read_to_parquet_rows_per_s"] = args.rows / (time.perf_counter() - t0)
        schema = spark.read.parquet(str(parquet)).schema
        secs, n, _ = timed(lambda: spark.readStream.schema(schema).parquet(str(parquet))
                        .writeStream.format("noop").trigger(availableNow=True).start())
        results["parquet_read_noop_rows_per_s"] = n / secs

        # -- write ----------------------------------------------------------------
        if "write" in parts:
            # The first quasar write of a session starts, inside its only micro-batch,
            # the Python processes Spark keeps for a Python sink (the one that builds
            # the writer and the one that runs its commit): reported, not the figure,
            # as for the read.
            for guarantee in ("cold", "exactly_once", "at_least_once"):
                dst = f"persistent://public/default/bench-out-{guarantee}"
                create_partitioned(admin, dst, args.partitions)
                ckpt = work / f"ckpt-{guarantee}"
                mode = "exactly_once" if guarantee == "cold" else guarantee
                secs, n, _ = timed(lambda dst=dst, ckpt=ckpt, g=mode:
                                quasar_opts(spark.readStream.schema(schema).parquet(str(parquet))
                                            .writeStream)
                                .option("topic", dst).option("deliveryGuarantee", g)
                                .option("checkpointLocation", str(ckpt))
                                .trigger(availableNow=True).start())
                assert n == args.rows, (n, args.rows)
                results[f"write_{guarantee}_rows_per_s"] = n / secs
            secs, n, _ = timed(lambda: spark.readStream.schema(schema).parquet(str(parquet))
                            .writeStream.format("parquet")
                            .option("path", str(work / "copy.parquet"))
                            .option("checkpointLocation", str(work / "ckpt-parquet"))
                            .trigger(availableNow=True).start())
            results["parquet_write_rows_per_s"] = n / secs

        # -- pipeline -------------------------------------------------------------
        if "pipeline" in parts:
            wa.generate(url, "bench", args.pipeline_events)
            in_a, in_b, out = wa.topic_names("bench")
            events = (quasar_opts(spark.readStream).option("topics", f"{in_a},{in_b}")
                      .option("startingOffsets", "earliest").load())
            secs, n, _ = timed(lambda: quasar_opts(wa.aggregate(events, streaming=True).writeStream)
                            .outputMode("append").option("topic", out)
                            .option("checkpointLocation", str(work / "ckpt-pipeline"))
                            .trigger(availableNow=True).start())
            results["pipeline_rows_per_s"] = n / secs
            ev_parquet = work / "events.parquet"
            quasar_opts(spark.read).option("topics", f"{in_a},{in_b}").load() \
                .select("value", "eventTime").write.parquet(str(ev_parquet))
            ev_schema = spark.read.parquet(str(ev_parquet)).schema
            secs, n, _ = timed(lambda: wa.aggregate(
                spark.readStream.schema(ev_schema).parquet(str(ev_parquet)), streaming=True)
                .writeStream.format("noop").outputMode("append")
                .option("checkpointLocation", str(work / "ckpt-pipeline-parquet"))
                .trigger(availableNow=True).start())
            results["pipeline_parquet_noop_rows_per_s"] = n / secs
        spark.stop()
    finally:
        broker.kill()
        shutil.rmtree(work, ignore_errors=True)

    r = results
    lines = [
        f"rows {r['rows']} x {r['size']} B, {r['partitions']} partitions, {r['master']}",
        f"streaming read (quasar -> noop)      {r['read_rows_per_s']:>10,.0f} rows/s"
        f"   floor {READ_FLOOR:,}: {'met' if r['read_rows_per_s'] >= READ_FLOOR else 'NOT met'}",
        f"  (first, cold query                 {r['read_cold_rows_per_s']:>10,.0f} rows/s;"
        f" query start to end {r['read_cold_query_wall_s']:.1f} s, warm"
        f" {r['read_query_wall_s']:.1f} s)",
        f"  baseline rate -> noop              {r['rate_noop_rows_per_s']:>10,.0f} rows/s",
        f"  baseline parquet -> noop           {r['parquet_read_noop_rows_per_s']:>10,.0f} rows/s",
        f"  batch read quasar -> parquet       {r['batch_read_to_parquet_rows_per_s']:>10,.0f} rows/s",
    ]
    if "write" in parts:
        base = r["parquet_write_rows_per_s"]
        eo, alo = r["write_exactly_once_rows_per_s"], r["write_at_least_once_rows_per_s"]
        r["write_exactly_once_to_parquet"] = eo / base
        r["write_at_least_once_to_parquet"] = alo / base
        lines += [
            f"write exactly once (parquet -> quasar){eo:>9,.0f}"
            f" rows/s   floor {WRITE_FLOOR:,}: {'met' if eo >= WRITE_FLOOR else 'NOT met'};"
            f" {eo / base:.2f} of parquet -> parquet (target {WRITE_EO_TARGET})",
            f"  (first, cold query                 {r['write_cold_rows_per_s']:>10,.0f} rows/s)",
            f"write at least once                  {alo:>10,.0f} rows/s"
            f"   {alo / base:.2f} of parquet -> parquet (target {WRITE_ALO_TARGET})",
            f"  baseline parquet -> parquet        {base:>10,.0f} rows/s",
        ]
    if "pipeline" in parts:
        lines += [
            f"pipeline (2 topics -> windows -> topic){r['pipeline_rows_per_s']:>8,.0f} rows/s",
            f"  baseline same aggregation, parquet -> noop "
            f"{r['pipeline_parquet_noop_rows_per_s']:>,.0f} rows/s",
        ]
    lines.append(f"(producing the input: {r['produce_rows_per_s']:,.0f} rows/s)")
    print("\n".join(lines))
    out = args.out or os.path.join(tempfile.gettempdir(), f"spark-bench-{int(time.time())}.json")
    Path(out).write_text(json.dumps(results, indent=2))
    print(f"figures: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
