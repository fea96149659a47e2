"""Lifecycle states of a transaction buffer and what each operation does in each one.

Theory of operation
-------------------
::

              recover()            snapshot found, replay done
    NONE ───────────────▶ INITIALIZING ─────────────────────────▶ READY
      │                        │                                    ▲
      │                        │ no snapshot: no transactional      │ first snapshot
      │                        └──────── data can exist ──▶ NO_SNAPSHOT
      │                                                             │
      └──────────── close() or recovery failure ─▶ CLOSED ◀─────────┘ (from any state)

* ``NO_SNAPSHOT`` (Pulsar's ``NoSnapshot``): recovery found no snapshot. Because a
  snapshot is always written *before* the first transactional entry of a topic, "no
  snapshot" proves the topic holds no transactional data, so recovery did not replay
  anything. The first transactional producer (or append) writes that snapshot and
  moves the buffer to READY.
* While NONE/INITIALIZING the buffer reports ``EARLIEST`` as its max read position,
  so dispatchers read nothing until recovery has rebuilt the aborted set.

``TRANSITIONS`` lists the legal moves; ``check_transition`` is the one function that
enforces them. ``ACTIONS`` says, for every (state, operation) pair, what the buffer
does; the tests walk both tables exhaustively.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType


class TbState(Enum):
    """``TopicTransactionBufferState.State`` (names as Pulsar's stats report them)."""

    NONE = "None"
    INITIALIZING = "Initializing"
    READY = "Ready"
    NO_SNAPSHOT = "NoSnapshot"
    CLOSED = "Close"


class TbOp(Enum):
    """Operations whose behaviour depends on the state."""

    APPEND_TXN = "append_transactional"
    APPEND_PLAIN = "append_non_transactional"
    END_TXN = "end_txn"
    MAX_READ = "max_read_position"
    SNAPSHOT = "snapshot"


class TbAction(Enum):
    """What an operation does in a given state."""

    PROCEED = "proceed"  # the normal path
    WAIT = "wait"  # wait for recovery to finish, then look again
    FIRST_SNAPSHOT = "first_snapshot"  # write the first snapshot, then proceed as READY
    HOLD = "hold"  # append, but the max read position does not move
    NOOP = "noop"  # succeed without doing anything
    EARLIEST = "earliest"  # (MAX_READ) report a position before every entry
    REJECT_NOT_READY = "reject_not_ready"  # ServiceNotReady (retryable)
    REJECT_CLOSED = "reject_closed"  # ServiceNotReady: the buffer is closed


_S = TbState

TRANSITIONS: Mapping[TbState, frozenset[TbState]] = MappingProxyType(
    {
        _S.NONE: frozenset({_S.INITIALIZING, _S.CLOSED}),
        _S.INITIALIZING: frozenset({_S.READY, _S.NO_SNAPSHOT, _S.CLOSED}),
        _S.NO_SNAPSHOT: frozenset({_S.READY, _S.CLOSED}),
        _S.READY: frozenset({_S.CLOSED}),
        _S.CLOSED: frozenset(),
    }
)

_A = TbAction
_O = TbOp

#: (state, op) -> action. Complete over both enums (the tests check that).
ACTIONS: Mapping[tuple[TbState, TbOp], TbAction] = MappingProxyType(
    {
        # Transactional publishes need the aborted set and the ongoing map; Pulsar
        # makes transactional producers wait for recovery at connect time, so an
        # append that still arrives early is refused (retryable) rather than reordered.
        (_S.NONE, _O.APPEND_TXN): _A.REJECT_NOT_READY,
        (_S.INITIALIZING, _O.APPEND_TXN): _A.REJECT_NOT_READY,
        (_S.NO_SNAPSHOT, _O.APPEND_TXN): _A.FIRST_SNAPSHOT,
        (_S.READY, _O.APPEND_TXN): _A.PROCEED,
        (_S.CLOSED, _O.APPEND_TXN): _A.REJECT_CLOSED,
        # Plain publishes are accepted while recovering but stay invisible until
        # recovery ends (then they become visible without another publish, #12382).
        (_S.NONE, _O.APPEND_PLAIN): _A.HOLD,
        (_S.INITIALIZING, _O.APPEND_PLAIN): _A.HOLD,
        (_S.NO_SNAPSHOT, _O.APPEND_PLAIN): _A.PROCEED,
        (_S.READY, _O.APPEND_PLAIN): _A.PROCEED,
        (_S.CLOSED, _O.APPEND_PLAIN): _A.REJECT_CLOSED,
        # Ends wait for recovery (Pulsar's transactionBufferFuture). With no snapshot
        # no transactional data exists here, so there is nothing to mark.
        (_S.NONE, _O.END_TXN): _A.WAIT,
        (_S.INITIALIZING, _O.END_TXN): _A.WAIT,
        (_S.NO_SNAPSHOT, _O.END_TXN): _A.NOOP,
        (_S.READY, _O.END_TXN): _A.PROCEED,
        (_S.CLOSED, _O.END_TXN): _A.REJECT_CLOSED,
        (_S.NONE, _O.MAX_READ): _A.EARLIEST,
        (_S.INITIALIZING, _O.MAX_READ): _A.EARLIEST,
        (_S.NO_SNAPSHOT, _O.MAX_READ): _A.PROCEED,
        (_S.READY, _O.MAX_READ): _A.PROCEED,
        # A closed buffer keeps reporting its last value; its topic is closing.
        (_S.CLOSED, _O.MAX_READ): _A.PROCEED,
        # Periodic and count-triggered snapshots run only in READY; the first snapshot
        # of a NO_SNAPSHOT buffer goes through FIRST_SNAPSHOT instead.
        (_S.NONE, _O.SNAPSHOT): _A.NOOP,
        (_S.INITIALIZING, _O.SNAPSHOT): _A.NOOP,
        (_S.NO_SNAPSHOT, _O.SNAPSHOT): _A.NOOP,
        (_S.READY, _O.SNAPSHOT): _A.PROCEED,
        (_S.CLOSED, _O.SNAPSHOT): _A.NOOP,
    }
)


def can_transition(current: TbState, new: TbState) -> bool:
    """True if ``TRANSITIONS`` allows ``current`` → ``new``."""
    return new in TRANSITIONS[current]


def check_transition(current: TbState, new: TbState) -> None:
    """Check a state change.

    Raises:
        AssertionError: the move is not in ``TRANSITIONS`` (a bug in the caller, not
            a condition a request can cause).
    """
    if not can_transition(current, new):
        raise AssertionError(
            f"transaction buffer cannot move from {current.name} to {new.name}"
        )


# ACTIONS keyed by the members' string values: an Enum member's hash runs as Python
# code, and this lookup is on every publish (measured ~8% of the broker's unbatched
# publish path when keyed by member pairs).
_ACTIONS_BY_VALUE: Mapping[tuple[str, str], TbAction] = MappingProxyType(
    {(state.value, op.value): action for (state, op), action in ACTIONS.items()}
)


def action_for(state: TbState, op: TbOp) -> TbAction:
    """Look up ``ACTIONS``."""
    return _ACTIONS_BY_VALUE[(state._value_, op._value_)]
