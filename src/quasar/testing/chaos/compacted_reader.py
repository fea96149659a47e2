"""One pass of a compacted reader over one partition, recorded line by line.

A pass creates a reader with ``is_read_compacted=True`` at the earliest position
and reads until ``has_message_available()`` says there is nothing more: the
compacted view up to the horizon, then the topic after it. It records

* ``cpass_start`` (``pass``, ``partition``) before the reader is created, so a pass
  that starts after a recorded compaction reads that compaction's view or a newer
  one;
* ``cread`` (``pass``, ``value``, ``key``, ``partition``, ``position``) per message;
* ``cpass_end`` (``pass``, ``complete``): complete only when the reader reached the
  end. A pass cut by an error, by its deadline or by a stop request is incomplete:
  the checker then holds it to the order and resurrection rules, not to holding
  every key's latest value. A pass of a killed worker has no end line at all.

The chaos worker role ``compacted-reader`` runs passes over every partition in turn
(``workload.py``); the runner runs one more per partition after its final
compaction (``compaction.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import quasar.client as qc
from quasar.errors import QuasarError, Timeout
from quasar.testing.chaos.recorder import Recorder

log = logging.getLogger("chaos.compacted")

READ_TIMEOUT_MS = 1000
# A pass reads at most a few thousand messages; one that takes longer than this is
# given up (incomplete) so that a stuck read shows as missing passes, not a hang.
PASS_DEADLINE_S = 60.0


def read_pass(
    client: qc.Client,
    partition: str,
    rec: Recorder,
    pass_id: str,
    *,
    stopping: Callable[[], bool] = lambda: False,
    deadline_s: float = PASS_DEADLINE_S,
) -> bool:
    """Read ``partition`` compacted from the earliest to the end; returns whether
    the pass completed. Never raises a client error (it ends the pass instead)."""
    rec.record("cpass_start", **{"pass": pass_id}, partition=partition)
    complete = False
    reader = None
    deadline = time.monotonic() + deadline_s
    try:
        reader = client.create_reader(partition, qc.MessageId.earliest,
                                      is_read_compacted=True)
        while not stopping() and time.monotonic() < deadline:
            if not reader.has_message_available():
                complete = True
                break
            try:
                msg = reader.read_next(READ_TIMEOUT_MS)
            except Timeout:
                continue  # has_message_available said more will come
            mid = msg.message_id()
            rec.record("cread", **{"pass": pass_id}, value=msg.data().decode(),
                       key=msg.partition_key() or None, partition=partition,
                       position=[mid.ledger_id(), mid.entry_id(), mid.batch_index()])
    except QuasarError as exc:
        log.info("compacted pass %s on %s: %r", pass_id, partition, exc)
    finally:
        rec.record("cpass_end", **{"pass": pass_id}, complete=complete)
        if reader is not None:
            try:
                reader.close()
            except QuasarError as exc:
                log.info("close reader: %r", exc)
    return complete


__all__ = ["PASS_DEADLINE_S", "read_pass"]
