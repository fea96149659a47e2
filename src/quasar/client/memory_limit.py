"""The client-wide bound on bytes of messages waiting for their receipts.

Pulsar's clients bound the memory of pending sends per client, not per producer
(PIP-74, ``memoryLimit``; 64 MiB in the C++ core that the official Python package
wraps): a producer's ``max_pending_messages`` of 0 then means no count limit, and a
send waits (``block_if_queue_full``) or fails when the client's pending bytes would
pass the limit. A message's bytes are its payload as given to ``send``; they are
reserved when it is queued and released with its receipt, error or timeout.
"""

from __future__ import annotations

import asyncio

from quasar.client.exceptions import InvalidConfiguration
from quasar.client.waiters import park, wake_all

__all__ = ["DEFAULT_MEMORY_LIMIT_BYTES", "MemoryLimit"]

DEFAULT_MEMORY_LIMIT_BYTES = 64 * 1024 * 1024


class MemoryLimit:
    """Bytes reserved by the producers of one client, against ``limit`` (0: none).

    Raises ``InvalidConfiguration`` for a negative limit. A reservation that does not
    fit fails, except when nothing is reserved: a message
    larger than the whole limit can still be sent, alone, instead of never.
    """

    __slots__ = ("limit", "used", "_waiters")

    def __init__(self, limit: int = DEFAULT_MEMORY_LIMIT_BYTES) -> None:
        if limit < 0:
            raise InvalidConfiguration(f"memory_limit_bytes must be >= 0, got {limit}")
        self.limit = limit
        self.used = 0
        self._waiters: list[asyncio.Future[None]] = []

    def try_reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes if they fit; False (nothing reserved) if not."""
        used = self.used
        if self.limit and used and used + size > self.limit:
            return False
        self.used = used + size
        return True

    def release(self, size: int) -> None:
        """Give back reserved bytes and wake every producer waiting for room."""
        self.used -= size
        if self._waiters:
            # Each waiter tries again; whoever does not fit waits again. Waking all
            # (few producers per client) avoids losing a wake-up to a cancelled one.
            wake_all(self._waiters)

    async def wait_for_room(self) -> None:
        """Return after the next release (the caller then tries to reserve again)."""
        await park(self._waiters)

    def wake_all(self) -> None:
        """Wake every waiter (a producer closing: its waiting senders must see it)."""
        self.release(0)
