"""The Spark sessions of the connector tests, for pytest and for the driver processes
that ``jobs.py`` runs (it imports this module by path: no pytest, no test package).

Local mode by default (``local[2,2]``: two cores and one task retry, so a task that
fails once is retried as on a cluster); ``master`` and ``conf`` point a session at a
standalone cluster (``quasar.testing.spark_cluster.SparkCluster.session_conf``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


def new_session(
    app: str, master: str = "local[2,2]", conf: dict[str, str] | None = None
) -> Any:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.driver.memory", "1g")
        # A Python worker connects back to the JVM within this time (default 15 s);
        # on a loaded 2-core machine starting one can take longer.
        .config("spark.python.authenticate.socketTimeout", "120s")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


# Spark gives the driver-side Python process of a streaming Python data source 10 s
# (hard-coded in PythonWorkerFactory) to connect back to the JVM. On an overloaded
# machine its start-up (the interpreter and PySpark's imports) takes longer, and the
# query fails while initializing its sources, before any batch. Such a start is
# repeated; any other failure, and every failure after initialization, is the caller's.
_CONNECT_BACK = "Python worker failed to connect back"
START_ATTEMPTS = 3


def start_query(start: Callable[[], Any], timeout_s: float = 240.0) -> Any:
    """``start()`` a streaming query and wait until its sources are initialized (or it
    ended); returns the query.

    Raises:
        TimeoutError: the sources were not initialized within ``timeout_s``.
    """
    for attempt in range(1, START_ATTEMPTS + 1):
        query = start()
        deadline = time.monotonic() + timeout_s
        while query.isActive and query.status["message"].startswith("Initializing"):
            if time.monotonic() > deadline:
                query.stop()
                raise TimeoutError(f"query sources not initialized within {timeout_s}s")
            time.sleep(0.1)  # polling interval of a bounded wait on the query's status
        exc = None if query.isActive else query.exception()
        if exc is None or _CONNECT_BACK not in str(exc) or attempt == START_ATTEMPTS:
            return query
        print(f"query start {attempt} failed ({_CONNECT_BACK}); starting again", file=sys.stderr)
    raise AssertionError("unreachable")
