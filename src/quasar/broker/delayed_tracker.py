"""The index of one subscription's delayed messages: Pulsar's in-memory delayed
delivery tracker.

A Shared or Key_Shared dispatcher that reads an entry whose ``deliver_at_time`` lies
in the future puts its position here instead of sending it; once the time comes, the
position is taken out again and the entry is read and sent like a redelivery. The
index holds positions only, ordered by delivery time (a heap), so it costs the same
for a large message as for a small one.

Nothing here is persisted. The cursor does not pass a delayed entry's position on
mark-delete until the entry is acknowledged, so after a restart the dispatcher reads
it again from the ledger and indexes it again: the ledger is the durable index.

Time is passed in (wall-clock milliseconds, the unit of ``deliver_at_time``), so the
tracker is tested on a virtual clock. What the tick and strictness mean follows
Pulsar's broker settings:

* ``tick_ms`` (``delayedDeliveryTickTimeMillis``): the timer that releases due
  messages fires at most once per tick, however many distinct times are indexed.
* ``strict`` (``isDelayedDeliveryDeliverAtTimeStrict``): when false, a message whose
  time is less than one tick away counts as due, so it may go out up to one tick early
  and the timer can serve a whole tick's messages at once.
* ``fixed_delay_lookahead`` (``delayedDeliveryFixedDelayDetectionLookahead``): when at
  least this many messages are indexed and every one was added in delivery-time order
  (one fixed delay, the common case), whatever is read next is due later still, so
  reading pauses until the first is due rather than fill the index.
"""

from __future__ import annotations

import heapq

from quasar.storage.api import Position

__all__ = ["INDEX_BYTES_PER_MESSAGE", "DelayedDeliveryTracker"]

# What the index size metric counts per message: a delivery time, a ledger id and an
# entry id of 64 bits each, as Pulsar's in-memory tracker accounts its index
# (``pulsar_delayed_message_index_size_bytes``), so dashboards read the same.
INDEX_BYTES_PER_MESSAGE = 24


class DelayedDeliveryTracker:
    """Delayed positions of one subscription, ordered by delivery time."""

    def __init__(
        self,
        tick_ms: int,
        strict: bool,
        fixed_delay_lookahead: int,
        max_messages: int,
    ) -> None:
        assert tick_ms >= 1 and max_messages >= 1 and fixed_delay_lookahead >= 0
        self.tick_ms = tick_ms
        self.strict = strict
        self.fixed_delay_lookahead = fixed_delay_lookahead
        self.max_messages = max_messages
        # (deliver_at, position); entries whose position left ``_deliver_at`` (acked,
        # discarded) stay in the heap until they reach its top: removing from the
        # middle of a heap costs a linear scan.
        self._heap: list[tuple[int, Position]] = []
        self._deliver_at: dict[Position, int] = {}
        # Fixed-delay detection: the latest delivery time indexed, and whether every
        # message came in (within a tick) in delivery-time order.
        self._highest = 0
        self._fixed_delay = True
        # When the timer last released messages (wall ms); None: never.
        self._last_tick_ms: int | None = None

    # -- size --------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._deliver_at)

    def __contains__(self, position: object) -> bool:
        return position in self._deliver_at

    @property
    def full(self) -> bool:
        """The index holds ``max_messages``: nothing more may be added."""
        return len(self._deliver_at) >= self.max_messages

    @property
    def index_size_bytes(self) -> int:
        return len(self._deliver_at) * INDEX_BYTES_PER_MESSAGE

    # -- adding ------------------------------------------------------------------------
    def cutoff_ms(self, now_ms: int) -> int:
        """Messages due at or before this time may be delivered now."""
        return now_ms if self.strict else now_ms + self.tick_ms

    def is_delayed(self, deliver_at: int, now_ms: int) -> bool:
        """True if a message due at ``deliver_at`` must not be delivered yet."""
        return deliver_at > 0 and deliver_at > self.cutoff_ms(now_ms)

    def add(self, position: Position, deliver_at: int) -> None:
        """Index ``position`` until ``deliver_at`` (the caller checked ``is_delayed``
        and ``full``). Adding an indexed position again keeps the first entry."""
        assert not self.full, "the caller checks full before adding"
        if position in self._deliver_at:
            return
        self._deliver_at[position] = deliver_at
        heapq.heappush(self._heap, (deliver_at, position))
        if deliver_at < self._highest - self.tick_ms:
            self._fixed_delay = False
        self._highest = max(self._highest, deliver_at)

    # -- taking out --------------------------------------------------------------------
    def _first(self) -> tuple[int, Position] | None:
        """The earliest live entry, after dropping stale ones off the top."""
        heap, live = self._heap, self._deliver_at
        while heap:
            deliver_at, position = heap[0]
            if live.get(position) == deliver_at:
                return heap[0]
            heapq.heappop(heap)
        return None

    def has_due(self, now_ms: int) -> bool:
        first = self._first()
        return first is not None and first[0] <= self.cutoff_ms(now_ms)

    def pop_due(self, now_ms: int, max_messages: int) -> list[Position]:
        """Take out up to ``max_messages`` positions that are due, in position order
        (the order the dispatcher sends them in)."""
        cutoff = self.cutoff_ms(now_ms)
        out: list[Position] = []
        while len(out) < max_messages:
            first = self._first()
            if first is None or first[0] > cutoff:
                break
            heapq.heappop(self._heap)
            del self._deliver_at[first[1]]
            out.append(first[1])
        if not self._deliver_at:
            self._reset_detection()
        out.sort()
        return out

    def discard(self, position: Position) -> None:
        """``position`` needs no delivery any more (it was acknowledged)."""
        if self._deliver_at.pop(position, None) is not None:
            self._compact()

    def discard_up_to(self, position: Position) -> None:
        """Every position at or before ``position`` was acknowledged."""
        gone = [p for p in self._deliver_at if p <= position]
        for p in gone:
            del self._deliver_at[p]
        if gone:
            self._compact()

    def clear(self) -> None:
        """Forget everything (the cursor is rewound: it reads these again)."""
        self._heap.clear()
        self._deliver_at.clear()
        self._reset_detection()

    def _compact(self) -> None:
        # Stale heap entries are dropped lazily; once they are the majority, rebuild
        # so the heap stays within twice the index.
        if not self._deliver_at:
            self.clear()
        elif len(self._heap) > 2 * len(self._deliver_at):
            self._heap = [(t, p) for p, t in self._deliver_at.items()]
            heapq.heapify(self._heap)

    def _reset_detection(self) -> None:
        self._highest = 0
        self._fixed_delay = True

    # -- pacing ------------------------------------------------------------------------
    def should_pause_reading(self, now_ms: int) -> bool:
        """True when the dispatcher must not read new entries now: the index is full,
        or it holds a lookahead's worth of messages of one fixed delay and none is due
        (Pulsar's ``shouldPauseAllDeliveries``)."""
        if self.full:
            return True
        return (
            self.fixed_delay_lookahead > 0
            and self._fixed_delay
            and len(self._deliver_at) >= self.fixed_delay_lookahead
            and not self.has_due(now_ms)
        )

    def next_timer_ms(self) -> int | None:
        """When the timer should next fire (wall ms), or None with nothing indexed:
        when the first message becomes due, but not within a tick of the last time
        the timer fired."""
        first = self._first()
        if first is None:
            return None
        at = first[0] if self.strict else first[0] - self.tick_ms
        if self._last_tick_ms is not None:
            at = max(at, self._last_tick_ms + self.tick_ms)
        return at

    def on_timer(self, now_ms: int) -> None:
        """The timer fired at ``now_ms``."""
        self._last_tick_ms = now_ms
