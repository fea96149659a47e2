"""Named crash points for kill -9 tests.

A crash test starts the broker with ``QUASAR_CRASH_POINT=<name>``; when execution
reaches ``crash_point("<name>")`` the process sends itself SIGKILL, which is what a
power cut or ``kill -9`` does: no ``finally`` blocks, no flushes, no atexit hooks. The
variable is read once, at import, so an unset variable costs one string comparison.

Points placed so far (the harness can enumerate ``KNOWN_POINTS``):

* ``tc.after_ending_written``: the COMMITTING/ABORTING record is durable (and applied
  in memory), the outcome is not in the preserver yet, no end has been sent to any
  partition or subscription;
* ``tc.after_preserver_append``: the outcome is appended to the terminated-transaction
  preserver in memory, not flushed; no end sent yet;
* ``tc.after_some_ends``: the first participant acknowledged its end, others may not
  have;
* ``tc.after_all_ends_before_terminal``: every participant acknowledged, the preserver
  is not flushed and the COMMITTED/ABORTED record is not written yet;
* ``tc.after_preserver_flush``: the outcome is durable in
  ``__terminated_txn_state_{tcId}``, the COMMITTED/ABORTED record is not written yet;
* ``tc.after_terminal_written``: the COMMITTED/ABORTED record is durable (the
  transaction left the coordinator's memory), END_TXN is not answered yet;
* ``tb.after_marker_before_state``: a commit/abort marker is durable on a partition,
  the buffer's in-memory state has not changed yet;
* ``tb.during_snapshot``: a transaction-buffer snapshot is partly written;
* ``pa.after_ack_before_commit``: a transactional ACK record is durable, the end has
  not reached the subscription;
* ``pa.after_commit_record_before_cursor``: the COMMIT record is durable, the acks are
  not yet applied to the cursor (with the default beside-the-record flush: the
  cursor flush may or may not have landed too);
* ``pa.commit_beside_flush_started``: a commit's record append and cursor flush are
  both issued, neither is known to be durable.
"""

from __future__ import annotations

import os
import signal

ENV_VAR = "QUASAR_CRASH_POINT"

KNOWN_POINTS = (
    "tc.after_ending_written",
    "tc.after_preserver_append",
    "tc.after_some_ends",
    "tc.after_all_ends_before_terminal",
    "tc.after_preserver_flush",
    "tc.after_terminal_written",
    "tb.after_marker_before_state",
    "tb.during_snapshot",
    "pa.after_ack_before_commit",
    "pa.after_commit_record_before_cursor",
    "pa.commit_beside_flush_started",
)

_armed: str | None = os.environ.get(ENV_VAR) or None


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL if ``QUASAR_CRASH_POINT`` names this point."""
    if _armed is not None and _armed == name:
        os.kill(os.getpid(), signal.SIGKILL)
