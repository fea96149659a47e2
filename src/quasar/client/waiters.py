"""Parking on futures in a list until something wakes them.

The client's waits (for a pending-message slot, for client memory, for a
transaction's operations to settle) all take this shape: a waiter parks on a new
future kept in a list, and the party that frees the resource resolves it. A waiter
that is cancelled leaves the list itself, so a wake-up never goes to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableSequence


async def park(waiters: MutableSequence[asyncio.Future[None]]) -> None:
    """Wait on a new future appended to ``waiters`` until it is resolved."""
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiters.append(waiter)
    try:
        await waiter
    finally:
        if waiter in waiters:
            waiters.remove(waiter)


def wake_all(waiters: MutableSequence[asyncio.Future[None]]) -> None:
    """Resolve and remove every future in ``waiters``."""
    woken = list(waiters)
    del waiters[:]
    for waiter in woken:
        if not waiter.done():
            waiter.set_result(None)
