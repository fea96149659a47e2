"""The producer's queue of sent-but-not-receipted SENDs and receipt matching.

Receipts arrive in order per producer. The head op covers the sequence ids
``[sequence_id, sequence_id + num_messages - 1]`` (a batch has one SEND with the first
message's id). Matching a receipt's ``sequence_id`` against the head follows the C++
client:

* lower than the head's first id: a stale receipt (e.g. for a SEND that timed out, or a
  duplicate after a resend) and is ignored;
* inside the head's range: completes the head;
* higher than the head's last id: the broker skipped a SEND, so the stream of receipts
  can no longer be trusted; the connection is closed and the pending SENDs resent.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# A completion callback gets (exception or None, message id or None).
SendCallback = Callable[[BaseException | None, Any], None]


def _no_callback(_error: object, _message_id: object) -> None:
    """The callback of a ``send_async`` given ``None``: nobody is told."""


def checked_send_callback(callback: Any) -> Any:
    """``callback`` for ``send_async``, checked before anything is queued.

    ``None`` means fire-and-forget, as in ``pulsar`` (its C++ core skips an empty
    callback). Anything else must be callable, or ``TypeError`` is raised at the call
    instead of an error being logged at every receipt.
    """
    if callback is None:
        return _no_callback
    if not callable(callback):
        raise TypeError(
            f"send_async callback must be callable or None, not {type(callback).__name__}"
        )
    return callback


# An encoded frame as pieces written back to back (a SEND's head and its batch
# payload are not copied into one buffer).
FramePieces = tuple[bytes | bytearray | memoryview, ...]


class ReceiptOutcome(enum.Enum):
    COMPLETED = "completed"
    STALE = "stale"
    OUT_OF_RANGE = "out_of_range"


@dataclass(eq=False)
class OpSend:
    """One SEND frame waiting for its receipt.

    ``frame`` is the complete encoded SEND (command, checksum, metadata, payload), in
    pieces, so it can be written again unchanged after a reconnect. ``callbacks`` has
    one entry per message of the SEND, in batch-index order.
    """

    sequence_id: int
    num_messages: int
    frame: FramePieces
    callbacks: list[SendCallback]
    deadline_ms: float
    # Client memory reserved by the SEND's messages (their payloads as given to send),
    # released when it completes.
    reserved_bytes: int = 0
    # A batch entry: its messages get ids with batch indexes 0..n-1.
    is_batch: bool = False
    # A chunk before the last of a chunked message: the message's pending slot is
    # held by its last chunk, so this SEND holds none.
    chunk_part: bool = False
    # Called once after the callbacks (used by flush() to wait for this op).
    on_complete: list[Callable[[], None]] = field(default_factory=list)

    @property
    def slots(self) -> int:
        """The producer's pending-message slots this SEND gives back when settled."""
        return 0 if self.chunk_part else self.num_messages

    @property
    def last_sequence_id(self) -> int:
        return self.sequence_id + self.num_messages - 1

    def complete(self, error: BaseException | None, ids: list[Any] | None) -> None:
        """Run every callback once: with an error, or with each message's id."""
        callbacks, self.callbacks = self.callbacks, []
        if ids is None:
            for cb in callbacks:
                cb(error, None)
        else:
            for cb, message_id in zip(callbacks, ids, strict=False):
                cb(error, message_id)
        hooks, self.on_complete = self.on_complete, []
        for hook in hooks:
            hook()


class PendingSends:
    """FIFO of :class:`OpSend` in the order they were written to the broker."""

    def __init__(self) -> None:
        self._ops: deque[OpSend] = deque()
        self._num_messages = 0

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[OpSend]:
        return iter(self._ops)

    @property
    def num_messages(self) -> int:
        """Messages (not SENDs) waiting for receipts."""
        return self._num_messages

    def append(self, op: OpSend) -> None:
        self._ops.append(op)
        self._num_messages += op.num_messages

    def head(self) -> OpSend | None:
        return self._ops[0] if self._ops else None

    def pop_head(self) -> OpSend:
        op = self._ops.popleft()
        self._num_messages -= op.num_messages
        return op

    def match_receipt(self, sequence_id: int) -> tuple[ReceiptOutcome, OpSend | None]:
        """Classify a receipt; on COMPLETED the head op is removed and returned."""
        head = self.head()
        if head is None or sequence_id < head.sequence_id:
            return ReceiptOutcome.STALE, None
        if sequence_id > head.last_sequence_id:
            return ReceiptOutcome.OUT_OF_RANGE, None
        return ReceiptOutcome.COMPLETED, self.pop_head()

    def pop_expired(self, now_ms: float) -> list[OpSend]:
        """Remove and return the ops from the head whose deadline has passed.

        Only a prefix is taken: ops are written in order, so an op behind a live one
        cannot be failed without breaking receipt order.
        """
        expired: list[OpSend] = []
        while self._ops and self._ops[0].deadline_ms <= now_ms:
            expired.append(self.pop_head())
        return expired

    def drain(self) -> list[OpSend]:
        """Remove and return every op (producer close or fatal error)."""
        ops = list(self._ops)
        self._ops.clear()
        self._num_messages = 0
        return ops
