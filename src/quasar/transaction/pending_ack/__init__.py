"""Pending ack: acknowledgements made inside transactions, one handle per subscription.

``PendingAckHandle`` records transactional acks in the subscription's pending-ack log
(``{topic}-{sub}__transaction_pending_ack``), checks Pulsar's conflict rules, applies
committed acks to the subscription cursor durably, hands aborted ones back for
redelivery, and rebuilds itself from the log after a restart.

What the broker does (it owns both managed ledgers and the cursor):

* load: open the ledger ``pending_ack_ledger_name(topic, sub)``, build
  ``PendingAckHandle(cursor, ledger, topic, sub, clock, scheduler, config,
  on_low_watermark_abort=..., on_fenced=...)`` and ``await handle.recover()``; if it
  raises, fail the subscribe (retryable) and drop the handle. ``on_fenced``: unload
  the subscription so the next subscribe loads a fresh handle.
* ACK with a transaction: ``await individual_ack(txn, [(pos, batch_size, ack_set)])``
  or ``await cumulative_ack(txn, pos)`` (Exclusive/Failover only); answer the
  CommandAck with the error's ``code``. On success do the consumer bookkeeping of a
  normal ack (unacked count, replay set, redelivery count) but not the cursor.
* ACK without a transaction: ``filter_normal_ack(pos, ack_set)`` first.
* dispatch: skip ``is_pending(pos)`` entries; AND ``pending_ack_set(pos)`` into a
  batch entry's delivered ack set.
* END_TXN_ON_SUBSCRIPTION: ``await end_txn(txn, action, low_watermark)``; for an
  abort redeliver ``AbortResult.positions`` (counting redeliveries), and do the same
  in ``on_low_watermark_abort``. For a commit, the ``CommitResult`` drives the same
  bookkeeping a normal ack does (the cursor is already updated and flushed).
* unload: ``await handle.close()``, then close the ledgers; delete the pending-ack
  ledger with the subscription.

Modules: ``handle`` (public API, ends), ``store`` (write path, the apply shared with
replay, cursor updates, log release), ``state`` (structures, conflict rules),
``records`` (on-disk format), ``log`` (replay, cleanup, trimming, the batched-write
seam), ``masks`` (batch-index arithmetic), ``handle_state`` + ``lifecycle`` (the
state table and its use), ``low_watermark``, ``views``/``stats``/``results`` (what
the broker and admin read).
"""

from .config import PendingAckConfig
from .handle import EndResult, LowWatermarkAbortListener, PendingAckHandle
from .handle_state import (
    ADMISSION,
    TRANSITIONS,
    Admission,
    HandleEvent,
    IllegalHandleTransition,
    PendingAckHandleState,
    next_state,
)
from .log import (
    CURSOR_NAME,
    PENDING_ACK_STORE_SUFFIX,
    PendingAckLog,
    PendingAckLogWriter,
    SingleRecordWriter,
    pending_ack_ledger_name,
    pending_ack_topic,
)
from .records import (
    AckedPosition,
    AckType,
    PendingAckOp,
    PendingAckRecord,
    decode_entry,
)
from .results import AbortResult, CommitResult, NormalAck
from .state import PendingAckState
from .stats import PositionInPendingAckState

__all__ = [
    "ADMISSION",
    "CURSOR_NAME",
    "PENDING_ACK_STORE_SUFFIX",
    "TRANSITIONS",
    "AbortResult",
    "AckType",
    "AckedPosition",
    "Admission",
    "CommitResult",
    "EndResult",
    "HandleEvent",
    "IllegalHandleTransition",
    "LowWatermarkAbortListener",
    "NormalAck",
    "PendingAckConfig",
    "PendingAckHandle",
    "PendingAckHandleState",
    "PendingAckLog",
    "PendingAckLogWriter",
    "PendingAckOp",
    "PendingAckRecord",
    "PendingAckState",
    "PositionInPendingAckState",
    "SingleRecordWriter",
    "decode_entry",
    "next_state",
    "pending_ack_ledger_name",
    "pending_ack_topic",
]
