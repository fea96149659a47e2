"""The queue between the connection (which pushes messages) and ``receive()``.

One queue may be shared by the child consumers of a multi-topic or partitioned
consumer; each message remembers its child (``Message._consumer``) so that taking it
from the queue returns a permit to the right child, and a child that resubscribes can
remove just its own messages.

Children take turns: each child's messages wait in their own FIFO, and ``get``
takes one message from each child that has any, in rotation. One FIFO by arrival
would let a partition whose messages always arrive last starve: a redelivery of
everything unacknowledged (after an aborted transactional ack, a nack on an
Exclusive or Failover subscription) empties the queue, and the broker sends the
children's messages again in the order it received their requests, so an
application that redelivers every few messages would only ever see the first
partitions while they have a backlog. Order within one child is kept; Pulsar
promises no order across partitions.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from quasar.client.message import Message
from quasar.errors import AlreadyClosed, Timeout


class ReceiveQueue:
    """Received messages, a FIFO per child taken in turns, with waiters for ``get``."""

    def __init__(self) -> None:
        # Each child's messages in arrival order; a child's entry stays once made
        # (a queue has a fixed, small set of children).
        self._by_child: dict[Any, deque[Message]] = {}
        # The children that have messages, next turn first.
        self._turns: deque[Any] = deque()
        self._count = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    def __len__(self) -> int:
        return self._count

    def put(self, msg: Message) -> None:
        child = msg._consumer
        mine = self._by_child.get(child)
        if mine is None:
            mine = self._by_child[child] = deque()
        if not mine:
            self._turns.append(child)
        mine.append(msg)
        self._count += 1
        self._wake_one()

    def _take(self) -> Message:
        """The next child's oldest message; that child goes to the back of the turns."""
        turns = self._turns
        child = turns.popleft()
        mine = self._by_child[child]
        msg = mine.popleft()
        if mine:
            turns.append(child)
        self._count -= 1
        return msg

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
        if self._count:
            # A message is waiting (the common case under load): no deadline needed.
            msg = self._take()
            if self._count and self._waiters:
                self._wake_one()
            owner: Any = msg._consumer
            if owner is not None:
                owner.on_dequeued(msg)
            return msg
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while not self._count:
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
        msg = self._take()
        if self._count:
            # Another waiter may be parked while messages remain (e.g. put() raced a
            # cancelled waiter): pass the baton on.
            self._wake_one()
        owner = msg._consumer
        if owner is not None:
            owner.on_dequeued(msg)
        return msg

    def peek(self) -> Message | None:
        """The message ``get`` would take next, left in the queue; None when empty."""
        return self._by_child[self._turns[0]][0] if self._count else None

    async def wait_for_message(self, timeout_s: float | None) -> bool:
        """Wait until a message is queued, without taking it; False after
        ``timeout_s`` (None: no limit) with the queue still empty.

        Raises:
            AlreadyClosed: the consumer closed while waiting.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while not self._count:
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
        return bool(self._by_child.get(consumer))

    def remove_where(self, predicate: Callable[[Message], bool]) -> int:
        """Drop the messages matching ``predicate``; returns how many."""
        removed = 0
        for child, mine in self._by_child.items():
            if not mine:
                continue
            kept = [m for m in mine if not predicate(m)]
            if len(kept) == len(mine):
                continue
            removed += len(mine) - len(kept)
            mine.clear()
            mine.extend(kept)
            if not mine:
                self._turns.remove(child)
        self._count -= removed
        return removed

    def close(self) -> None:
        """Fail current and future waiters with AlreadyClosed once the queue is empty."""
        self._closed = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
