"""Consumer-side acknowledgement bookkeeping (pure; the consumer owns timers and I/O).

* :class:`BatchAckTracker`: which members of each batch entry are still unacked. With
  the default ``batch_index_ack_enabled=False`` the broker only learns about an entry
  when *all* its members are acked (one ACK for ``(ledger, entry)`` without ack_set).
* :class:`AckGroupingTracker`: collects acks for a short time so that many acks go out
  in one ACK frame (individual acks carry many ids since protocol v12; a cumulative
  ack only needs the highest id).
* :class:`RedeliveryTracker`: ids with a due time, used both for negative acks
  (redeliver after a delay) and for the unacked-message timeout.

Ack-set words use ``java.util.BitSet.toLongArray()`` layout: word ``k`` holds indexes
``64k .. 64k+63`` as signed int64, a set bit means *not yet acked*, and trailing zero
words are dropped.
"""

from __future__ import annotations

from typing import Any

EntryKey = tuple[int, int]  # (ledger_id, entry_id)


def all_unacked(batch_size: int) -> int:
    return (1 << batch_size) - 1


class BatchAckTracker:
    """Unacked members per batch entry, as an integer bitset (1 = unacked)."""

    def __init__(self) -> None:
        self._unacked: dict[EntryKey, int] = {}
        # Entries for which a cumulative ack of the previous entry was already sent
        # (partial cumulative ack of a batch is sent once per batch).
        self._cumulative_prev_sent: set[EntryKey] = set()

    def __len__(self) -> int:
        return len(self._unacked)

    def register(
        self, key: EntryKey, batch_size: int, unacked_bits: int | None
    ) -> None:
        """Start tracking an entry seen in a MESSAGE; ``unacked_bits`` from its ack_set.

        An entry already tracked keeps its state: a redelivery must not resurrect
        members the application acked before.
        """
        if key not in self._unacked:
            full = all_unacked(batch_size)
            self._unacked[key] = full if unacked_bits is None else unacked_bits & full

    def ack(self, key: EntryKey, index: int, batch_size: int) -> bool:
        """Ack one member; True when the whole entry is now acked (and forgotten)."""
        bits = self._unacked.get(key, all_unacked(batch_size)) & ~(1 << index)
        return self._store(key, bits)

    def ack_up_to(self, key: EntryKey, index: int, batch_size: int) -> bool:
        """Cumulative ack of members ``0..index``; True when the entry is complete.

        Every earlier entry is forgotten too: the cumulative ack covers them.
        """
        for other in [k for k in self._unacked if k < key]:
            del self._unacked[other]
        self._cumulative_prev_sent = {k for k in self._cumulative_prev_sent if k >= key}
        bits = self._unacked.get(key, all_unacked(batch_size)) & ~(
            (1 << (index + 1)) - 1
        )
        return self._store(key, bits)

    def claim_cumulative_prev(self, key: EntryKey) -> bool:
        """True the first time a partial cumulative ack for ``key`` is made."""
        if key in self._cumulative_prev_sent:
            return False
        self._cumulative_prev_sent.add(key)
        return True

    def unacked_bits(self, key: EntryKey, batch_size: int) -> int:
        return self._unacked.get(key, all_unacked(batch_size))

    def is_acked(self, key: EntryKey, index: int) -> bool:
        """Whether a member of a tracked entry was acked already (False if untracked)."""
        bits = self._unacked.get(key)
        return bits is not None and not bits >> index & 1

    def clear(self) -> None:
        self._unacked.clear()
        self._cumulative_prev_sent.clear()

    def _store(self, key: EntryKey, bits: int) -> bool:
        if bits == 0:
            self._unacked.pop(key, None)
            self._cumulative_prev_sent.discard(key)
            return True
        self._unacked[key] = bits
        return False


class AckGroupingTracker:
    """Acks waiting to be flushed in one ACK frame each for individual and cumulative.

    ``max_ids`` bounds the individual set: reaching it asks for an immediate flush.
    Individual acks for entries at or below the pending or last-sent cumulative
    position are dropped as redundant.
    """

    def __init__(self, max_ids: int = 1000) -> None:
        self.max_ids = max_ids
        # (ledger, entry) -> ack_set words ([] means the whole entry).
        self._individual: dict[EntryKey, list[int]] = {}
        self._cumulative: tuple[EntryKey, list[int]] | None = None
        self._cumulative_sent: EntryKey | None = None

    def __bool__(self) -> bool:
        return bool(self._individual) or self._cumulative is not None

    def add_individual(self, key: EntryKey, ack_set: list[int] | None = None) -> bool:
        """Queue an individual ack; True when the caller should flush now."""
        if self._covered(key):
            return False
        if ack_set:
            # A partial ack never overrides a full ack queued for the same entry.
            if self._individual.get(key) == []:
                return False
            self._individual[key] = list(ack_set)
        else:
            self._individual[key] = []
        return len(self._individual) >= self.max_ids

    def set_cumulative(self, key: EntryKey, ack_set: list[int] | None = None) -> None:
        """Queue a cumulative ack; only the highest position is kept."""
        if (
            self._cumulative is None
            or key > self._cumulative[0]
            or (key == self._cumulative[0] and not ack_set)
        ):
            self._cumulative = (key, list(ack_set or []))

    def drain(
        self,
    ) -> tuple[list[tuple[EntryKey, list[int]]], tuple[EntryKey, list[int]] | None]:
        """Take everything queued: (individual acks, cumulative ack or None)."""
        cumulative = self._cumulative
        if cumulative is not None and not cumulative[1]:
            self._cumulative_sent = max(
                self._cumulative_sent or cumulative[0], cumulative[0]
            )
        individual = [
            (k, v) for k, v in sorted(self._individual.items()) if not self._covered(k)
        ]
        self._individual.clear()
        self._cumulative = None
        return individual, cumulative

    def reset_cumulative_floor(self) -> None:
        """Forget the last cumulative position (after a seek moves the cursor back)."""
        self._cumulative_sent = None

    def _covered(self, key: EntryKey) -> bool:
        if self._cumulative_sent is not None and key <= self._cumulative_sent:
            return True
        pending = self._cumulative
        return pending is not None and not pending[1] and key <= pending[0]


class RedeliveryTracker:
    """Message ids with a due time (negative acks, unacked-message timeout)."""

    def __init__(self) -> None:
        self._due: dict[Any, float] = {}

    def __len__(self) -> int:
        return len(self._due)

    def add(self, message_id: object, due_ms: float) -> None:
        # A second nack of the same message moves its due time: the latest wins.
        self._due[message_id] = due_ms

    def add_if_absent(self, message_id: object, due_ms: float) -> None:
        self._due.setdefault(message_id, due_ms)

    def remove(self, message_id: object) -> None:
        # Usually empty: skip hashing the id (a Python-level __hash__) then.
        if self._due:
            self._due.pop(message_id, None)

    def remove_up_to(self, limit: Any) -> None:
        """Forget every id ``<= limit`` (a cumulative ack covers them)."""
        for mid in [m for m in self._due if m <= limit]:
            del self._due[mid]

    def pop_due(self, now_ms: float) -> list[object]:
        due = [mid for mid, at in self._due.items() if at <= now_ms]
        for mid in due:
            del self._due[mid]
        return due

    def next_due_ms(self) -> float | None:
        return min(self._due.values(), default=None)

    def clear(self) -> None:
        self._due.clear()
