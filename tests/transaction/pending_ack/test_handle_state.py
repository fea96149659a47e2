"""The lifecycle table: every (state, event) pair, the illegal ones too."""

from __future__ import annotations

import itertools

import pytest

from quasar.transaction.pending_ack import (
    ADMISSION,
    TRANSITIONS,
    Admission,
    HandleEvent,
    IllegalHandleTransition,
    PendingAckHandleState,
    next_state,
)

S = PendingAckHandleState
E = HandleEvent

EXPECTED = {
    (S.NONE, E.RECOVER): S.INITIALIZING,
    (S.NONE, E.CLOSE): S.CLOSED,
    (S.INITIALIZING, E.REPLAY_DONE): S.READY,
    (S.INITIALIZING, E.REPLAY_FAILED): S.ERROR,
    (S.INITIALIZING, E.FENCED): S.ERROR,
    (S.INITIALIZING, E.CLOSE): S.CLOSED,
    (S.READY, E.FENCED): S.ERROR,
    (S.READY, E.CLOSE): S.CLOSED,
    (S.ERROR, E.FENCED): S.ERROR,
    (S.ERROR, E.CLOSE): S.CLOSED,
    (S.CLOSED, E.CLOSE): S.CLOSED,
    (S.CLOSED, E.FENCED): S.CLOSED,
}


@pytest.mark.parametrize(("state", "event"), list(itertools.product(S, E)))
def test_every_pair(state: PendingAckHandleState, event: HandleEvent) -> None:
    if (state, event) in EXPECTED:
        assert next_state(state, event) is EXPECTED[(state, event)]
    else:
        with pytest.raises(IllegalHandleTransition, match=event.value):
            next_state(state, event)


def test_table_is_the_documented_one() -> None:
    assert dict(TRANSITIONS) == EXPECTED


def test_closed_is_terminal_and_ready_only_after_replay() -> None:
    assert {new for (state, _), new in TRANSITIONS.items() if state is S.CLOSED} == {S.CLOSED}
    assert [k for k, v in TRANSITIONS.items() if v is S.READY] == [
        (S.INITIALIZING, E.REPLAY_DONE)
    ]


def test_admission_covers_every_state() -> None:
    assert dict(ADMISSION) == {
        S.NONE: Admission.WAIT,
        S.INITIALIZING: Admission.WAIT,
        S.READY: Admission.SERVE,
        S.ERROR: Admission.REJECT,
        S.CLOSED: Admission.REJECT,
    }


def test_state_names_are_pulsars() -> None:
    assert [s.value for s in S] == ["None", "Initializing", "Ready", "Error", "Close"]
