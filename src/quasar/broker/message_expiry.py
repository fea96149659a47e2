"""Message expiry: a subscription's messages older than a TTL count as consumed.

Pulsar's PersistentMessageExpiryMonitor, by publish time: from the first entry after
the cursor's mark-delete position, entries are read in order while their publish time
is older than the cutoff; mark-delete then moves to the last of them. Reading stops at
the first younger entry (publish times come from producers' clocks; like Pulsar, an
older entry behind a younger one waits for the next check), and never passes the
topic's max-read position, so entries of an open transaction are not expired before
anyone could read them.

Three callers: the periodic check (namespace ``message_ttl_in_seconds`` or the broker's
``ttlDurationDefaultSeconds``), the admin's ``expireMessages`` endpoints, and the
``message_age`` backlog quota's ``consumer_backlog_eviction``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from quasar.errors import RemoteProtocolError
from quasar.storage.api import Position

from .entry_info import entry_info
from .periodic import Periodic
from .subscription import Subscription
from .topic import PersistentTopic

__all__ = [
    "MessageExpiryMonitor",
    "expire_by_age",
    "expire_to_position",
    "oldest_unacked_publish_time",
]

log = logging.getLogger(__name__)

# Entries read per storage call while looking for the expiry position.
EXPIRY_READ_BATCH = 500


async def _last_published_before(
    topic: PersistentTopic, sub: Subscription, cutoff_ms: int
) -> Position | None:
    """The last entry after ``sub``'s mark-delete, before the first entry published at
    or after ``cutoff_ms``; None when the first one is already young enough."""
    ledger = topic.ledger
    limit = topic.max_read_position
    position = ledger.next_position(sub.cursor.mark_delete_position)
    found: Position | None = None
    while position <= limit:
        entries = await ledger.read_entries(position, EXPIRY_READ_BATCH)
        if not entries:
            break
        for entry in entries:
            if entry.position > limit:
                return found
            try:
                info = entry_info(entry.data)
            except RemoteProtocolError:
                # An entry whose metadata cannot be read has no publish time; it
                # stays for the subscription to see rather than vanish unseen.
                return found
            if info.publish_time >= cutoff_ms:
                return found
            found = entry.position
        position = ledger.next_position(entries[-1].position)
    return found


async def expire_by_age(
    topic: PersistentTopic, sub: Subscription, age_s: int, now_ms: int
) -> int:
    """Expire ``sub``'s messages published more than ``age_s`` seconds before
    ``now_ms``; return how many entries left its backlog."""
    if topic.closed:
        return 0
    position = await _last_published_before(topic, sub, now_ms - age_s * 1000)
    if position is None or topic.closed or sub is not topic.subscriptions.get(sub.name):
        return 0  # nothing old enough, or the topic or subscription went while reading
    return sub.expire_up_to(position)


def expire_to_position(
    topic: PersistentTopic, sub: Subscription, position: Position, excluded: bool
) -> int:
    """Expire ``sub``'s messages up to ``position`` (before it, if ``excluded``),
    never past what consumers may read; return how many entries left its backlog."""
    ledger = topic.ledger
    if excluded:
        position = ledger.previous_position(position)
    position = min(position, topic.max_read_position)
    return sub.expire_up_to(position)


async def oldest_unacked_publish_time(
    topic: PersistentTopic, sub: Subscription
) -> int | None:
    """Publish time (ms) of the first unacknowledged entry of ``sub``; None without
    one (or when it cannot be read)."""
    ledger = topic.ledger
    position = ledger.next_position(sub.cursor.mark_delete_position)
    if position > topic.max_read_position:
        return None
    entries = await ledger.read_entries(position, 1)
    if not entries or entries[0].position > topic.max_read_position:
        return None
    try:
        return entry_info(entries[0].data).publish_time
    except RemoteProtocolError:
        return None


TtlOf = Callable[[PersistentTopic], int]


class MessageExpiryMonitor:
    """Runs the TTL check over every loaded topic every ``interval_s`` seconds.

    ``ttl_of(topic)`` gives the topic's TTL in seconds (its namespace's, else the
    broker default); 0 means its messages never expire.
    """

    def __init__(
        self,
        topics: Callable[[], list[PersistentTopic]],
        ttl_of: TtlOf,
        interval_s: float,
        now_ms: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._ttl_of = ttl_of
        self._now_ms = now_ms
        self._periodic = Periodic("message expiry check", interval_s, self.check_all)

    def start(self) -> None:
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def check_all(self) -> int:
        """One check of every loaded topic; returns the entries expired."""
        expired = 0
        for topic in self._topics():
            if topic.closed:
                continue
            ttl = self._ttl_of(topic)
            if ttl <= 0:
                continue
            now = self._now_ms()
            for sub in list(topic.subscriptions.values()):
                try:
                    expired += await expire_by_age(topic, sub, ttl, now)
                except Exception:
                    log.exception("cannot expire messages of %s", sub.describe())
        return expired
