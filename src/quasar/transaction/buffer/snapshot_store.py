"""Where transaction-buffer snapshots are kept: a small keyed store.

``SnapshotStore`` is the whole interface. The broker implements it on the namespace's
compacted system topic ``persistent://{tenant}/{ns}/__transaction_buffer_snapshot``
(message key = store key, value = record bytes, delete = a tombstone with the same
key, read = the latest value of a key as a table view). ``MemorySnapshotStore`` is
the in-memory implementation for tests, with failure injection.

Keys are the topic name (the index record) and ``segment_key(topic, seq)`` for
sealed segments (see ``snapshot_format``).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from quasar.errors import PersistenceError


class SnapshotStore(Protocol):
    """A durable key → bytes map."""

    async def write(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key``; returns once it is durable.

        Raises:
            Exception: with ``retryable`` where it has one (``PersistenceError``);
                the buffer logs the failure and tries again with its next snapshot.
        """
        ...

    async def read(self, key: str) -> bytes | None:
        """The latest value of ``key``, or ``None`` if it has none (or was deleted).

        Raises:
            Exception: the store cannot be read; recovery fails and the topic is
                closed, to be reloaded later.
        """
        ...

    async def delete(self, key: str) -> None:
        """Remove ``key`` durably; deleting an absent key succeeds.

        Raises:
            Exception: as ``write``.
        """
        ...


class MemorySnapshotStore:
    """``SnapshotStore`` in a dict, for tests.

    ``fail_writes(n)`` makes the next ``n`` writes/deletes raise ``PersistenceError``
    (``None``: all of them, until ``fail_writes(0)``); ``hold()`` blocks writes until
    ``release()``; ``hold_reads()`` blocks reads the same way (a slow recovery).
    ``writes`` lists every completed write key, in order.
    """

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.writes: list[str] = []
        self.deletes: list[str] = []
        self._fail: int | None = 0
        self._held: asyncio.Event | None = None
        self._reads_held: asyncio.Event | None = None

    def fail_writes(self, times: int | None = 1) -> None:
        self._fail = times

    def hold(self) -> None:
        self._held = asyncio.Event()

    def hold_reads(self) -> None:
        self._reads_held = asyncio.Event()

    def release(self) -> None:
        for event in (self._held, self._reads_held):
            if event is not None:
                event.set()
        self._held = self._reads_held = None

    async def _gate(self) -> None:
        if self._held is not None:
            await self._held.wait()
        if self._fail is None or self._fail > 0:
            if self._fail is not None:
                self._fail -= 1
            raise PersistenceError("memory snapshot store: injected failure")

    async def write(self, key: str, value: bytes) -> None:
        await self._gate()
        self.data[key] = bytes(value)
        self.writes.append(key)

    async def read(self, key: str) -> bytes | None:
        if self._reads_held is not None:
            await self._reads_held.wait()
        return self.data.get(key)

    async def delete(self, key: str) -> None:
        await self._gate()
        self.data.pop(key, None)
        self.deletes.append(key)
