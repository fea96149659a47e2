"""Consumer flow-control permits (counted in messages, not entries).

The consumer grants ``receiver_queue_size`` permits with its first FLOW after each
(re)subscribe. Every message the application takes from the queue, and every message
the client drops on its own (acked batch members, messages before a reader's start id,
corrupt entries), gives one permit back; they are sent in one FLOW once at least half
the queue size has accumulated, which keeps FLOW frames rare without starving the
broker.
"""

from __future__ import annotations


class PermitTracker:
    """Counts returned permits and decides when to send FLOW."""

    def __init__(self, receiver_queue_size: int) -> None:
        if receiver_queue_size < 1:
            raise ValueError("receiver_queue_size must be at least 1")
        self.receiver_queue_size = receiver_queue_size
        self.threshold = max(receiver_queue_size // 2, 1)
        self._available = 0

    @property
    def available(self) -> int:
        """Permits returned but not yet sent to the broker."""
        return self._available

    def initial(self) -> int:
        """Permits for the FLOW right after SUBSCRIBE; forgets any unsent ones.

        The broker resets its count on a new SUBSCRIBE, so permits owed to the old
        session must not be sent again.
        """
        self._available = 0
        return self.receiver_queue_size

    def processed(self, count: int = 1) -> int:
        """Return ``count`` permits; the number to send in a FLOW now, or 0."""
        self._available += count
        if self._available >= self.threshold:
            grant, self._available = self._available, 0
            return grant
        return 0
