"""The fake broker on an event loop of its own, for blocking clients.

Blocking clients (quasar's sync facade, the official C++ ``pulsar-client``) block the
test's thread, so the fake cannot share it: :class:`ThreadedFakeBroker` runs a
:class:`~tests.fakes.broker.FakeBroker` on a loop in a daemon thread. Everything that
touches the fake's state runs on that loop (``call``, ``on_loop``, ``wait_for``);
reading a list the fake only appends to is also safe once the client has had the
answer the fake wrote after recording what it read.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .broker import FakeBroker

R = TypeVar("R")
# How long a call onto the fake's loop may take; beyond it the loop is stuck.
CALL_TIMEOUT_S = 10.0


class ThreadedFakeBroker:
    """A started :class:`FakeBroker` on a loop in a daemon thread; use as a context
    manager, or call :meth:`close`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="fake-broker", daemon=True
        )
        self._thread.start()
        self.broker = FakeBroker()
        self.call(self.broker.start())

    @property
    def url(self) -> str:
        return self.broker.url

    def call(
        self, coro: Coroutine[Any, Any, R], timeout_s: float = CALL_TIMEOUT_S
    ) -> R:
        """Run ``coro`` on the fake's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def on_loop(self, fn: Callable[[], R]) -> R:
        """Run ``fn`` on the fake's loop (to change or read its state) and return
        what it returns."""

        async def run() -> R:
            return fn()

        return self.call(run())

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
        """Whether ``predicate`` about the fake's state came true within
        ``timeout_s``; it is evaluated on the fake's loop after every change."""
        return self.call(
            self.broker.wait_until(predicate, timeout_s), timeout_s + CALL_TIMEOUT_S
        )

    def close(self) -> None:
        """Stop the fake, then its loop and thread."""
        try:
            self.call(self.broker.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(CALL_TIMEOUT_S)
            self.loop.close()

    def __enter__(self) -> ThreadedFakeBroker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
