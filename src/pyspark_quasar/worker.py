"""What a Spark Python worker keeps between the tasks it runs: an event loop and clients.

Spark reuses a Python worker for task after task (``spark.python.worker.reuse``, the
default), one task at a time. A client per task would cost a connection, a handshake
and a lookup for every partition of every micro-batch; instead the worker keeps one
``aio.Client`` per connection settings (service URL, operation timeout, credentials
and TLS) on an event loop in a daemon thread, which also answers the broker's
keep-alive pings while no task runs. A client
remembers every reader it created, so it is replaced after ``CLIENT_TASKS_MAX`` tasks.
Nothing here runs at import time: Spark imports the connector in processes that never
read.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pyspark_quasar.options import ConnectionOptions
from pyspark_quasar.security import client_options
from quasar.client import aio

R = TypeVar("R")
CLIENT_TASKS_MAX = 256  # tasks served by one client before it is replaced

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_clients: dict[ConnectionOptions, tuple[aio.Client, int]] = {}


def _event_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def main() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            threading.Thread(target=main, name="pyspark-quasar-io", daemon=True).start()
            started.wait()
            _loop = loop
        return _loop


def run(coro: Coroutine[Any, Any, R]) -> R:
    """Run ``coro`` on the worker's event loop and wait for its result."""
    fut = asyncio.run_coroutine_threadsafe(coro, _event_loop())
    try:
        return fut.result()
    except BaseException:
        fut.cancel()
        raise


async def client(conn: ConnectionOptions) -> aio.Client:
    """The worker's client for ``conn`` (call on the worker's event loop): one per
    service URL, operation timeout and credentials.

    Raises:
        InvalidConfiguration: the credentials or TLS settings cannot be used.
    """
    key = conn
    cached = _clients.pop(key, None)
    if cached is not None:
        old, tasks = cached
        if tasks < CLIENT_TASKS_MAX:
            _clients[key] = (old, tasks + 1)
            return old
        await old.close()
    new = aio.Client(
        conn.service_url,
        operation_timeout_seconds=conn.operation_timeout_s,
        **client_options(conn),
    )
    _clients[key] = (new, 1)
    return new
