"""``BufferState``: what a transaction buffer knows, changed by ``apply(record)``.

The same ``apply`` runs for live operations (once the entry they appended is durable,
in position order) and for recovery (for every entry replayed after the snapshot), so
a recovered buffer holds what the live one held (INV-REC).

* ``ongoing``: transaction → position of its *first* entry on this partition, in
  first-append order; the oldest one pins the max read position.
* ``aborted``: transaction → ``AbortedTxn(first, marker)``, in abort-marker order.
  ``first`` is where the aborted run of its data starts (the marker itself when it
  had none): an entry of that transaction before ``first`` was written before an
  earlier *commit* of the same id and stays visible (a late send accepted after the
  commit was forgotten, then aborted by the low-watermark cleanup, must not hide
  the committed data). ``marker`` decides when the id can be forgotten: once the
  ledger holding it is deleted, every entry of the transaction is gone too.
* ``ended``: a bounded cache of recently ended transactions (for idempotent ends and
  refusing late sends); advisory only, never needed for visibility.
* ``low_watermarks``: coordinator id → highest low watermark heard (max-merged).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import NamedTuple

from quasar.protocol.txn_id import TxnID
from quasar.storage.api import Position

from ..txn_status import TxnAction
from .records import RecordKind, TbRecord


class AbortedTxn(NamedTuple):
    first: Position  # first aborted entry of the transaction (or the marker)
    marker: Position  # its abort marker


class EndedTxns:
    """Recently ended transactions, bounded by count and pruned by low watermark."""

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._actions: dict[TxnID, TxnAction] = {}  # insertion order = end order
        # Per coordinator, a min-heap of sequences, so pruning below a low watermark
        # costs O(log n) per id. Entries evicted by size stay until popped (lazy).
        self._heaps: dict[int, list[int]] = {}
        self._heap_items = 0

    def __len__(self) -> int:
        return len(self._actions)

    def get(self, txn: TxnID) -> TxnAction | None:
        return self._actions.get(txn)

    def add(self, txn: TxnID, action: TxnAction) -> None:
        if txn in self._actions:
            return
        self._actions[txn] = action
        heapq.heappush(self._heaps.setdefault(txn.most_bits, []), txn.least_bits)
        self._heap_items += 1
        while len(self._actions) > self._max_size:
            del self._actions[next(iter(self._actions))]
        if self._heap_items > 2 * len(self._actions) + 64:
            self._rebuild_heaps()

    def prune(self, tc_id: int, low_watermark: int) -> None:
        """Forget ids of ``tc_id`` at or below ``low_watermark`` (it fences them now)."""
        heap = self._heaps.get(tc_id)
        while heap and heap[0] <= low_watermark:
            least = heapq.heappop(heap)
            self._heap_items -= 1
            self._actions.pop(TxnID(tc_id, least), None)

    def _rebuild_heaps(self) -> None:
        heaps: dict[int, list[int]] = {}
        for txn in self._actions:
            heaps.setdefault(txn.most_bits, []).append(txn.least_bits)
        for heap in heaps.values():
            heapq.heapify(heap)
        self._heaps = heaps
        self._heap_items = len(self._actions)


class BufferState:
    """See the module docstring. Positions are only compared, never computed, here."""

    def __init__(self, max_ended_transactions: int) -> None:
        self.ongoing: dict[TxnID, Position] = {}
        self.aborted: dict[TxnID, AbortedTxn] = {}
        self.ended = EndedTxns(max_ended_transactions)
        self.low_watermarks: dict[int, int] = {}

    # ------------------------------------------------------------------ the mutator

    def apply(self, record: TbRecord, position: Position) -> None:
        """Apply the entry ``record`` stored at ``position`` (in position order).

        * transactional data starts an ongoing transaction unless it is ongoing or
          aborted already (later entries of a transaction change nothing);
        * a commit marker ends it; an abort marker ends it and adds it to the aborted
          set (first abort wins: a repeated marker adds nothing);
        * plain entries and other markers change nothing.
        """
        kind, txn = record
        if kind is RecordKind.TXN_DATA:
            assert txn is not None
            if txn not in self.ongoing and txn not in self.aborted:
                self.ongoing[txn] = position
        elif kind is RecordKind.COMMIT:
            assert txn is not None
            self.ongoing.pop(txn, None)
            self.ended.add(txn, TxnAction.COMMIT)
        elif kind is RecordKind.ABORT:
            assert txn is not None
            first = self.ongoing.pop(txn, position)
            if txn not in self.aborted:
                self.aborted[txn] = AbortedTxn(first, position)
            self.ended.add(txn, TxnAction.ABORT)

    # ------------------------------------------------------------------ queries

    def first_ongoing_position(self) -> Position | None:
        """First entry of the oldest ongoing transaction (dicts keep insertion order)."""
        for position in self.ongoing.values():
            return position
        return None

    def ended_action(self, txn: TxnID) -> TxnAction | None:
        """How ``txn`` ended here, if this buffer still knows."""
        action = self.ended.get(txn)
        if action is None and txn in self.aborted:
            return TxnAction.ABORT
        return action

    def low_watermark(self, tc_id: int) -> int:
        return self.low_watermarks.get(tc_id, -1)

    def is_fenced(self, txn: TxnID) -> bool:
        """True if its coordinator's low watermark says ``txn`` has ended."""
        return txn.least_bits <= self.low_watermark(txn.most_bits)

    def is_aborted(self, txn: TxnID, position: Position | None = None) -> bool:
        """True if the entry of ``txn`` at ``position`` belongs to an aborted run.

        Without a position, true if ``txn`` is in the aborted set at all.
        """
        aborted = self.aborted.get(txn)
        if aborted is None:
            return False
        return position is None or position >= aborted.first

    def orphans(self) -> list[TxnID]:
        """Ongoing transactions that their coordinator's low watermark says ended."""
        return [t for t in self.ongoing if self.is_fenced(t)]

    # ------------------------------------------------------------------ other inputs

    def merge_low_watermark(self, tc_id: int, low_watermark: int) -> bool:
        """Raise the low watermark of ``tc_id``; True if it moved."""
        if low_watermark <= self.low_watermark(tc_id):
            return False
        self.low_watermarks[tc_id] = low_watermark
        self.ended.prune(tc_id, low_watermark)
        return True

    def trim_aborted(self, ledger_exists: Callable[[int], bool]) -> int:
        """Forget aborted ids from the front while their marker's ledger is gone.

        Markers are in position order and retention deletes ledgers from the front,
        so the ids to forget are a prefix. Returns how many were forgotten.
        """
        dropped = 0
        while self.aborted:
            txn, aborted = next(iter(self.aborted.items()))
            if ledger_exists(aborted.marker.ledger_id):
                break
            del self.aborted[txn]
            dropped += 1
        return dropped

    def install(
        self,
        aborted: Iterable[tuple[TxnID, AbortedTxn]],
        low_watermarks: Iterable[tuple[int, int]],
    ) -> None:
        """Load a snapshot into an empty state (recovery, before the replay)."""
        assert not self.ongoing and not self.aborted, "install into an empty state"
        for txn, entry in aborted:
            self.aborted.setdefault(txn, entry)
        for tc_id, lwm in low_watermarks:
            self.merge_low_watermark(tc_id, lwm)
