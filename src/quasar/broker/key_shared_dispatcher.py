"""The Key_Shared dispatcher: every key to one consumer, in order.

Which consumer a key belongs to is the selector's answer (``key_shared.py``):
consistent hashing for AUTO_SPLIT, declared hash ranges for STICKY. On top of the
Shared dispatcher's replay set, two rules keep each key's order:

* **No overtaking in the replay set.** An entry that could not go out (its consumer
  has no permits, is held back, or no consumer covers its key) waits in the replay
  set with its key's hash. A later entry of the same key never goes before it: the
  replay round skips the later entries of a key once one of them had to stay, a new
  entry whose hash waits in the replay set waits too, and no new entry is read while
  the set holds entries whose key is not known yet (handed back by a consumer).
* **Recently joined consumers** (Pulsar 3.x's rule, the one without "draining
  hashes"): a consumer joining while entries are out unacknowledged remembers the
  read position at that moment. It gets entries before that position at once, and
  entries at or after it only once everything before it is acknowledged (mark-delete
  reached it), so a key that moved to it is not handed over while its earlier
  messages may still be in another consumer's hands. With ``allowOutOfOrderDelivery``
  the subscription skips the rule, as Pulsar does.

Every consumer of a subscription must declare the same Key_Shared mode and
``allowOutOfOrderDelivery`` while others are connected (Pulsar's ``ConsumerBusy``).
"""

from __future__ import annotations

import bisect

from quasar.errors import ConsumerBusy
from quasar.protocol import pb
from quasar.storage.api import Entry, Position

from .api import DispatchSubscription, TopicReadView
from .consumer import Consumer
from .dispatcher import SharedDispatcher
from .entry_info import EntryInfo
from .key_shared import (
    ConsistentHashSelector,
    StickyRangeSelector,
    format_range,
    key_hash,
)

_MODE_NAMES: dict[int, str] = {pb.AUTO_SPLIT: "AUTO_SPLIT", pb.STICKY: "STICKY"}


def mode_of(consumer: Consumer) -> int:
    """A consumer's Key_Shared mode: AUTO_SPLIT when it sent no KeySharedMeta."""
    return pb.AUTO_SPLIT if consumer.key_shared_mode is None else consumer.key_shared_mode


class KeySharedDispatcher(SharedDispatcher):
    """Key_Shared, with the policy (mode, allowOutOfOrderDelivery) of the consumer that
    created it."""

    def __init__(
        self,
        subscription: DispatchSubscription,
        topic: TopicReadView,
        first: Consumer,
        replica_points: int,
    ) -> None:
        super().__init__(subscription, topic)
        self.mode = mode_of(first)
        self.allow_out_of_order_delivery = first.allow_out_of_order_delivery
        self.selector: ConsistentHashSelector | StickyRangeSelector = (
            StickyRangeSelector() if self.mode == pb.STICKY
            else ConsistentHashSelector(replica_points)
        )
        # consumer -> the read position when it joined (recently joined rule). At most
        # one per consumer, so bounded like the consumers (maxConsumersPerSubscription).
        self._recently_joined: dict[Consumer, Position] = {}
        # The key hash of entries in the replay set, where known (an entry handed
        # back by a consumer has none until it is read again); bounded with the
        # replay set.
        self._replay_hash: dict[Position, int] = {}
        # hash -> the positions of its waiting entries, sorted.
        self._waiting: dict[int, list[Position]] = {}

    # -- policy ------------------------------------------------------------------------
    def same_policy(self, consumer: Consumer) -> bool:
        return (
            mode_of(consumer) == self.mode
            and consumer.allow_out_of_order_delivery == self.allow_out_of_order_delivery
        )

    def check_compatible(self, consumer: Consumer) -> None:
        """Raises: ConsumerBusy when ``consumer``'s policy differs (Pulsar's wording)."""
        mode = mode_of(consumer)
        if mode != self.mode:
            raise ConsumerBusy(
                "Subscription is of different type. Active subscription key_shared mode of "
                f"'{_MODE_NAMES.get(self.mode)}' is different than the connecting "
                f"consumer's key_shared mode '{_MODE_NAMES.get(mode)}'."
            )
        if consumer.allow_out_of_order_delivery != self.allow_out_of_order_delivery:
            raise ConsumerBusy(
                "Subscription is of different type. "
                + (
                    "Active subscription allows out of order delivery while the "
                    "connecting consumer does not allow it."
                    if self.allow_out_of_order_delivery
                    else "Active subscription does not allow out of order delivery "
                    "while the connecting consumer allows it."
                )
            )

    # -- consumers ---------------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        """Raises: ConsumerBusy (another policy), ConsumerAssignError (STICKY ranges
        that are malformed or overlap another consumer's); nothing changes then."""
        if self.consumers:
            self.check_compatible(consumer)
        if isinstance(self.selector, StickyRangeSelector):
            self.selector.add(consumer, consumer.key_shared_ranges)
        else:
            self.selector.add(consumer)
        cursor = self.cursor
        if (
            self.consumers
            and not self.allow_out_of_order_delivery
            and cursor.read_position > self.topic.ledger.next_position(cursor.mark_delete_position)
        ):
            # Entries were read and are not all acknowledged: they may hold keys this
            # consumer takes over (Pulsar: more than one entry since the first unacked).
            self._recently_joined[consumer] = cursor.read_position
        self.consumers.append(consumer)
        self._levels = None
        self.schedule()

    def remove_consumer(self, consumer: Consumer) -> None:
        self._recently_joined.pop(consumer, None)
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            self.selector.remove(consumer)
        self._levels = None
        self.add_replay(consumer.take_pending(), count_redelivery=True)
        self.schedule()

    def _held_back(self, c: Consumer, position: Position) -> bool:
        joined = self._recently_joined.get(c)
        if joined is None:
            return False
        if self.cursor.mark_delete_position >= self.topic.ledger.previous_position(joined):
            del self._recently_joined[c]
            return False
        return position >= joined

    def consumers_after_mark_delete(self) -> dict[str, str]:
        """``consumersAfterMarkDeletePosition``: recently joined consumers and the
        position from which they wait for mark-delete."""
        for c in list(self._recently_joined):
            self._held_back(c, self._recently_joined[c])  # drops those released
        return {c.consumer_name: str(p) for c, p in self._recently_joined.items()}

    def key_hash_ranges(self) -> dict[Consumer, list[str]]:
        """Each consumer's ``keyHashRanges``, as Pulsar prints them."""
        return {
            c: [format_range(s, e) for s, e in rs]
            for c, rs in self.selector.ranges().items()
            if isinstance(c, Consumer)
        }

    # -- the replay set, with key hashes -----------------------------------------------
    def _requeue_keyed(self, p: Position, h: int) -> None:
        self._requeue(p)
        if p not in self._replay_hash:
            self._replay_hash[p] = h
            bisect.insort(self._waiting.setdefault(h, []), p)

    def _forget_hash(self, p: Position) -> None:
        h = self._replay_hash.pop(p, None)
        if h is not None:
            positions = self._waiting[h]
            del positions[bisect.bisect_left(positions, p)]
            if not positions:
                del self._waiting[h]

    def discard_replay(self, position: Position) -> None:
        super().discard_replay(position)
        self._forget_hash(position)

    def discard_replay_up_to(self, position: Position) -> None:
        for p in [p for p in self._replay_hash if p <= position]:
            self._forget_hash(p)
        super().discard_replay_up_to(position)

    def clear_replay(self) -> None:
        super().clear_replay()
        self._replay_hash.clear()
        self._waiting.clear()

    def _blocked(self, c: Consumer | None, p: Position) -> bool:
        return c is None or not c.available() or self._held_back(c, p)

    def _consumer_for(self, h: int) -> Consumer | None:
        c = self.selector.select(h)
        assert c is None or isinstance(c, Consumer)
        return c

    async def _read_replay_keyed(self, max_entries: int) -> list[tuple[Entry, EntryInfo]]:
        """Read up to ``max_entries`` replay entries that may go out now, in position
        order. An entry whose hash is known and whose consumer cannot take it stays
        unread, and so do the later entries of its key."""
        chosen: list[Position] = []
        stuck_hashes: set[int] = set()
        for p in self._replay:
            if len(chosen) >= max_entries:
                break
            h = self._replay_hash.get(p)
            if h is not None:
                if h in stuck_hashes:
                    # Checked first: a full replay set of stuck keys costs one set
                    # lookup per entry, not a selector lookup.
                    continue
                if self._blocked(self._consumer_for(h), p):
                    stuck_hashes.add(h)
                    continue
            chosen.append(p)
        out: list[tuple[Entry, EntryInfo]] = []
        cursor = self.cursor
        for p in chosen:
            self.discard_replay_keeping_members(p)
            e = None if cursor.is_acknowledged(p) else await self.topic.ledger.read_entry(p)
            info = self._filter(e) if e is not None else None
            if e is None or info is None:
                self._replay_members.pop(p, None)
                continue
            out.append((e, info))
        return out

    def discard_replay_keeping_members(self, p: Position) -> None:
        """Out of the replay set to be sent; a member restriction stays until then."""
        members = self._replay_members.get(p)
        self.discard_replay(p)
        if members is not None:
            self._replay_members[p] = members

    # -- dispatch ----------------------------------------------------------------------
    async def dispatch_once(self) -> bool:
        permits = self._total_permits()
        if permits <= 0:
            return False
        want = self.read_batch_entries(permits)
        # Due delayed entries rejoin the replay set; their key is learnt when read.
        self._replay_due_delayed()
        waiting_before = len(self._replay)
        unknown_before = waiting_before - len(self._replay_hash)
        replayed, wait = self._delayed.hold_back(await self._read_replay_keyed(want))
        for e, info in wait:
            self._requeue_keyed(e.position, key_hash(info.key))
        if replayed and self._send_keyed(replayed):
            return True
        if self._reading_paused():
            return False
        unknown = len(self._replay) - len(self._replay_hash)
        if unknown:
            # Entries handed back whose key is not known yet: they are read in the
            # next rounds before new entries may overtake them. Progress is any entry
            # that left the replay set or whose key became known.
            return len(self._replay) < waiting_before or unknown < unknown_before
        fresh, moved = await self._read_new_not_delayed(want)
        if fresh:
            self._send_keyed(fresh)
        return moved

    def _send_keyed(self, batch: list[tuple[Entry, EntryInfo]]) -> bool:
        """Hand entries to their keys' consumers; an entry that cannot go now waits
        in the replay set with its hash, holding back the later entries of its key
        (per-consumer conditions, no permits or recently joined, hold for all of its
        later entries anyway)."""
        sent = False
        waiting = self._waiting
        for e, info in batch:
            d = self.delivery(e, info)
            if d is None:
                continue  # nothing left in it to deliver
            h = key_hash(info.key)
            c = self._consumer_for(h)
            if (
                c is None
                or (h in waiting and waiting[h][0] < e.position)  # an earlier one waits
                or self._blocked(c, e.position)
            ):
                self._requeue_keyed(e.position, h)
                continue
            self._hand_over(c, d)
            sent = True
        return sent
