"""Coordinator-side transaction statuses and the tables that say what may happen next.

Theory of operation
-------------------
A transaction lives on its coordinator as a small state machine::

            commit                  all ends done
    OPEN ────────────▶ COMMITTING ────────────────▶ COMMITTED
      │
      │ abort / timeout            all ends done
      └──────────────▶ ABORTING ──────────────────▶ ABORTED

* Every status change is a compare-and-set: the log record (``UPDATE``) names the
  status it expects and the one it writes, and ``check_transition`` accepts it only
  if the current status is the expected one *and* the move is in ``TRANSITIONS``.
  Live requests and log replay go through the same check, so a record that lost a
  race (two writers both expecting OPEN) is rejected identically both times.
* There is no timeout status: a timeout is an abort that starts from OPEN.
* You cannot skip the ``-ING`` step: OPEN→COMMITTED is illegal. The ``-ING`` record is
  the durable decision; the terminal record only says the decision reached every
  participant, after which the transaction is forgotten.
* A status may "move" to itself (OPEN→OPEN, COMMITTING→COMMITTING, ...), as in Pulsar,
  which is what lets a repeated end resume instead of failing.
* Partitions and subscriptions may be registered only while OPEN.

The second table, ``END_TABLE``, says what an END_TXN (or a timeout) does in each
status: start the end (write the ``-ING`` record), resume one already decided the same
way, or fail with ``InvalidTxnStatus`` (the opposite decision was already taken).
Ended transactions are removed from the coordinator, so in practice a late END_TXN
gets ``TransactionNotFound`` before this table is consulted (Pulsar's behaviour) —
unless it names the client and the coordinator's preserver still holds the outcome
(PIP-255): then ``check_preserved_end`` answers it. The same action as the outcome
succeeds (a repeated commit of a committed transaction is a success, not an error);
the opposite one fails with ``InvalidTxnStatus`` naming the real outcome.

Numbers match ``TxnStatus`` in ``transaction_log.proto`` and ``TxnAction`` in
``PulsarApi.proto``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum, IntEnum
from types import MappingProxyType

from quasar.errors import InvalidTxnStatus
from quasar.protocol.txn_id import TxnID


class TxnStatus(IntEnum):
    """Status of a transaction on its coordinator (``txnlog_pb.TxnStatus``)."""

    OPEN = 0
    COMMITTING = 1
    COMMITTED = 2
    ABORTING = 3
    ABORTED = 4

    @property
    def is_terminal(self) -> bool:
        return self in (TxnStatus.COMMITTED, TxnStatus.ABORTED)

    @property
    def is_ending(self) -> bool:
        return self in (TxnStatus.COMMITTING, TxnStatus.ABORTING)


class TxnAction(IntEnum):
    """What END_TXN asks for (``pb.TxnAction``)."""

    COMMIT = 0
    ABORT = 1


_S = TxnStatus

#: status -> statuses it may move to (Pulsar's ``TxnStatus.canTransitionTo``).
TRANSITIONS: Mapping[TxnStatus, frozenset[TxnStatus]] = MappingProxyType(
    {
        _S.OPEN: frozenset({_S.OPEN, _S.COMMITTING, _S.ABORTING}),
        _S.COMMITTING: frozenset({_S.COMMITTING, _S.COMMITTED}),
        _S.COMMITTED: frozenset({_S.COMMITTED}),
        _S.ABORTING: frozenset({_S.ABORTING, _S.ABORTED}),
        _S.ABORTED: frozenset({_S.ABORTED}),
    }
)

#: action -> (the status that records the decision, the status that completes it).
_ACTION_STATUSES: Mapping[TxnAction, tuple[TxnStatus, TxnStatus]] = MappingProxyType(
    {
        TxnAction.COMMIT: (_S.COMMITTING, _S.COMMITTED),
        TxnAction.ABORT: (_S.ABORTING, _S.ABORTED),
    }
)


class EndStep(Enum):
    """What an end request does, given the transaction's status."""

    START = "start"  # write the -ING record, then send the ends
    RESUME = "resume"  # already decided this way: (re)send the ends, finish
    REJECT = "reject"  # InvalidTxnStatus


#: (status, action) -> step. Complete over both enums (the tests check that).
END_TABLE: Mapping[tuple[TxnStatus, TxnAction], EndStep] = MappingProxyType(
    {
        (_S.OPEN, TxnAction.COMMIT): EndStep.START,
        (_S.OPEN, TxnAction.ABORT): EndStep.START,
        (_S.COMMITTING, TxnAction.COMMIT): EndStep.RESUME,
        (_S.COMMITTING, TxnAction.ABORT): EndStep.REJECT,
        (_S.ABORTING, TxnAction.ABORT): EndStep.RESUME,
        (_S.ABORTING, TxnAction.COMMIT): EndStep.REJECT,
        # Terminal transactions are removed at once, so these only matter if a caller
        # holds on to an old TxnMeta; Pulsar answers InvalidTxnStatus there too.
        (_S.COMMITTED, TxnAction.COMMIT): EndStep.REJECT,
        (_S.COMMITTED, TxnAction.ABORT): EndStep.REJECT,
        (_S.ABORTED, TxnAction.COMMIT): EndStep.REJECT,
        (_S.ABORTED, TxnAction.ABORT): EndStep.REJECT,
    }
)


def ending_status(action: TxnAction) -> TxnStatus:
    """The ``-ING`` status that records ``action`` (COMMIT → COMMITTING)."""
    return _ACTION_STATUSES[action][0]


def ended_status(action: TxnAction) -> TxnStatus:
    """The terminal status ``action`` leads to (COMMIT → COMMITTED)."""
    return _ACTION_STATUSES[action][1]


def can_transition(current: TxnStatus, new: TxnStatus) -> bool:
    """True if ``TRANSITIONS`` allows ``current`` → ``new``."""
    return new in TRANSITIONS[current]


def _txn(txn_id: TxnID | None) -> str:
    return str(txn_id) if txn_id is not None else "(?,?)"


def expect_status(
    current: TxnStatus, expected: TxnStatus, txn_id: TxnID | None = None
) -> None:
    """Check that a transaction is in ``expected``.

    Raises:
        InvalidTxnStatus: it is not ("Expect Txn `(x,y)` to be in S1 status but it is
            in S2 status", Pulsar's message).
    """
    if current != expected:
        raise InvalidTxnStatus(
            f"Expect Txn `{_txn(txn_id)}` to be in {expected.name} status "
            f"but it is in {current.name} status"
        )


def check_transition(
    current: TxnStatus,
    expected: TxnStatus,
    new: TxnStatus,
    txn_id: TxnID | None = None,
) -> None:
    """Check a compare-and-set status update: ``current`` must be ``expected`` and
    ``expected`` → ``new`` must be in ``TRANSITIONS``.

    Raises:
        InvalidTxnStatus: either check fails; the message has Pulsar's shape.
    """
    expect_status(current, expected, txn_id)
    if not can_transition(current, new):
        raise InvalidTxnStatus(
            f"Transaction `{_txn(txn_id)}` CANNOT transaction from status "
            f"{current.name} to {new.name}"
        )


def check_can_register(current: TxnStatus, txn_id: TxnID | None = None) -> None:
    """Partitions and subscriptions may be added only while OPEN.

    Raises:
        InvalidTxnStatus: the transaction is not OPEN.
    """
    expect_status(current, TxnStatus.OPEN, txn_id)


def end_step(current: TxnStatus, action: TxnAction, txn_id: TxnID | None = None) -> EndStep:
    """Look up ``END_TABLE``: what an end with ``action`` does in ``current``.

    Raises:
        InvalidTxnStatus: the step is REJECT; the message says the transaction was
            expected in the ``-ING`` status of ``action`` (as Pulsar reports it).
    """
    step = END_TABLE[(current, action)]
    if step is EndStep.REJECT:
        expect_status(current, ending_status(action), txn_id)
        # current == ending_status(action) would have been RESUME; be loud if the
        # table and this function ever disagree.
        raise AssertionError(f"END_TABLE rejects {current.name} + {action.name}")
    return step


def check_preserved_end(
    outcome: TxnStatus, action: TxnAction, txn_id: TxnID | None = None
) -> None:
    """An END_TXN for a transaction that already ended with ``outcome`` (COMMITTED
    or ABORTED): nothing to do if ``action`` leads there.

    Raises:
        InvalidTxnStatus: ``action`` is the opposite one; the message names the
            outcome ("Expect Txn `(x,y)` to be in COMMITTED status but it is in
            ABORTED status").
    """
    assert outcome.is_terminal, f"{outcome.name} is not an outcome"
    expect_status(outcome, ended_status(action), txn_id)
