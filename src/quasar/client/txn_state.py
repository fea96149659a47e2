"""Client-side transaction identity and states, with one table of allowed transitions.

States follow Pulsar's public ``Transaction.State`` (PR #17423)::

    OPEN ──commit()──▶ COMMITTING ──END_TXN ok──▶ COMMITTED
      │                    │  └──a send/ack failed──▶ ABORTING
      │                    └──TransactionNotFound / InvalidTxnStatus──▶ ERROR
      ├──abort()───▶ ABORTING ──END_TXN ok──▶ ABORTED
      │                    └──TransactionNotFound / InvalidTxnStatus──▶ ERROR
      └──timeout_ms elapsed──▶ TIME_OUT   (the coordinator aborts it on its own)

COMMITTED, ABORTED, ERROR and TIME_OUT are final. The coordinator has no TIME_OUT or
ERROR status: they exist only in the client (a timeout is an abort that the coordinator
starts; ERROR means the coordinator rejected the end and the client cannot say more).

A handle from ``client.resume_transaction`` starts OPEN on the same table; it refuses
sends and acks and has no client-side timer, so it only ever leaves OPEN through
``commit()`` or ``abort()``.
"""

from __future__ import annotations

import enum

from quasar.errors import InvalidTxnStatus
from quasar.protocol.txn_id import TxnID


class TransactionState(enum.Enum):
    """Where a transaction is, as this client knows it."""

    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"
    ERROR = "ERROR"
    TIME_OUT = "TIME_OUT"

    @property
    def is_final(self) -> bool:
        return not _TRANSITIONS[self]


S = TransactionState

# state -> states it may move to. Staying put is not a transition (a commit() retried
# after an unknown outcome stays COMMITTING).
_TRANSITIONS: dict[TransactionState, frozenset[TransactionState]] = {
    S.OPEN: frozenset({S.COMMITTING, S.ABORTING, S.TIME_OUT}),
    # ABORTING: commit found a failed operation and aborts instead.
    S.COMMITTING: frozenset({S.COMMITTED, S.ABORTING, S.ERROR}),
    S.ABORTING: frozenset({S.ABORTED, S.ERROR}),
    S.COMMITTED: frozenset(),
    S.ABORTED: frozenset(),
    S.ERROR: frozenset(),
    S.TIME_OUT: frozenset(),
}


def can_transition(current: TransactionState, new: TransactionState) -> bool:
    """Whether ``current → new`` is an edge of the table above."""
    return new in _TRANSITIONS[current]


def check_transition(
    txn_id: TxnID, current: TransactionState, new: TransactionState
) -> None:
    """Raise unless ``current → new`` is allowed.

    Raises:
        InvalidTxnStatus: the transition is not in the table (local misuse, e.g.
            commit after abort).
    """
    if not can_transition(current, new):
        raise InvalidTxnStatus(
            f"transaction {txn_id} is {current.value}, cannot become {new.value}"
        )
