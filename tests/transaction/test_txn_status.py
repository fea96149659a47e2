"""The status tables, checked exhaustively: every (state, state) and (state, action)."""

from __future__ import annotations

import itertools

import pytest

from quasar.errors import InvalidTxnStatus, ServerError
from quasar.protocol import pb, txnlog_pb
from quasar.protocol.txn_id import TxnID
from quasar.transaction.txn_status import (
    END_TABLE,
    TRANSITIONS,
    EndStep,
    TxnAction,
    TxnStatus,
    can_transition,
    check_can_register,
    check_transition,
    end_step,
    ended_status,
    ending_status,
)

S = TxnStatus
TXN = TxnID(3, 42)

# The allowed moves, written out independently of the module's table.
ALLOWED = {
    (S.OPEN, S.OPEN), (S.OPEN, S.COMMITTING), (S.OPEN, S.ABORTING),
    (S.COMMITTING, S.COMMITTING), (S.COMMITTING, S.COMMITTED),
    (S.COMMITTED, S.COMMITTED),
    (S.ABORTING, S.ABORTING), (S.ABORTING, S.ABORTED),
    (S.ABORTED, S.ABORTED),
}


def test_numbers_match_the_wire_enums() -> None:
    for status in TxnStatus:
        assert txnlog_pb.TxnStatus.Value(status.name) == status.value
    for action in TxnAction:
        assert pb.TxnAction.Value(action.name) == action.value


@pytest.mark.parametrize("current,new", list(itertools.product(TxnStatus, TxnStatus)))
def test_transition_table(current: TxnStatus, new: TxnStatus) -> None:
    assert can_transition(current, new) == ((current, new) in ALLOWED)
    assert (new in TRANSITIONS[current]) == ((current, new) in ALLOWED)


@pytest.mark.parametrize(
    "current,expected,new", list(itertools.product(TxnStatus, TxnStatus, TxnStatus))
)
def test_check_transition_every_triple(
    current: TxnStatus, expected: TxnStatus, new: TxnStatus
) -> None:
    ok = current == expected and (current, new) in ALLOWED
    if ok:
        check_transition(current, expected, new, TXN)
        return
    with pytest.raises(InvalidTxnStatus) as info:
        check_transition(current, expected, new, TXN)
    assert info.value.code is ServerError.InvalidTxnStatus
    assert not info.value.retryable
    if current != expected:
        assert str(info.value) == (
            f"Expect Txn `(3,42)` to be in {expected.name} status "
            f"but it is in {current.name} status"
        )
    else:
        assert str(info.value) == (
            f"Transaction `(3,42)` CANNOT transaction from status {current.name} to {new.name}"
        )


def test_no_skipping_the_ing_step() -> None:
    for terminal in (S.COMMITTED, S.ABORTED):
        with pytest.raises(InvalidTxnStatus):
            check_transition(S.OPEN, S.OPEN, terminal)


def test_terminal_statuses_never_change() -> None:
    for terminal in (S.COMMITTED, S.ABORTED):
        assert TRANSITIONS[terminal] == frozenset({terminal})
        assert terminal.is_terminal and not terminal.is_ending


@pytest.mark.parametrize("status", list(TxnStatus))
def test_registering_only_while_open(status: TxnStatus) -> None:
    if status is S.OPEN:
        check_can_register(status, TXN)
    else:
        with pytest.raises(InvalidTxnStatus, match=f"to be in OPEN status but it is in {status.name}"):
            check_can_register(status, TXN)


EXPECTED_END = {
    (S.OPEN, TxnAction.COMMIT): EndStep.START,
    (S.OPEN, TxnAction.ABORT): EndStep.START,
    (S.COMMITTING, TxnAction.COMMIT): EndStep.RESUME,
    (S.ABORTING, TxnAction.ABORT): EndStep.RESUME,
}


def test_end_table_is_complete() -> None:
    assert set(END_TABLE) == set(itertools.product(TxnStatus, TxnAction))


@pytest.mark.parametrize("status,action", list(itertools.product(TxnStatus, TxnAction)))
def test_end_step_every_pair(status: TxnStatus, action: TxnAction) -> None:
    expected = EXPECTED_END.get((status, action), EndStep.REJECT)
    assert END_TABLE[(status, action)] is expected
    if expected is EndStep.REJECT:
        with pytest.raises(InvalidTxnStatus) as info:
            end_step(status, action, TXN)
        assert str(info.value) == (
            f"Expect Txn `(3,42)` to be in {ending_status(action).name} status "
            f"but it is in {status.name} status"
        )
    else:
        assert end_step(status, action, TXN) is expected


def test_action_statuses() -> None:
    assert ending_status(TxnAction.COMMIT) is S.COMMITTING
    assert ending_status(TxnAction.ABORT) is S.ABORTING
    assert ended_status(TxnAction.COMMIT) is S.COMMITTED
    assert ended_status(TxnAction.ABORT) is S.ABORTED
    for action in TxnAction:
        assert can_transition(S.OPEN, ending_status(action))
        assert can_transition(ending_status(action), ended_status(action))


def test_txn_id_text_is_pulsars() -> None:
    assert str(TxnID(1, 7)) == "(1,7)"
    assert TxnID(1, 7).tc_id == 1
