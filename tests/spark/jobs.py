"""A streaming query run as its own process, so that tests can kill the whole driver.

    python tests/spark/jobs.py '{"service_url": ..., "admin_url": ..., "src": ...,
                                 "dst": ..., "checkpoint": ...,
                                 "source_options": {...}, "sink_options": {...},
                                 "master": ..., "spark_conf": {...}}'

Reads ``src`` from earliest with AvailableNow (and the given source/sink options)
into the quasar sink on ``dst``; exits 0 when the query finished, 1 if it failed.
``master`` (default ``local[2,2]``) and ``spark_conf`` put the driver on a cluster.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    args = json.loads(argv[1])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # This script's directory is sys.path[0]: the tests' session settings, by path.
    from spark_sessions import new_session, start_query

    spark = new_session(
        "quasar-job", args.get("master", "local[2,2]"), args.get("spark_conf")
    )
    spark.sparkContext.setLogLevel("ERROR")
    reader = (
        spark.readStream.format("quasar")
        .option("service.url", args["service_url"])
        .option("admin.url", args["admin_url"])
        .option("topic", args["src"])
        .option("startingOffsets", "earliest")
    )
    for k, v in args.get("source_options", {}).items():
        reader = reader.option(k, v)
    writer = (
        reader.load()
        .selectExpr("value", "key")
        .writeStream.format("quasar")
        .option("service.url", args["service_url"])
        .option("admin.url", args["admin_url"])
        .option("topic", args["dst"])
        .option("checkpointLocation", args["checkpoint"])
        .trigger(availableNow=True)
    )
    for k, v in args.get("sink_options", {}).items():
        writer = writer.option(k, v)
    query = start_query(writer.start)
    try:
        query.awaitTermination()
    except Exception as exc:
        print(f"query failed: {exc}"[:2000], file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
