"""Delayed message delivery on Shared and Key_Shared subscriptions.

A producer sets ``deliver_at_time`` (``deliver_at`` / ``deliver_after`` in the
clients); the entry is stored at once like any other. What delays it is dispatch: a
Shared or Key_Shared dispatcher hands the entries it reads to its ``DelayedHold``,
which keeps back those not due yet in the subscription's ``DelayedDeliveryTracker``
and arms a timer for the first of them. When the timer fires the dispatcher takes the
due positions out and sends them like redeliveries (not counted as such). Exclusive
and Failover subscriptions deliver in order and so deliver delayed messages at once,
as Pulsar's do. A batch entry is held back whole, by its outer metadata (clients do
not batch delayed messages).

Acknowledgement keeps the usual rules: a delayed entry is unacknowledged until a
consumer acknowledges it, so mark-delete stays behind it and a restarted broker reads
it again and indexes it again; an entry acknowledged before it was due (by position,
or by the backlog being cleared or expired) leaves the index.

Bounds: one subscription indexes at most
``delayedDeliveryMaxIndexedMessagesPerSubscription`` messages. At the bound the
dispatcher stops reading new entries (it moves its read position back to the first
entry that did not fit) until indexed messages fall due; each such deferred read
counts in ``quasar_delayed_delivery_index_full_total``. The cost is that messages
behind a full index wait too, however soon they are due: nothing is dropped.

``DelayedDelivery`` is the broker's: the settings, the clock and the counter, shared by
every topic, as ``ReadLimits`` is.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Sequence

from prometheus_client import Counter
from prometheus_client.registry import CollectorRegistry

from quasar.clock import Clock
from quasar.config import DelayedDeliveryConfig
from quasar.storage.api import Entry, Position

from .delayed_tracker import DelayedDeliveryTracker
from .entry_info import EntryInfo

__all__ = ["INDEX_FULL_METRIC", "DelayedDelivery", "DelayedHold"]

INDEX_FULL_METRIC = "quasar_delayed_delivery_index_full"

Item = tuple[Entry, EntryInfo]


class DelayedDelivery:
    """The broker's delayed-delivery settings, clock and refusal counter.

    ``registry``: the broker's metrics registry (None: a private one nobody scrapes,
    for tests and embedded use).
    """

    def __init__(
        self,
        config: DelayedDeliveryConfig,
        clock: Clock,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self._index_full = Counter(
            INDEX_FULL_METRIC,
            "Reads of new entries a Shared or Key_Shared subscription deferred because "
            "its delayed-delivery index held "
            "delayedDeliveryMaxIndexedMessagesPerSubscription messages",
            registry=registry if registry is not None else CollectorRegistry(),
        )

    @property
    def enabled(self) -> bool:
        return self.config.delayed_delivery_enabled

    def count_index_full(self) -> None:
        self._index_full.inc()

    def new_tracker(self) -> DelayedDeliveryTracker:
        c = self.config
        return DelayedDeliveryTracker(
            tick_ms=c.delayed_delivery_tick_time_millis,
            strict=c.is_delayed_delivery_deliver_at_time_strict,
            fixed_delay_lookahead=c.delayed_delivery_fixed_delay_detection_lookahead,
            max_messages=c.delayed_delivery_max_indexed_messages_per_subscription,
        )

    def new_hold(self, wake: Callable[[], None]) -> DelayedHold:
        """The hold of one dispatcher; ``wake`` is called when messages fall due."""
        return DelayedHold(self, wake)


class DelayedHold:
    """One Shared or Key_Shared dispatcher's delayed messages: its index and timer."""

    def __init__(self, policy: DelayedDelivery, wake: Callable[[], None]) -> None:
        self._policy = policy
        self._clock = policy.clock
        self._wake = wake
        self.tracker = policy.new_tracker()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None

    def __len__(self) -> int:
        return len(self.tracker)

    @property
    def index_size_bytes(self) -> int:
        return self.tracker.index_size_bytes

    def hold_back(self, batch: Sequence[Item]) -> tuple[list[Item], list[Item]]:
        """Split what a dispatcher read into what it may send now and what must wait
        for the index to have room (``rest``: from the first delayed entry that did
        not fit on, in read order). Entries not due yet go into the index."""
        if not self._policy.enabled or not batch:
            return list(batch), []
        tracker = self.tracker
        now = self._clock.wall_ms()
        send: list[Item] = []
        added = False
        for i, (entry, info) in enumerate(batch):
            if not tracker.is_delayed(info.deliver_at_time, now):
                send.append((entry, info))
                continue
            if tracker.full and entry.position not in tracker:
                self._policy.count_index_full()
                if added:
                    self._arm()
                return send, list(batch[i:])
            tracker.add(entry.position, info.deliver_at_time)
            added = True
        if added:
            self._arm()
        return send, []

    def should_pause_reading(self) -> bool:
        """True when the dispatcher must not read new entries now (the index is full,
        or holds one fixed delay's lookahead and nothing is due)."""
        return len(self.tracker) > 0 and self.tracker.should_pause_reading(
            self._clock.wall_ms()
        )

    def take_due(self, max_messages: int) -> list[Position]:
        """The positions due now, at most ``max_messages``, in position order."""
        if max_messages <= 0 or not len(self.tracker):
            return []
        due = self.tracker.pop_due(self._clock.wall_ms(), max_messages)
        if due:
            self._arm()
        return due

    def discard(self, position: Position) -> None:
        self.tracker.discard(position)

    def discard_up_to(self, position: Position) -> None:
        self.tracker.discard_up_to(position)

    def clear(self) -> None:
        self.tracker.clear()
        self._cancel()

    def close(self) -> None:
        """Stop the timer (the dispatcher is replaced)."""
        self._cancel()

    # -- the timer ---------------------------------------------------------------------
    def _arm(self) -> None:
        at = self.tracker.next_timer_ms()
        if at is None:
            self._cancel()
            return
        if self._timer is not None and self._timer_at == at:
            return
        self._cancel()
        delay_s = max(0, at - self._clock.wall_ms()) / 1000.0
        self._timer_at = at
        # The loop keeps only a weak reference: a delay may be days, and a
        # subscription deleted meanwhile must not stay alive until then.
        self._timer = asyncio.get_running_loop().call_later(
            delay_s, _fire_if_alive, weakref.ref(self)
        )

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = None

    def fire(self) -> None:
        """The timer's callback: wake the dispatcher if anything is due."""
        self._timer = None
        self._timer_at = None
        now = self._clock.wall_ms()
        if self.tracker.has_due(now):
            self.tracker.on_timer(now)
            self._wake()
        else:
            # Early: the loop's monotonic clock and the wall clock drift apart by a
            # millisecond or so, or the first message left the index. Wait for
            # whatever is first now.
            self._arm()


def _fire_if_alive(hold: weakref.ref[DelayedHold]) -> None:
    target = hold()
    if target is not None:
        target.fire()
