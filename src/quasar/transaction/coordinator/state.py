"""``CoordinatorState``: the live transactions of one coordinator, changed only by
``apply(record)``.

Live requests append a record to the log and, once it is durable, apply it here, in
log order; recovery replays the log through the same ``apply``. So the state after a
restart is the state before it, by construction (INV-REC), including how races were
decided: a record that lost one (e.g. an ADD_PARTITION written just after the
transaction became COMMITTING) fails ``apply`` in both paths, and both paths then
delete that record.

What ``apply`` does per op (Pulsar's replay rules):

* NEW: create the transaction OPEN (a NEW for a known id only adds its position);
* ADD_PARTITION / ADD_SUBSCRIPTION: add to the sets; the transaction must be OPEN;
* UPDATE: compare-and-set the status (``txn_status.check_transition``); reaching
  COMMITTED/ABORTED removes the transaction and hands back all its record positions
  for deletion;
* every record raises the sequence high-water mark to its ``max_local_txn_id``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, NamedTuple

from quasar.errors import CorruptRecordError, TransactionNotFound
from quasar.protocol.txn_id import TxnID

from ..batched_log import LogPosition
from ..txn_status import TxnStatus, check_can_register, check_transition
from .log import Record
from .meta import TxnMeta


class Op:
    """``TransactionMetadataEntry.TransactionMetadataOp`` values as plain class
    attributes: reading one from the protobuf enum wrapper is a Python call, paid on
    every record written and applied."""

    NEW: Final = Record.NEW
    ADD_PARTITION: Final = Record.ADD_PARTITION
    ADD_SUBSCRIPTION: Final = Record.ADD_SUBSCRIPTION
    UPDATE: Final = Record.UPDATE


class ApplyResult(NamedTuple):
    """What one applied record changed."""

    txn: TxnMeta  # the live object (state-internal; copy before handing out)
    created: bool  # a NEW created the transaction
    ended: bool  # reached COMMITTED/ABORTED and was removed
    garbage: list[LogPosition]  # record positions no longer needed by anyone


class CoordinatorState:
    """Live transactions of coordinator ``tc_id`` and its sequence high-water mark.

    ``max_local_txn_id`` starts from the value recovered from the log cursor (the
    records of ended transactions are gone, their ids are not forgotten) and only
    grows. Transactions iterate in sequence order.
    """

    def __init__(self, tc_id: int, max_local_txn_id: int = -1) -> None:
        self.tc_id = tc_id
        self.max_local_txn_id = max_local_txn_id
        self._txns: dict[int, TxnMeta] = {}
        self._positions: dict[int, list[LogPosition]] = {}
        # New ids only grow, so insertion order is sequence order and the first key is
        # the lowest live id. A replayed NEW below the last one (never written by this
        # code) clears the flag and the slower paths take over.
        self._ascending = True

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        return len(self._txns)

    def __contains__(self, least: object) -> bool:
        return least in self._txns

    def get(self, least: int) -> TxnMeta | None:
        """The live transaction with this sequence (the object itself), if any."""
        return self._txns.get(least)

    def txns(self) -> Iterator[TxnMeta]:
        """Live transactions in sequence order."""
        if self._ascending:
            return iter(list(self._txns.values()))
        return iter([self._txns[k] for k in sorted(self._txns)])

    def positions(self, least: int) -> list[LogPosition]:
        return list(self._positions.get(least, ()))

    def first_live(self) -> int | None:
        """The lowest sequence of a live (not yet ended) transaction."""
        if not self._txns:
            return None
        return next(iter(self._txns)) if self._ascending else min(self._txns)

    def low_watermark(self) -> int:
        """Every transaction of this coordinator with sequence ``<=`` this has ended.

        Pulsar's definition (lowest live sequence − 1) while any transaction is live;
        with none live, every id handed out so far has ended, so it is the high-water
        mark (Pulsar sends 0 there, which says less). ``-1``: nothing has ended.
        """
        first = self.first_live()
        return first - 1 if first is not None else self.max_local_txn_id

    def release_participants(self, least: int) -> None:
        """Forget a decided transaction's partitions and subscriptions once every one
        of them has its end (they are most of its memory, as the PIP notes).

        Not a state change: the records still name them, so a recovery that replays
        them before the terminal record sends the (idempotent) ends again.
        """
        meta = self._txns.get(least)
        if meta is not None:
            assert meta.status.is_ending, f"{meta.txn_id} is {meta.status.name}"
            meta.produced_partitions = set()
            meta.acked_subscriptions = set()

    # ------------------------------------------------------------------ the mutator

    def apply(self, record: Record, position: LogPosition) -> ApplyResult:
        """Apply one durable record.

        Raises:
            TransactionNotFound: an ADD/UPDATE for a transaction that is not live.
            InvalidTxnStatus: the status does not allow the op (lost a race).
            CorruptRecordError: the record cannot have been written by this
                coordinator (another coordinator's id, no op, UPDATE without
                statuses).
        """
        if record.HasField("max_local_txn_id"):
            self.max_local_txn_id = max(self.max_local_txn_id, record.max_local_txn_id)
        if record.txnid_most_bits != self.tc_id:
            raise CorruptRecordError(
                f"coordinator {self.tc_id} log holds a record of transaction "
                f"({record.txnid_most_bits},{record.txnid_least_bits})"
            )
        if not record.HasField("metadata_op"):
            raise CorruptRecordError(f"log record without an op at {position}")
        least = record.txnid_least_bits
        txn_id = TxnID(self.tc_id, least)
        if record.metadata_op == Op.NEW:
            return self._apply_new(record, txn_id, position)
        meta = self._txns.get(least)
        if meta is None:
            raise TransactionNotFound(f"The transaction {txn_id} is not found")
        ended = False
        garbage: list[LogPosition] = []
        if record.metadata_op == Op.ADD_PARTITION:
            check_can_register(meta.status, txn_id)
            meta.produced_partitions.update(record.partitions)
        elif record.metadata_op == Op.ADD_SUBSCRIPTION:
            check_can_register(meta.status, txn_id)
            meta.acked_subscriptions.update(
                (s.topic, s.subscription) for s in record.subscriptions
            )
        elif record.metadata_op == Op.UPDATE:
            if not (record.HasField("expected_status") and record.HasField("new_status")):
                raise CorruptRecordError(f"UPDATE without statuses at {position}")
            new = TxnStatus(record.new_status)
            check_transition(meta.status, TxnStatus(record.expected_status), new, txn_id)
            meta.status = new
            ended = new.is_terminal
        else:  # pragma: no cover - HasField excludes unknown values in proto2
            raise CorruptRecordError(f"unknown log op {record.metadata_op}")
        meta.last_modification_ms = record.last_modification_time
        self._positions[least].append(position)
        if ended:
            del self._txns[least]
            garbage = self._positions.pop(least)
        return ApplyResult(meta, False, ended, garbage)

    def _apply_new(
        self, record: Record, txn_id: TxnID, position: LogPosition
    ) -> ApplyResult:
        least = txn_id.least_bits
        existing = self._txns.get(least)
        if existing is not None:
            # Pulsar keeps the first NEW and only remembers the position.
            self._positions[least].append(position)
            return ApplyResult(existing, False, False, [])
        meta = TxnMeta(
            txn_id=txn_id,
            open_timestamp_ms=record.start_time,
            timeout_ms=record.timeout_ms,
            owner=record.owner if record.HasField("owner") else None,
            last_modification_ms=record.last_modification_time,
            client_name=record.clientName if record.HasField("clientName") else None,
        )
        if self._txns and least < next(reversed(self._txns)):
            self._ascending = False
        self._txns[least] = meta
        self._positions[least] = [position]
        return ApplyResult(meta, True, False, [])
