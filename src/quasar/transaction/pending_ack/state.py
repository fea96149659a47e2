"""``PendingAckState``: the acks transactions hold on one subscription, changed only by
``apply(record)``.

Live requests check, append a record, and once it is durable apply it here, in log
order; recovery replays the log through the same ``apply``. ``apply`` re-runs the
conflict checks, so a record that lost a race (two transactions acking one message,
both checked before either was applied) is refused identically live and in replay.
A refused record stays in the log and changes nothing.

Structures (Pulsar's ``individualAckOfTransaction``, ``individualAckPositions`` and
``cumulativeAckOfTransaction``):

* ``_txns``: transaction -> its individual acks (position -> acked mask, see
  ``masks``) and its pending cumulative position. Ordered by each transaction's first
  applied record, so the first item holds the oldest log record still needed.
* ``_positions``: position -> every transaction's mask on it, for conflict checks and
  for the dispatcher (``is_pending``).
* ``_cumulative``: the single ``(transaction, position)`` holding a pending cumulative
  ack, or ``None``.

Conflict rules (``TransactionConflict``), per position of an individual ack:

1. the entry is already acknowledged on the cursor (at/below mark-delete or
   individually deleted) -> "already acked before";
2. a batch-index ack takes a member the cursor has acknowledged -> "already acked";
3. another transaction holds an overlapping member (whole entries overlap everything)
   -> "in pending ack status";
4. quasar adds: another transaction holds a pending cumulative ack at or past the
   entry -> "in pending ack status". Pulsar does not check this; without it two
   committed transactions could both acknowledge one message (INV-EO).

The same transaction acking again is merged, not refused (Pulsar refuses a repeated
non-batch ack even from the same transaction, which turns a client's retried ack into
a spurious conflict).

Cumulative ack of position ``c`` by ``T``: ``c`` at/below mark-delete -> conflict;
another transaction holds the cumulative slot -> conflict; ``T`` holds it at a higher
position -> conflict (an equal one is a retry and succeeds); quasar adds: another
transaction holds an individual ack at/below ``c`` -> conflict (rule 4, mirrored). A
held cumulative position the cursor's mark-delete has since passed holds nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from quasar.errors import BrokerError, TransactionConflict
from quasar.protocol.ack_set import bits_to_words
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import Position

from . import masks
from .masks import WHOLE
from .records import AckedPosition, AckType, PendingAckOp, PendingAckRecord


class CursorView(Protocol):
    """What the state reads from the subscription cursor (``ManagedCursor`` fits)."""

    @property
    def mark_delete_position(self) -> Position: ...

    def is_acknowledged(self, position: Position) -> bool: ...

    def batch_ack_set(self, position: Position) -> list[int] | None: ...


@dataclass
class TxnAcks:
    """One transaction's pending acks on this subscription."""

    first_log: Position
    # position -> (acked mask, batch size used to clip it; None for whole entries)
    individual: dict[Position, tuple[int, int | None]] = field(default_factory=dict)
    cumulative: Position | None = None


@dataclass
class PositionAcks:
    """Every transaction's pending ack on one entry."""

    batch_size: int | None
    owners: dict[TxnID, int] = field(default_factory=dict)

    def union(self) -> int:
        out = 0
        for mask in self.owners.values():
            out |= mask
        return out


@dataclass(frozen=True)
class CursorUpdate:
    """What a commit does to the subscription cursor."""

    deletes: tuple[Position, ...] = ()
    batch_ack_sets: tuple[tuple[Position, tuple[int, ...]], ...] = ()
    mark_delete: Position | None = None


@dataclass(frozen=True)
class ApplyResult:
    """What one applied record changed.

    ``known``: for COMMIT/ABORT, whether the transaction held acks here.
    ``cursor_update``: COMMIT only. ``released``/``released_cumulative``: ABORT only,
    the entries that become deliverable again; ``released_members``: of those, the
    ones held by batch index, with the members held (wire words, bit set = held).
    """

    record: PendingAckRecord
    known: bool = True
    cursor_update: CursorUpdate | None = None
    released: tuple[Position, ...] = ()
    released_cumulative: Position | None = None
    released_members: tuple[tuple[Position, tuple[int, ...]], ...] = ()


Normalized = dict[Position, tuple[int, int | None]]


def normalize(acks: Sequence[AckedPosition]) -> Normalized:
    """Positions -> (acked mask, clip size); duplicates merged, no-op acks dropped."""
    out: Normalized = {}
    for a in acks:
        mask = masks.acked_mask(a.ack_set, a.batch_size)
        if mask == 0:
            continue  # an ack set with every member still set acknowledges nothing
        n = masks.effective_batch_size(a.ack_set, a.batch_size) if a.ack_set else a.batch_size
        old = out.get(a.position)
        if old is not None:
            mask |= old[0]
            n = max(n or 0, old[1] or 0) or None
        # An ack set naming every member stays a mask (not WHOLE): members the cursor
        # acked already must still conflict, as for any batch-index ack.
        out[a.position] = (mask, n)
    return out


class PendingAckState:
    """Pending acks of one subscription; see the module docstring."""

    def __init__(self, describe: str) -> None:
        self._describe = describe  # "[topic][subscription]" for error messages
        self._txns: dict[TxnID, TxnAcks] = {}
        self._positions: dict[Position, PositionAcks] = {}
        self._cumulative: tuple[TxnID, Position] | None = None

    # ------------------------------------------------------------------ queries

    def __contains__(self, txn_id: object) -> bool:
        return txn_id in self._txns

    @property
    def txn_count(self) -> int:
        return len(self._txns)

    @property
    def position_count(self) -> int:
        return len(self._positions)

    def txns(self) -> Iterator[tuple[TxnID, TxnAcks]]:
        """Transactions with pending acks, oldest first record first (a copy)."""
        return iter(list(self._txns.items()))

    def get(self, txn_id: TxnID) -> TxnAcks | None:
        return self._txns.get(txn_id)

    def first_log(self) -> Position | None:
        """The oldest log record a pending transaction still needs."""
        return next(iter(self._txns.values())).first_log if self._txns else None

    @property
    def cumulative(self) -> tuple[TxnID, Position] | None:
        return self._cumulative

    def position(self, position: Position) -> PositionAcks | None:
        return self._positions.get(position)

    def positions(self) -> list[Position]:
        return sorted(self._positions)

    def new_positions(self, acks: Normalized) -> int:
        """How many of ``acks`` are not pending yet (for the memory bound)."""
        return sum(1 for p in acks if p not in self._positions)

    # ------------------------------------------------------------------ checks

    def check_individual(self, txn_id: TxnID, acks: Normalized, cursor: CursorView) -> None:
        """Check an individual ack against the rules of the module docstring.

        Raises:
            TransactionConflict: a rule is broken (the message names the first one).
        """
        cumulative = self._cumulative
        for pos, (mask, n) in acks.items():
            if cursor.is_acknowledged(pos):
                raise self._conflict(txn_id, pos, "already acked before")
            if mask != WHOLE and n is not None:
                cursor_set = cursor.batch_ack_set(pos)
                overlap = mask & masks.cursor_acked_mask(cursor_set, n)
                if overlap:
                    raise self._conflict(
                        txn_id, pos, "already acked before",
                        batch_index=masks.first_index(overlap),
                    )
            held = self._positions.get(pos)
            if held is not None:
                for other, other_mask in held.owners.items():
                    overlap = other_mask & mask
                    if other != txn_id and overlap:
                        raise self._conflict(
                            txn_id, pos, "in pending ack status",
                            batch_index=None if overlap == WHOLE else masks.first_index(overlap),
                        )
            if cumulative is not None and cumulative[0] != txn_id and pos <= cumulative[1]:
                raise self._conflict(txn_id, pos, "in pending ack status")

    def check_cumulative(self, txn_id: TxnID, position: Position, cursor: CursorView) -> None:
        """Check a cumulative ack against the rules of the module docstring.

        Raises:
            TransactionConflict: a rule is broken.
        """
        md = cursor.mark_delete_position
        prefix = f"{self._describe} Transaction:{txn_id} try to cumulative ack message:{position}"
        if position <= md:
            raise TransactionConflict(
                f"{prefix} within range of cursor's markDeletePosition:{md}."
            )
        held = self._cumulative
        if held is not None and held[1] <= md:
            # Moot: the cursor passed it (normal acks). Replay refuses such a record,
            # so the live state must not let it block anyone either (INV-REC).
            held = None
        if held is not None and held[0] != txn_id:
            raise TransactionConflict(
                f"{prefix} while Transaction:{held[0]} holds a pending cumulative ack "
                f"at {held[1]}."
            )
        if held is not None and position < held[1]:
            raise TransactionConflict(
                f"{prefix} lower than its pending cumulative ack position:{held[1]}."
            )
        for pos, acks in self._positions.items():
            if pos <= position and any(other != txn_id for other in acks.owners):
                raise TransactionConflict(f"{prefix} covering message:{pos} in pending ack status.")

    def _conflict(
        self, txn_id: TxnID, pos: Position, what: str, batch_index: int | None = None
    ) -> BrokerError:
        member = f" batchIndex:{batch_index}" if batch_index is not None else ""
        return TransactionConflict(
            f"{self._describe} Transaction:{txn_id} try to ack message:{pos}{member} {what}."
        )

    # ------------------------------------------------------------------ the mutator

    def apply(
        self,
        record: PendingAckRecord,
        log_position: Position,
        cursor: CursorView,
        update: CursorUpdate | None = None,
    ) -> ApplyResult:
        """Apply one durable record (see the module docstring).

        COMMIT computes the cursor update against the cursor as it is now; the caller
        performs it on the cursor before anything else runs. ``update``: a COMMIT's
        update computed earlier (``preview_commit``) and already made; it is the
        result instead.

        Raises:
            TransactionConflict: an ACK breaks a rule; nothing changed.
        """
        txn_id = record.txn_id
        if record.op is PendingAckOp.ACK:
            if record.ack_type is AckType.CUMULATIVE:
                position = record.positions[0].position
                self.check_cumulative(txn_id, position, cursor)
                self._txn(txn_id, log_position).cumulative = position
                self._cumulative = (txn_id, position)
            else:
                acks = normalize(record.positions)
                self.check_individual(txn_id, acks, cursor)
                if acks:
                    self._add_individual(self._txn(txn_id, log_position), txn_id, acks)
            return ApplyResult(record)
        txn = self._remove(txn_id)
        if txn is None:
            return ApplyResult(record, known=False)
        if record.op is PendingAckOp.COMMIT:
            if update is None:
                update = self._commit_update(txn, cursor)
            return ApplyResult(record, cursor_update=update)
        held = sorted(txn.individual.items())
        return ApplyResult(
            record,
            released=tuple(pos for pos, _ in held),
            released_cumulative=txn.cumulative,
            released_members=tuple(
                (pos, tuple(bits_to_words(mask & masks.full(n))))
                for pos, (mask, n) in held
                if mask != WHOLE and n is not None
            ),
        )

    def preview_commit(self, txn_id: TxnID, cursor: CursorView) -> CursorUpdate | None:
        """The cursor update a COMMIT of ``txn_id`` would make now, changing nothing
        (``None``: nothing is pending for it)."""
        txn = self._txns.get(txn_id)
        return None if txn is None else self._commit_update(txn, cursor)

    def _txn(self, txn_id: TxnID, log_position: Position) -> TxnAcks:
        txn = self._txns.get(txn_id)
        if txn is None:
            txn = self._txns[txn_id] = TxnAcks(log_position)
        return txn

    def _add_individual(self, txn: TxnAcks, txn_id: TxnID, acks: Normalized) -> None:
        for pos, (mask, n) in acks.items():
            old = txn.individual.get(pos)
            if old is not None:
                mask |= old[0]
                n = max(n or 0, old[1] or 0) or None
            txn.individual[pos] = (mask, n)
            held = self._positions.get(pos)
            if held is None:
                held = self._positions[pos] = PositionAcks(n)
            elif n is not None and (held.batch_size is None or n > held.batch_size):
                held.batch_size = n
            held.owners[txn_id] = mask

    def _remove(self, txn_id: TxnID) -> TxnAcks | None:
        txn = self._txns.pop(txn_id, None)
        if txn is None:
            return None
        for pos in txn.individual:
            held = self._positions.get(pos)
            if held is None:
                continue
            held.owners.pop(txn_id, None)
            if not held.owners:
                del self._positions[pos]
        if self._cumulative is not None and self._cumulative[0] == txn_id:
            self._cumulative = None
        return txn

    @staticmethod
    def _commit_update(txn: TxnAcks, cursor: CursorView) -> CursorUpdate:
        deletes: list[Position] = []
        batch_sets: list[tuple[Position, tuple[int, ...]]] = []
        for pos, (mask, n) in sorted(txn.individual.items()):
            if cursor.is_acknowledged(pos):
                continue  # acked meanwhile (a normal cumulative ack, or a replay)
            if mask == WHOLE or n is None:
                deletes.append(pos)
                continue
            already = masks.cursor_acked_mask(cursor.batch_ack_set(pos), n)
            remaining = masks.full(n) & ~(mask | already)
            if remaining == 0:
                deletes.append(pos)
            else:
                batch_sets.append((pos, tuple(bits_to_words(remaining))))
        return CursorUpdate(tuple(deletes), tuple(batch_sets), txn.cumulative)
