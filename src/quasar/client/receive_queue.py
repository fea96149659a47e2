"""The queue between the connection (which pushes messages) and ``receive()``.

One queue may be shared by the child consumers of a multi-topic or partitioned
consumer; each message remembers its child (``Message._consumer``) so that taking it
from the queue returns a permit to the right child, and a child that resubscribes can
remove just its own messages.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from quasar.client.message import Message
from quasar.errors import AlreadyClosed, Timeout


class ReceiveQueue:
    """FIFO of received messages with waiters for ``get``."""

    def __init__(self) -> None:
        self._items: deque[Message] = deque()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    def __len__(self) -> int:
        return len(self._items)

    def put(self, msg: Message) -> None:
        self._items.append(msg)
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def get(self, timeout_s: float | None = None) -> Message:
        """Take the oldest message, waiting up to ``timeout_s`` (None: forever).

        Raises:
            Timeout: nothing arrived in time.
            AlreadyClosed: the consumer closed while waiting.
        """
        items = self._items
        if items:
            # A message is waiting (the common case under load): no deadline needed.
            msg = items.popleft()
            if items and self._waiters:
                self._wake_one()
            owner: Any = msg._consumer
            if owner is not None:
                owner.on_dequeued(msg)
            return msg
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while not self._items:
            if self._closed:
                raise AlreadyClosed("consumer is closed")
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise Timeout("no message received in time")
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                raise Timeout("no message received in time") from None
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        msg = self._items.popleft()
        if self._items:
            # Another waiter may be parked while messages remain (e.g. put() raced a
            # cancelled waiter): pass the baton on.
            self._wake_one()
        owner = msg._consumer
        if owner is not None:
            owner.on_dequeued(msg)
        return msg

    def peek(self) -> Message | None:
        """The oldest message, left in the queue; None when it is empty."""
        return self._items[0] if self._items else None

    async def wait_for_message(self, timeout_s: float | None) -> bool:
        """Wait until a message is queued, without taking it; False after
        ``timeout_s`` (None: no limit) with the queue still empty.

        Raises:
            AlreadyClosed: the consumer closed while waiting.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while not self._items:
            if self._closed:
                raise AlreadyClosed("consumer is closed")
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return False
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        return True

    def holds_message_of(self, consumer: object) -> bool:
        """Whether a message received by ``consumer`` (one child) is waiting here."""
        return any(m._consumer is consumer for m in self._items)

    def remove_where(self, predicate: Callable[[Message], bool]) -> int:
        """Drop the messages matching ``predicate``; returns how many."""
        kept = [m for m in self._items if not predicate(m)]
        removed = len(self._items) - len(kept)
        self._items = deque(kept)
        return removed

    def close(self) -> None:
        """Fail current and future waiters with AlreadyClosed once the queue is empty."""
        self._closed = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
