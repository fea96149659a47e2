"""How the blocking facade hands ``send_async`` calls to the event loop cheaply.

A naive facade runs one coroutine per message and waits for it (a cross-thread round
trip and a loop wake-up per message: about 6,000 messages/s). The pipe instead:

* admits a message on the caller's thread against a semaphore of ``max_pending``
  slots (blocking when ``block_if_queue_full``, else failing the message at once with
  ``ProducerQueueIsFull`` through its callback, as `pulsar` does);
* appends it to an outbox and wakes the loop only when the outbox was empty, so a burst
  of sends costs one wake-up;
* drains the outbox on the loop in order, one coroutine for the whole burst;
* delivers completion callbacks to the listener thread in batches, in completion order.

A slot is released when the message's callback is handed over, so the loop-side
producer never has more than ``max_pending`` messages queued from this facade. With
``max_pending`` 0 (no count limit) the client's memory limit bounds the producer
instead; the pipe then admits at most ``HANDOFF_SLOTS`` messages not yet handed to
the producer, so a caller blocks (or fails) when the producer waits for memory.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from quasar.client.exceptions import ProducerQueueIsFull, result_for

Callback = Callable[[Any, Any], None]
SendAsync = Callable[[Any, Callable[[BaseException | None, Any], None]], Any]

# Messages admitted but not yet queued in the producer, without a count limit.
HANDOFF_SLOTS = 1000


class CallbackRunner:
    """Runs user callbacks on the listener executor, batched and in order."""

    def __init__(self, executor: concurrent.futures.Executor) -> None:
        self._executor = executor
        self._pending: collections.deque[tuple[Callback, Any, Any]] = collections.deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def call(self, callback: Callback, result: Any, value: Any) -> None:
        with self._lock:
            self._pending.append((callback, result, value))
            if self._scheduled:
                return
            self._scheduled = True
        self._executor.submit(self._run)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._scheduled = False
                    return
                batch = list(self._pending)
                self._pending.clear()
            for callback, result, value in batch:
                try:
                    callback(result, value)
                except Exception:  # a user callback must not stop the others
                    import logging

                    logging.getLogger(__name__).exception("send callback failed")


class SendPipe:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        send_async: SendAsync,
        callbacks: CallbackRunner,
        max_pending: int,
        block_if_queue_full: bool,
    ) -> None:
        self._loop = loop
        self._send_async = send_async
        self._callbacks = callbacks
        # With a count limit a slot is held until the receipt; without one, only until
        # the producer has queued the message (it reserved the client's memory).
        self._count_limited = max_pending > 0
        self._max_pending = max_pending if self._count_limited else HANDOFF_SLOTS
        self._slots = threading.Semaphore(self._max_pending)
        self._block = block_if_queue_full
        self._outbox: collections.deque[tuple[Any, Callback]] = collections.deque()
        self._lock = threading.Lock()
        self._draining = False
        self._drain_waiters: list[asyncio.Future[None]] = []

    def submit(self, message: Any, callback: Callback) -> None:
        """Queue ``message``; ``callback(result, message_id)`` runs on the listener thread."""
        if self._block:
            self._slots.acquire()
        elif not self._slots.acquire(blocking=False):
            self._callbacks.call(
                callback,
                result_for(ProducerQueueIsFull(f"{self._max_pending} messages pending")),
                None,
            )
            return
        with self._lock:
            self._outbox.append((message, callback))
            if self._draining:
                return
            self._draining = True
        self._loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        self._loop.create_task(self._drain())

    async def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._outbox:
                    self._draining = False
                    waiters, self._drain_waiters = self._drain_waiters, []
                    for w in waiters:
                        if not w.done():
                            w.set_result(None)
                    return
                batch = list(self._outbox)
                self._outbox.clear()
            for message, callback in batch:
                done = self._completion(callback)
                try:
                    await self._send_async(message, done)
                except Exception as exc:  # closed, too big, queue full: via the callback
                    done(exc, None)
                if not self._count_limited:
                    self._slots.release()

    def _completion(self, callback: Callback) -> Callable[[BaseException | None, Any], None]:
        def done(err: BaseException | None, message_id: Any) -> None:
            if self._count_limited:
                self._slots.release()
            self._callbacks.call(callback, result_for(err), message_id)

        return done

    async def drained(self) -> None:
        """Wait (on the loop) until every admitted message reached the producer."""
        with self._lock:
            if not self._draining:
                return
            waiter = self._loop.create_future()
            self._drain_waiters.append(waiter)
        await waiter
