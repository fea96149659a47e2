"""Lifecycle of a pending-ack handle, as a transition table (Pulsar's
``PendingAckHandleState``: None, Initializing, Ready, Error, Close)::

              recover                 replay done
    NONE ───────────────▶ INITIALIZING ───────────▶ READY
      │                        │                      │
      │                        │ replay failed        │ log append failed,
      │                        ▼                      │ cursor fenced
      │                      ERROR ◀──────────────────┘
      │                        │
      └────── close ───────────┴──── close ─────▶ CLOSED   (close from any state)

What a request does in each state is the second table, ``ADMISSION``: Ready serves;
None and Initializing queue the request until replay ends (Pulsar's ``acceptQueue``;
quasar bounds it); Error and Closed refuse with ``ServiceNotReady``, which is
retryable: the broker drops an errored handle and loads a fresh one, whose replay
decides what the log really holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType


class PendingAckHandleState(Enum):
    """States; the values are Pulsar's names, shown in stats."""

    NONE = "None"
    INITIALIZING = "Initializing"
    READY = "Ready"
    ERROR = "Error"
    CLOSED = "Close"


class HandleEvent(Enum):
    """What moves a handle between states."""

    RECOVER = "recover"  # recover() starts replaying the log
    REPLAY_DONE = "replay_done"
    REPLAY_FAILED = "replay_failed"
    FENCED = "fenced"  # a log append or a cursor write failed: state unknown
    CLOSE = "close"


class Admission(Enum):
    """What a request (ack, commit, abort) does in a state."""

    SERVE = "serve"
    WAIT = "wait"  # queued until the handle leaves Initializing
    REJECT = "reject"  # ServiceNotReady


_S = PendingAckHandleState
_E = HandleEvent

#: (state, event) -> next state. A pair that is absent is a bug in the caller.
TRANSITIONS: Mapping[tuple[PendingAckHandleState, HandleEvent], PendingAckHandleState] = (
    MappingProxyType(
        {
            (_S.NONE, _E.RECOVER): _S.INITIALIZING,
            (_S.NONE, _E.CLOSE): _S.CLOSED,
            (_S.INITIALIZING, _E.REPLAY_DONE): _S.READY,
            (_S.INITIALIZING, _E.REPLAY_FAILED): _S.ERROR,
            (_S.INITIALIZING, _E.FENCED): _S.ERROR,
            (_S.INITIALIZING, _E.CLOSE): _S.CLOSED,
            (_S.READY, _E.FENCED): _S.ERROR,
            (_S.READY, _E.CLOSE): _S.CLOSED,
            # A second failure report while already failed changes nothing.
            (_S.ERROR, _E.FENCED): _S.ERROR,
            (_S.ERROR, _E.CLOSE): _S.CLOSED,
            (_S.CLOSED, _E.CLOSE): _S.CLOSED,
            # Work still in flight when the handle closed may report a failure late.
            (_S.CLOSED, _E.FENCED): _S.CLOSED,
        }
    )
)

#: state -> what requests do.
ADMISSION: Mapping[PendingAckHandleState, Admission] = MappingProxyType(
    {
        _S.NONE: Admission.WAIT,
        _S.INITIALIZING: Admission.WAIT,
        _S.READY: Admission.SERVE,
        _S.ERROR: Admission.REJECT,
        _S.CLOSED: Admission.REJECT,
    }
)


class IllegalHandleTransition(AssertionError):
    """An event that the state table does not allow: a bug in the handle."""


def next_state(current: PendingAckHandleState, event: HandleEvent) -> PendingAckHandleState:
    """Look up ``TRANSITIONS``.

    Raises:
        IllegalHandleTransition: the pair is not in the table (e.g. ``recover()``
            called twice, or replay reported done on a Ready handle).
    """
    try:
        return TRANSITIONS[(current, event)]
    except KeyError:
        raise IllegalHandleTransition(
            f"pending-ack handle cannot take {event.value} in state {current.value}"
        ) from None
