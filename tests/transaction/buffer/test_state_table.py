"""The buffer's state tables: complete, and every pair behaves as listed."""

from __future__ import annotations

import itertools

import pytest

from quasar.transaction.buffer.state import (
    ACTIONS,
    TRANSITIONS,
    TbAction,
    TbOp,
    TbState,
    action_for,
    can_transition,
    check_transition,
)

S = TbState
LEGAL = {
    (S.NONE, S.INITIALIZING), (S.NONE, S.CLOSED),
    (S.INITIALIZING, S.READY), (S.INITIALIZING, S.NO_SNAPSHOT), (S.INITIALIZING, S.CLOSED),
    (S.NO_SNAPSHOT, S.READY), (S.NO_SNAPSHOT, S.CLOSED),
    (S.READY, S.CLOSED),
}


def test_tables_are_complete() -> None:
    assert set(TRANSITIONS) == set(TbState)
    assert set(ACTIONS) == set(itertools.product(TbState, TbOp))


@pytest.mark.parametrize("current,new", list(itertools.product(TbState, TbState)))
def test_every_transition(current: TbState, new: TbState) -> None:
    legal = (current, new) in LEGAL
    assert can_transition(current, new) is legal
    if legal:
        check_transition(current, new)
    else:
        with pytest.raises(AssertionError):
            check_transition(current, new)


EXPECTED = {
    S.NONE: (TbAction.REJECT_NOT_READY, TbAction.HOLD, TbAction.WAIT, TbAction.EARLIEST, TbAction.NOOP),
    S.INITIALIZING: (TbAction.REJECT_NOT_READY, TbAction.HOLD, TbAction.WAIT, TbAction.EARLIEST, TbAction.NOOP),
    S.NO_SNAPSHOT: (TbAction.FIRST_SNAPSHOT, TbAction.PROCEED, TbAction.NOOP, TbAction.PROCEED, TbAction.NOOP),
    S.READY: (TbAction.PROCEED, TbAction.PROCEED, TbAction.PROCEED, TbAction.PROCEED, TbAction.PROCEED),
    S.CLOSED: (TbAction.REJECT_CLOSED, TbAction.REJECT_CLOSED, TbAction.REJECT_CLOSED, TbAction.PROCEED, TbAction.NOOP),
}
OPS = (TbOp.APPEND_TXN, TbOp.APPEND_PLAIN, TbOp.END_TXN, TbOp.MAX_READ, TbOp.SNAPSHOT)


@pytest.mark.parametrize("state,op", list(itertools.product(TbState, TbOp)))
def test_every_action(state: TbState, op: TbOp) -> None:
    assert action_for(state, op) is EXPECTED[state][OPS.index(op)]
