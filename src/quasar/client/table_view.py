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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from quasar.client import aio
from quasar.client.message_id import MessageId
from quasar.errors import AlreadyClosed

if TYPE_CHECKING:
    from quasar.client.sync import Client

Listener = Callable[[str, Any], None]


class TableView:
    """Latest value per message key of a topic (see ``pulsar.tableview.TableView``)."""

    def __init__(self, client: Client, reader: aio.Reader) -> None:
        self._client = client
        self._reader = reader
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
            self._client._callbacks.call(listener, key, value if data else b"")

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

        self._client._run(stop())


async def open_table_view(
    client: Client, aio_client: aio.Client, topic: str, schema: Any
) -> TableView:
    reader = await aio_client.create_reader(
        topic, MessageId.earliest, schema=schema, is_read_compacted=True
    )
    view = TableView(client, reader)
    await view._load()
    return view
