"""Read-only views of the pending-ack state for the dispatcher, the ack path and admin.

Kept apart from ``handle`` so the write path stays readable; nothing here changes
anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from quasar.protocol.ack_set import bits_to_words, words_to_bits
from quasar.storage.api import Position

from . import masks
from .handle_state import PendingAckHandleState
from .log import PendingAckLog
from .results import NormalAck
from .state import CursorView, PendingAckState
from .stats import PendingAckCounters, PositionInPendingAckState


def is_pending(state: PendingAckState, position: Position) -> bool:
    held = state.position(position)
    return held is not None and masks.covers_all(held.union(), held.batch_size)


def pending_ack_set(state: PendingAckState, position: Position) -> list[int] | None:
    held = state.position(position)
    if held is None:
        return None
    union = held.union()
    if masks.covers_all(union, held.batch_size):
        return []
    assert held.batch_size is not None, "a partial mask always has its clip size"
    return masks.unacked_words(union, held.batch_size)


def filter_normal_ack(
    state: PendingAckState, position: Position, ack_set: Sequence[int] | None
) -> NormalAck:
    held = state.position(position)
    if held is None:
        return NormalAck(True, list(ack_set) if ack_set else None)
    union = held.union()
    if masks.covers_all(union, held.batch_size):
        return NormalAck(False, None)
    n = held.batch_size
    assert n is not None, "a partial mask always has its clip size"
    # The client's "still unacked" members, plus every member a transaction holds:
    # those stay unacked on the cursor until the transaction ends.
    unacked = words_to_bits(ack_set) if ack_set else 0
    keep = (unacked | union) & masks.full(n)
    return NormalAck(True, bits_to_words(keep))


def position_state(
    state: PendingAckState, cursor: CursorView, position: Position, batch_index: int | None
) -> PositionInPendingAckState:
    if position.ledger_id < 0 or position.entry_id < 0 or (
        batch_index is not None and batch_index < 0
    ):
        return PositionInPendingAckState.INVALID_POSITION
    if cursor.is_acknowledged(position):
        return PositionInPendingAckState.MARK_DELETE
    held = state.position(position)
    if batch_index is not None:
        cursor_set = cursor.batch_ack_set(position)
        if cursor_set is not None and not (words_to_bits(cursor_set) >> batch_index) & 1:
            return PositionInPendingAckState.MARK_DELETE
        if held is not None and (held.union() >> batch_index) & 1:
            return PositionInPendingAckState.PENDING_ACK
        return PositionInPendingAckState.NOT_IN_PENDING_ACK
    if held is not None:
        return PositionInPendingAckState.PENDING_ACK
    cumulative = state.cumulative
    if cumulative is not None and position <= cumulative[1]:
        return PositionInPendingAckState.PENDING_ACK
    return PositionInPendingAckState.NOT_IN_PENDING_ACK


def handle_stats(
    handle_state: PendingAckHandleState,
    state: PendingAckState,
    counters: PendingAckCounters,
    low_watermarks: dict[int, int],
    waiting_requests: int,
) -> dict[str, object]:
    cumulative = state.cumulative
    return {
        # Pulsar's TransactionPendingAckStats
        "state": handle_state.value,
        "lowWaterMarks": low_watermarks,
        "ongoingTxnSize": state.txn_count,
        # quasar's additions
        "pendingAckPositions": state.position_count,
        "waitingRequests": waiting_requests,
        "cumulativeAck": (
            {"txnId": str(cumulative[0]), "position": str(cumulative[1])}
            if cumulative is not None
            else None
        ),
        "committedCount": counters.committed,
        "abortedCount": counters.aborted,
        "lowWaterMarkAbortedCount": counters.low_watermark_aborted,
        "conflictCount": counters.conflicts,
        "contradictingEndCount": counters.contradicting_ends,
        "commitLatencyMs": counters.latency_view(),
    }


def internal_stats(pending_log: PendingAckLog) -> dict[str, object]:
    ledger = pending_log.ledger
    cursor = pending_log.cursor if pending_log.opened else None
    return {
        "pendingAckLogStats": {
            "name": ledger.name,
            "numberOfEntries": ledger.number_of_entries,
            "totalSize": ledger.total_size,
            "lastConfirmedEntry": str(ledger.last_confirmed_entry),
            "ledgers": [
                {"ledgerId": li.ledger_id, "entries": li.entries, "size": li.size}
                for li in ledger.ledgers()
            ],
            "cursor": (
                {"name": cursor.name, "markDeletePosition": str(cursor.mark_delete_position)}
                if cursor is not None
                else None
            ),
        }
    }
