"""A table view over a compacted topic, as ``pulsar.Client.create_table_view`` gives.

The view reads the topic from the earliest message with ``read_compacted`` (so a
compacted topic is read as its latest value per key, then everything after the
horizon), keeps the latest value of every key, and removes a key when a message with an
empty value arrives (a tombstone). It keeps reading in the background for as long as it
is open; listeners are called on the client's listener thread for every update.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from quasar.client.aio import Client as AsyncClient
from quasar.client.handles import Reader
from quasar.client.message_id import MessageId
from quasar.client.send_pipe import CallbackRunner
from quasar.errors import AlreadyClosed

Listener = Callable[[str, Any], None]
# Runs a coroutine on the client's event loop and returns its result (the blocking
# client's way of calling into the asyncio core).
RunOnLoop = Callable[[Coroutine[Any, Any, Any]], Any]


class TableView:
    """Latest value per message key of a topic (see ``pulsar.tableview.TableView``)."""

    def __init__(
        self, reader: Reader, run: RunOnLoop, callbacks: CallbackRunner
    ) -> None:
        self._reader = reader
        self._run = run
        self._callbacks = callbacks
        self._table: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None

    async def _load(self) -> None:
        """Read everything there is now (called on the client's loop at creation)."""
        while await self._reader.has_message_available():
            self._apply(await self._reader.read_next())
        self._task = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        while True:
            try:
                msg = await self._reader.read_next()
            except (AlreadyClosed, asyncio.CancelledError):
                return
            self._apply(msg)

    def _apply(self, msg: Any) -> None:
        key = msg.partition_key()
        if not key:
            return  # keyless messages have no place in a table
        data = msg.data()
        value = msg.value() if data else None
        with self._lock:
            if data:
                self._table[key] = value
            else:
                self._table.pop(key, None)
            listeners = list(self._listeners)
        for listener in listeners:
            self._callbacks.call(listener, key, value if data else b"")

    def get(self, key: str) -> Any | None:
        with self._lock:
            return self._table.get(key)

    def for_each(self, callback: Listener) -> None:
        with self._lock:
            items = list(self._table.items())
        for key, value in items:
            callback(key, value)

    def for_each_and_listen(self, callback: Listener) -> None:
        with self._lock:
            items = list(self._table.items())
            self._listeners.append(callback)
        for key, value in items:
            callback(key, value)

    def __len__(self) -> int:
        with self._lock:
            return len(self._table)

    def close(self) -> None:
        async def stop() -> None:
            if self._task is not None:
                self._task.cancel()
            await self._reader.close()

        self._run(stop())


async def open_table_view(
    client: AsyncClient,
    topic: str,
    schema: Any,
    run: RunOnLoop,
    callbacks: CallbackRunner,
) -> TableView:
    """A loaded view of ``topic`` (called on the client's loop).

    ``run`` is how :meth:`TableView.close` reaches the loop from the caller's thread;
    listeners are called through ``callbacks`` (the listener thread).

    Raises:
        InvalidTopicName, TopicNotFound, Timeout.
    """
    reader = await client.create_reader(
        topic, MessageId.earliest, schema=schema, is_read_compacted=True
    )
    view = TableView(reader, run, callbacks)
    await view._load()
    return view
