"""Exactly-once windowed aggregation over two quasar topics with PySpark.

The classic exactly-once pipeline: consume two topics, aggregate per event-time window, write the results to a third topic — and do it
exactly once, even when the job is killed and restarted from its checkpoint.

Each input message is JSON ``{"key": "sensor-3", "amount": 5}`` with its event time as
the message's event time; the job counts and sums ``amount`` per key and 10-second
window (append mode: a window is written once, when the watermark passes its end) and
writes ``{"key", "windowStart", "windowEnd", "count", "sum"}`` to the output topic.

Against ``make standalone`` (pulsar://127.0.0.1:6650, admin http://127.0.0.1:8080)::

    python examples/spark_window_aggregation.py generate --events 5000
    python examples/spark_window_aggregation.py run --checkpoint /tmp/wa-ckpt --stop-when-idle
    python examples/spark_window_aggregation.py check

``run`` without ``--stop-when-idle`` keeps running (trigger every 5 s); kill it and run
it again with the same ``--checkpoint``: ``check`` still finds every window exactly
once, equal to a batch recomputation of the same input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any


def topic_names(prefix: str) -> tuple[str, str, str]:
    """The two input topics and the output topic (``--prefix``, default ``wa``)."""
    ns = "persistent://public/default/"
    return ns + prefix + "-clicks-eu", ns + prefix + "-clicks-us", ns + prefix + "-window-totals"

WINDOW = "10 seconds"
WATERMARK_DELAY = "20 seconds"
BASE_TIME_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
END_KEY = "__end__"  # far-future event that moves the watermark past every window


def spark_session(app: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def aggregate(events: Any, streaming: bool) -> Any:
    """Counts and sums per key and window, as rows ready for the quasar sink."""
    from pyspark.sql import functions as F

    parsed = events.select(
        F.get_json_object(F.col("value").cast("string"), "$.key").alias("key"),
        F.get_json_object(F.col("value").cast("string"), "$.amount").cast("long").alias("amount"),
        F.col("eventTime"),
    )
    if streaming:
        parsed = parsed.withWatermark("eventTime", WATERMARK_DELAY)
    else:
        # The end marker's window never closes in the stream, so it is never written.
        # (Filtering it in the stream would not do: the optimizer pushes the filter
        # below the watermark, which then never sees the marker.)
        parsed = parsed.where(F.col("key") != END_KEY)
    totals = (
        parsed.groupBy(F.window("eventTime", WINDOW), F.col("key"))
        .agg(F.count("*").alias("count"), F.sum("amount").alias("sum"))
    )
    return totals.select(
        F.concat_ws("@", "key", F.col("window.start").cast("string")).cast("binary").alias("key"),
        F.to_json(
            F.struct(
                "key",
                F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("windowStart"),
                F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("windowEnd"),
                "count",
                "sum",
            )
        ).cast("binary").alias("value"),
        F.col("window.end").alias("eventTime"),
    )


def generate(service_url: str, prefix: str, events: int) -> None:
    """``events`` deterministic events spread over both input topics, then an end
    marker on each (its event time closes every window)."""
    import quasar.client as qc

    in_a, in_b, _ = topic_names(prefix)
    client = qc.Client(service_url)
    try:
        # Unbatched, so that maxRecordsPerTrigger (counted in stored entries) is rows.
        producers = [
            client.create_producer(t, batching_enabled=False, block_if_queue_full=True)
            for t in (in_a, in_b)
        ]
        for i in range(events):
            body = json.dumps({"key": f"sensor-{i % 5}", "amount": i % 7}).encode()
            producers[i % 2].send_async(
                body, lambda r, m: None, event_timestamp=BASE_TIME_MS + i * 137
            )
        end = json.dumps({"key": END_KEY, "amount": 0}).encode()
        for p in producers:
            p.send_async(end, lambda r, m: None, event_timestamp=BASE_TIME_MS + 86_400_000)
        for p in producers:
            p.flush()
    finally:
        client.close()


def wait_until_idle(query: Any, timeout_s: float = 600.0) -> None:
    """Until all input so far is processed and only the end marker's window is left in
    the state store (the no-data batch after the watermark moved past every real
    window has written them)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        query.processAllAvailable()
        progress = query.lastProgress
        if progress and progress["numInputRows"] == 0 and all(
            op["numRowsTotal"] <= 1 for op in progress["stateOperators"]
        ):
            return
        time.sleep(0.5)  # the next trigger comes within a second
    raise TimeoutError("the query did not become idle")


def run(args: argparse.Namespace) -> int:
    in_a, in_b, out = topic_names(args.prefix)
    spark = spark_session("quasar-window-aggregation")
    events = (
        spark.readStream.format("quasar")
        .option("service.url", args.service_url)
        .option("admin.url", args.admin_url)
        .option("topics", f"{in_a},{in_b}")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", str(args.max_records_per_trigger))
        .load()
    )
    writer = (
        aggregate(events, streaming=True)
        .writeStream.format("quasar")
        .outputMode("append")
        .option("service.url", args.service_url)
        .option("admin.url", args.admin_url)
        .option("topic", out)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.stop_when_idle:
        # Not Trigger.AvailableNow: it ends after the last batch with data, before the
        # no-data batch in which the advanced watermark closes the last windows.
        query = writer.trigger(processingTime="1 second").start()
        wait_until_idle(query)
        query.stop()
        if args.check:
            code = compare(spark, args)
            spark.stop()
            return code
    else:
        query = writer.trigger(processingTime="5 seconds").start()
        query.awaitTermination()
    spark.stop()
    return 0


def read_output(
    spark: Any, service_url: str, admin_url: str, prefix: str
) -> list[dict[str, Any]]:
    rows = (
        spark.read.format("quasar")
        .option("service.url", service_url)
        .option("admin.url", admin_url)
        .option("topic", topic_names(prefix)[2])
        .load()
        .collect()
    )
    return [json.loads(bytes(r.value)) for r in rows]


def recompute(
    spark: Any, service_url: str, admin_url: str, prefix: str
) -> list[dict[str, Any]]:
    in_a, in_b, _ = topic_names(prefix)
    events = (
        spark.read.format("quasar")
        .option("service.url", service_url)
        .option("admin.url", admin_url)
        .option("topics", f"{in_a},{in_b}")
        .load()
    )
    return [json.loads(bytes(r.value)) for r in aggregate(events, streaming=False).collect()]


def check(args: argparse.Namespace) -> int:
    spark = spark_session("quasar-window-aggregation-check")
    code = compare(spark, args)
    spark.stop()
    return code


def compare(spark: Any, args: argparse.Namespace) -> int:
    """Print and judge the output against a batch recomputation of the input."""
    out = read_output(spark, args.service_url, args.admin_url, args.prefix)
    expected = recompute(spark, args.service_url, args.admin_url, args.prefix)
    keys = [(w["key"], w["windowStart"]) for w in out]
    dupes = len(keys) - len(set(keys))
    ok = dupes == 0 and sorted(out, key=str) == sorted(expected, key=str)
    print(f"{len(out)} windows written, {len(expected)} recomputed, {dupes} duplicates: "
          + ("OK" if ok else "MISMATCH"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--service-url", default="pulsar://127.0.0.1:6650")
    parser.add_argument("--admin-url", default="http://127.0.0.1:8080")
    parser.add_argument("--prefix", default="wa", help="topic name prefix")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="publish deterministic input events")
    g.add_argument("--events", type=int, default=5000)
    r = sub.add_parser("run", help="run the streaming aggregation")
    r.add_argument("--checkpoint", required=True)
    r.add_argument(
        "--stop-when-idle", action="store_true",
        help="stop once everything published so far is processed and every closed "
        "window written",
    )
    r.add_argument("--max-records-per-trigger", type=int, default=1000)
    r.add_argument("--check", action="store_true", help="with --stop-when-idle: then check")
    sub.add_parser("check", help="compare the output with a batch recomputation")
    args = parser.parse_args(argv)
    if args.command == "generate":
        generate(args.service_url, args.prefix, args.events)
        return 0
    if args.command == "run":
        return run(args)
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
