"""Dispatchers: move entries from a subscription's cursor to its consumers.

Three policies, one loop shape:

* ``SingleActiveConsumerDispatcher`` (Exclusive, Failover): one consumer receives
  everything in order. When the active consumer changes, the cursor is rewound to the
  first unacknowledged entry, so the new active consumer gets what the old one had not
  acknowledged.
* ``SharedDispatcher``: entries go round-robin to consumers with permits. Entries that
  must be delivered again (negative acks, a consumer that left) wait in a *replay set*
  and are sent before new entries.
  Entries whose ``deliver_at_time`` lies ahead wait in the subscription's delayed
  index (``delayed_delivery.py``) and join the replay set when due.
* Key_Shared builds on Shared in ``key_shared_dispatcher.py``.

A dispatcher is given its subscription (``api.DispatchSubscription``) and what it reads
of the topic (``api.TopicReadView``); it knows nothing else of either.

The loop runs as one task per subscription, started by ``schedule()`` whenever
something that could allow progress happens (new entries, permits, acks, consumers
joining or leaving, redelivery requests). It never spins: when no entry can be sent it
ends, and the next trigger starts it again. Entries that are markers are acknowledged
on the cursor and never delivered.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Iterable, Mapping, Sequence

from quasar.errors import RemoteProtocolError, StorageError
from quasar.protocol.ack_set import and_, or_
from quasar.storage.api import Entry, Position

from .api import DispatchSubscription, TopicReadView
from .consumer import Consumer, Delivery
from .delayed_delivery import DelayedHold
from .entry_info import EntryInfo, entry_info

log = logging.getLogger(__name__)

# How many entries may wait in the replay set before reading new entries pauses.
REPLAY_ENTRIES_MAX = 10_000

class Dispatcher:
    """Shared machinery: the run loop, entry filtering and the replay set."""

    def __init__(self, subscription: DispatchSubscription, topic: TopicReadView) -> None:
        self.sub = subscription
        self.topic = topic
        # Fixed for the subscription's lifetime: bound once rather than looked up per
        # entry on the dispatch path.
        self.cursor = subscription.cursor
        self._pending_acks = subscription.txns
        self._compacted_read = subscription.compacted_read
        self._recent_infos = topic.recent_infos
        self.consumers: list[Consumer] = []
        self._replay: list[Position] = []  # sorted
        self._replay_set: set[Position] = set()
        # Replayed batches to deliver only some members of (an abort released them
        # while the entry's other members may be in a consumer's hands): position ->
        # wire ack set, bit set = deliver. Kept until the entry goes out.
        self._replay_members: dict[Position, list[int]] = {}
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._epoch = 0  # bumped on rewind/seek so a read in flight is discarded

    # -- consumers ---------------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.schedule()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self.add_replay(consumer.take_pending(), count_redelivery=True)
        self.schedule()

    # -- replay set --------------------------------------------------------------------
    def add_replay(
        self,
        positions: Iterable[Position],
        count_redelivery: bool,
        members: Mapping[Position, Sequence[int]] | None = None,
    ) -> None:
        """Queue entries for redelivery. ``members``: of these, batches to redeliver
        only some members of (wire ack set, bit set = deliver); the rest go whole,
        which also lifts an earlier restriction on them."""
        restricted = self._replay_members
        for p in positions:
            only = members.get(p) if members is not None else None
            queued = p in self._replay_set
            if only is None:
                restricted.pop(p, None)
            elif p in restricted:
                restricted[p] = or_(restricted[p], only)
            elif not queued:
                restricted[p] = list(only)
            # (queued without a restriction: it goes whole anyway)
            if queued:
                continue
            if self.cursor.is_acknowledged(p) or self._pending_acks.is_pending(p):
                restricted.pop(p, None)
                continue
            self._requeue(p)
            if count_redelivery:
                self.sub.count_redelivery(p)

    def _requeue(self, p: Position) -> None:
        """Back into the replay set, as it was (an entry no consumer could take)."""
        if p not in self._replay_set:
            self._replay_set.add(p)
            bisect.insort(self._replay, p)

    def discard_replay(self, position: Position) -> None:
        self._replay_members.pop(position, None)
        if position in self._replay_set:
            self._replay_set.discard(position)
            i = bisect.bisect_left(self._replay, position)
            if i < len(self._replay) and self._replay[i] == position:
                del self._replay[i]

    def discard_replay_up_to(self, position: Position) -> None:
        i = bisect.bisect_right(self._replay, position)
        for p in self._replay[:i]:
            self._replay_set.discard(p)
            self._replay_members.pop(p, None)
        del self._replay[:i]

    def clear_replay(self) -> None:
        self._replay.clear()
        self._replay_set.clear()
        self._replay_members.clear()

    @property
    def replay_size(self) -> int:
        return len(self._replay)

    @property
    def delayed_messages(self) -> int:
        """Entries held back until their delivery time (Pulsar's ``msgDelayed``):
        none on Exclusive and Failover, which deliver delayed messages at once."""
        return 0

    @property
    def delayed_index_size_bytes(self) -> int:
        return 0

    def close(self) -> None:
        """The subscription replaces or drops this dispatcher: stop its timers."""

    # -- the loop ----------------------------------------------------------------------
    def schedule(self) -> None:
        """Make sure the dispatch loop runs (soon) to look for work."""
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._again = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while True:
                progressed = await self.dispatch_once()
                if not progressed and not self._again:
                    return
                self._again = False
        except StorageError as e:
            # Reported, never skipped: delivery stops at the unreadable entry until an
            # operator repairs the ledger; other subscriptions keep being served.
            log.error("cannot read %s: %s", self.sub.describe(), e)
        except Exception:  # a bug; keep the broker serving other subscriptions
            log.exception("dispatcher of %s failed", self.sub.describe())

    async def dispatch_once(self) -> bool:
        """Send what can be sent now; return True if anything moved."""
        raise NotImplementedError

    def on_redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        raise NotImplementedError

    def rewind(self) -> None:
        """Forget in-flight state and restart reading at the first unacked entry."""
        self._epoch += 1
        for c in self.consumers:
            c.take_pending()
        self.clear_replay()
        self.cursor.rewind()
        self._compacted_read.on_rewind(self.cursor.mark_delete_position)
        self.schedule()

    # -- helpers -----------------------------------------------------------------------
    def read_batch_entries(self, permits: int) -> int:
        """How many entries to read for ``permits``: at most
        ``dispatcherMaxReadBatchSize``, and about ``dispatcherMaxReadSizeBytes`` bytes
        at the topic's average entry size (a read of 100 entries of 5 MiB each would
        hold 500 MiB for a consumer that may take only the first of them before its
        connection is full); at least one."""
        ledger = self.topic.ledger
        limits = self.topic.read_limits
        entries = ledger.number_of_entries
        want = min(permits, limits.max_entries)
        if entries > 0:
            average = ledger.total_size // entries
            if average > 0:
                want = min(want, limits.max_bytes // average)
        return max(want, 1)

    async def read_new(self, max_entries: int) -> tuple[list[tuple[Entry, EntryInfo]], bool]:
        """Read the next entries from the cursor, dropping markers and corrupt entries.

        Returns the deliverable entries and whether the cursor moved at all (an all-marker
        read moves the cursor without yielding anything, and is still progress).
        """
        cursor = self.cursor
        limit = self.topic.max_read_position
        if cursor.read_position > limit:
            if self.topic.terminated:
                self.sub.check_end_of_topic()
            return [], False
        epoch = self._epoch
        entries = await cursor.read_entries(max_entries)
        if epoch != self._epoch:
            return [], True
        out: list[tuple[Entry, EntryInfo]] = []
        for e in entries:
            if e.position > limit:
                # Not readable yet (an open transaction ahead); read it again later.
                cursor.seek(e.position)
                break
            info = self._filter(e)
            if info is not None:
                out.append((e, info))
        return out, bool(entries)

    async def read_replay(self, max_entries: int) -> list[tuple[Entry, EntryInfo]]:
        out: list[tuple[Entry, EntryInfo]] = []
        cursor = self.cursor
        while self._replay and len(out) < max_entries:
            p = self._replay.pop(0)
            self._replay_set.discard(p)
            e = None if cursor.is_acknowledged(p) else await self.topic.ledger.read_entry(p)
            info = self._filter(e) if e is not None else None
            if e is None or info is None:
                self._replay_members.pop(p, None)
                continue
            out.append((e, info))
        return out

    def _filter(self, e: Entry) -> EntryInfo | None:
        if self._pending_acks.is_pending(e.position):
            return None  # acknowledged inside an open transaction: not delivered again
        info = self._recent_infos.get(e.position)
        if info is None:
            try:
                info = entry_info(e.data)
            except RemoteProtocolError:
                log.error(
                    "skipping unreadable entry %s on %s", e.position, self.sub.describe()
                )
                self.cursor.delete([e.position])
                return None
        if info.marker_type is not None or self.topic.is_aborted(info, e.position):
            # Markers and aborted transactional data are never delivered; they count as
            # acknowledged so they never hold back mark-delete.
            self.cursor.delete([e.position])
            return None
        return info

    def delivery(
        self, e: Entry, info: EntryInfo, retained: list[int] | None = None
    ) -> Delivery | None:
        """The entry as it goes out, or ``None`` when no member of it is left to send.

        ``retained``: the messages of a compacted batch that compaction kept. A batch
        goes with the ack set of its members still to deliver: not acknowledged on the
        cursor, not pending in an open transaction, kept by compaction. When that set
        is empty the entry must not go at all: on the wire an absent ack set means
        "every member", so sending it would redeliver members that are acknowledged.
        Such an entry is done with, and a replay restriction on it goes too.
        """
        if retained is None and not info.is_batch:
            # A single message: no ack set can apply to it.
            return Delivery(e, info, self.sub.redelivery_count(e.position), None)
        ack_set = self.cursor.batch_ack_set(e.position) if info.is_batch else None
        if retained is not None:
            ack_set = and_(retained, ack_set) if ack_set is not None else retained
        if info.is_batch:
            pending = self._pending_acks.pending_ack_set(e.position)
            if pending is not None:
                # Members acknowledged in an open transaction are not delivered again.
                ack_set = and_(pending, ack_set) if ack_set is not None else pending
            only = self._replay_members.get(e.position)
            if only is not None:
                ack_set = and_(only, ack_set) if ack_set is not None else list(only)
        if ack_set is not None and not any(ack_set):
            self._replay_members.pop(e.position, None)
            return None
        return Delivery(e, info, self.sub.redelivery_count(e.position), ack_set)

    def _hand_over(self, c: Consumer, d: Delivery) -> None:
        """Send a (possibly replayed) entry; its replay restriction is used up."""
        self._replay_members.pop(d.entry.position, None)
        c.deliver([d])

    async def read_compacted(
        self, max_entries: int
    ) -> tuple[list[tuple[Entry, EntryInfo, list[int] | None]], bool]:
        """``read_new`` for a ``read_compacted`` consumer (see ``CompactedReadState``).

        While the subscription is within its compacted view, entries come from the
        compacted ledger with their original positions (and the kept-messages mask of
        split batches); then the cursor is moved past the view's horizon and reading
        continues on the topic.
        """
        ledger = self.topic.ledger
        compaction = self.topic.compaction
        horizon = compaction.horizon
        cursor = self.cursor
        state = self._compacted_read
        plan = (
            state.plan(cursor.read_position, horizon, ledger.first_position)
            if horizon is not None
            else None
        )
        if plan is not None:
            start, limit = plan
            epoch = self._epoch
            # A storage error propagates like one on the topic: delivery stops there
            # rather than skipping part of the table.
            records = await compaction.read(start, max_entries)
            if epoch != self._epoch:
                return [], True  # rewound meanwhile: the plan is stale
            state.read_compacted_ledger()
            # Records of a generation newer than the subscription's view stop at its
            # pinned horizon; the topic has the rest.
            records = [r for r in records if r.position <= limit]
            if records:
                last = records[-1].position
                cursor.seek(Position(last.ledger_id, last.entry_id + 1))
                # Acks are tracked only for entries the topic still holds; a trimmed
                # position below mark-delete was never acknowledged here.
                first = ledger.first_position
                out: list[tuple[Entry, EntryInfo, list[int] | None]] = []
                for r in records:
                    info = self._compacted_info(r.entry)
                    acked = r.position >= first and cursor.is_acknowledged(r.position)
                    if info is not None and not acked:
                        out.append((r.entry, info, r.retained))
                return out, True
            # The compacted view is exhausted: continue on the topic after it.
            cursor.seek(Position(limit.ledger_id, limit.entry_id + 1))
        state.read_topic()
        batch, moved = await self.read_new(max_entries)
        return [(e, info, None) for e, info in batch], moved

    def _compacted_info(self, e: Entry) -> EntryInfo | None:
        try:
            return entry_info(e.data)
        except RemoteProtocolError:
            log.error("skipping unreadable compacted entry %s on %s",
                      e.position, self.sub.describe())
            return None


class SingleActiveConsumerDispatcher(Dispatcher):
    """Exclusive and Failover: everything goes to the active consumer, in order."""

    def __init__(
        self,
        subscription: DispatchSubscription,
        topic: TopicReadView,
        failover: bool,
        partition_index: int,
    ) -> None:
        super().__init__(subscription, topic)
        self.failover = failover
        self.partition_index = partition_index
        self.active: Consumer | None = None

    def _pick_active(self) -> Consumer | None:
        if not self.consumers:
            return None
        # The first by (priority level, name, join order); on a partition, the
        # partition's turn among the highest priority's consumers, the only case that
        # needs them in order (otherwise a consumer joining costs one pass, no sort).
        top_level = min(c.priority_level for c in self.consumers)
        top = [c for c in self.consumers if c.priority_level == top_level]
        if self.failover and self.partition_index >= 0:
            # Spread partitions over consumers (Pulsar: partitionIndex % consumers).
            top.sort(key=lambda c: (c.consumer_name, c.order))
            return top[self.partition_index % len(top)]
        return min(top, key=lambda c: (c.consumer_name, c.order))

    def _elect(self) -> None:
        new = self._pick_active()
        if new is self.active:
            return
        old, self.active = self.active, new
        if old is not None and not old.closed:
            # The old consumer loses its in-flight entries; they come back via rewind.
            old.take_pending()
        if self.failover:
            for c in self.consumers:
                self.sub.notify_active_consumer(c, c is new)
        self.rewind()

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        if self.failover and self.active is not None:
            self.sub.notify_active_consumer(consumer, False)
        self._elect()
        self.schedule()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        consumer.take_pending()
        if consumer is self.active:
            self.active = None
        self._elect()
        self.schedule()

    def on_redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        # Single messages cannot be redelivered to a single consumer without breaking
        # order, so any redelivery request redelivers everything unacked (as Pulsar).
        if consumer is not self.active:
            return
        for p in consumer.pending:
            self.sub.count_redelivery(p)
        self.rewind()

    async def dispatch_once(self) -> bool:
        c = self.active
        if c is None or not c.available():
            return False
        want = self.read_batch_entries(max(c.permits, 1))
        batch: list[tuple[Entry, EntryInfo, list[int] | None]]
        if c.read_compacted:
            batch, moved = await self.read_compacted(want)
        else:
            plain, moved = await self.read_new(want)
            batch = [(e, info, None) for e, info in plain]
        if c is not self.active or c.closed:
            # The active consumer changed while reading; a rewind already happened.
            return True
        write_state = c.write_state
        for e, info, kept in batch:
            if not write_state.writable:
                # The connection's write buffer filled up: the rest is read again once
                # it drains (none of it is pending on the consumer).
                self.cursor.seek(e.position)
                break
            d = self.delivery(e, info, kept)
            if d is not None:
                c.deliver((d,))
        return moved


class SharedDispatcher(Dispatcher):
    """Shared: round-robin over consumers with permits; replay set first; delayed
    entries held back until due."""

    def __init__(self, subscription: DispatchSubscription, topic: TopicReadView) -> None:
        super().__init__(subscription, topic)
        self._delayed: DelayedHold = topic.delayed_delivery.new_hold(self._on_due)
        self._rr = 0
        # The consumers' priority levels, lowest (served first) first; worked out
        # again only when a consumer joins or leaves, not for every entry.
        self._levels: list[int] | None = None

    def add_consumer(self, consumer: Consumer) -> None:
        self._levels = None
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        self._levels = None
        super().remove_consumer(consumer)

    # -- delayed delivery --------------------------------------------------------------
    def _on_due(self) -> None:
        # Without consumers there is nobody to send to; the next one schedules.
        if self.consumers:
            self.schedule()

    @property
    def delayed_messages(self) -> int:
        return len(self._delayed)

    @property
    def delayed_index_size_bytes(self) -> int:
        return self._delayed.index_size_bytes

    def close(self) -> None:
        self._delayed.close()

    def discard_replay(self, position: Position) -> None:
        super().discard_replay(position)
        self._delayed.discard(position)

    def discard_replay_up_to(self, position: Position) -> None:
        super().discard_replay_up_to(position)
        self._delayed.discard_up_to(position)

    def clear_replay(self) -> None:
        # Called when the cursor is rewound or reset: it reads the delayed entries
        # again, and indexes again those still ahead.
        super().clear_replay()
        self._delayed.clear()

    def on_redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        if positions is None:
            positions = consumer.take_pending()
        else:
            positions = [p for p in positions if consumer.acked(p)]
        self.add_replay(positions, count_redelivery=True)
        self.schedule()

    def _next_available(self) -> Consumer | None:
        consumers = self.consumers
        n = len(consumers)
        levels = self._levels
        if levels is None:
            levels = self._levels = sorted({c.priority_level for c in consumers})
        if len(levels) == 1:
            # One level (the usual case): the next available consumer in turn.
            for i in range(n):
                c = consumers[(self._rr + i) % n]
                if c.available():
                    self._rr = (self._rr + i + 1) % n
                    return c
            return None
        # Highest priority first (lowest level), round-robin within a level.
        for level in levels:
            for i in range(n):
                c = self.consumers[(self._rr + i) % n]
                if c.priority_level == level and c.available():
                    self._rr = (self._rr + i + 1) % n
                    return c
        return None

    def _total_permits(self) -> int:
        return sum(max(c.permits, 0) for c in self.consumers if c.available())

    async def dispatch_once(self) -> bool:
        permits = self._total_permits()
        if permits <= 0:
            return False
        want = self.read_batch_entries(permits)
        self._replay_due_delayed()
        replayed, wait = self._delayed.hold_back(await self.read_replay(want))
        for e, _ in wait:
            self._requeue(e.position)
        if replayed and self._send(replayed):
            return True
        # Nothing from the replay set could go out (or there was none): read new
        # entries, which may belong to consumers that are free. Reading moves the cursor,
        # which counts as progress until the replay set is full.
        if self._reading_paused():
            return False
        fresh, moved = await self._read_new_not_delayed(want)
        if fresh:
            self._send(fresh)
        return moved

    # The delayed-delivery steps of a round, shared with Key_Shared.
    def _replay_due_delayed(self) -> None:
        """Delayed entries that fell due join the replay set: they go out like
        redeliveries, without counting one."""
        for p in self._delayed.take_due(REPLAY_ENTRIES_MAX - len(self._replay)):
            self._requeue(p)

    def _reading_paused(self) -> bool:
        return len(self._replay) >= REPLAY_ENTRIES_MAX or self._delayed.should_pause_reading()

    async def _read_new_not_delayed(
        self, want: int
    ) -> tuple[list[tuple[Entry, EntryInfo]], bool]:
        """``read_new`` less the entries the delayed index took."""
        fresh, moved = await self.read_new(want)
        fresh, wait = self._delayed.hold_back(fresh)
        if wait:
            # The delayed index is full: read again from the first entry that did not
            # fit, once indexed entries fall due.
            self.cursor.seek(wait[0][0].position)
        return fresh, moved

    def _send(self, batch: list[tuple[Entry, EntryInfo]]) -> bool:
        sent = False
        for e, info in batch:
            d = self.delivery(e, info)
            if d is None:
                continue  # nothing left in it to deliver
            c = self._next_available()
            if c is None:
                self._requeue(e.position)
                continue
            self._hand_over(c, d)
            sent = True
        return sent
