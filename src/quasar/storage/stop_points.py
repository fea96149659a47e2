"""Named stop points: a test freezes the whole broker at one exact place in storage.

A crash point (``quasar.transaction.crash_points``) kills the process; a stop point
SIGSTOPs it, which is what a long garbage-collection pause, a VM freeze or an
overloaded host does to a broker: every thread stands still, nothing is torn down,
and when the process is resumed (SIGCONT) it carries on exactly where it stopped.
That is the situation fencing exists for: a previous owner that resumes with a
write in flight after another broker took its topics.

A broker started with ``QUASAR_STOP_POINT=<name>:<arm file>`` stops the first time
it reaches ``stop_point("<name>")`` while ``<arm file>`` exists; it deletes the file
first, so it stops once per arming. The test arms it (creates the file) only when
the publish it wants held is the next one. The variable is read once, at import: a
broker without it pays one comparison with ``None`` per call.

Points placed so far:

* ``storage.before_fence_check``: a commit group is written and synced, its appends
  are not yet checked against a fence nor acknowledged (``file/group_commit.py``).
"""

from __future__ import annotations

import logging
import os
import signal
import threading

log = logging.getLogger(__name__)

ENV_VAR = "QUASAR_STOP_POINT"

KNOWN_POINTS = ("storage.before_fence_check",)


def _parse(value: str | None) -> tuple[str, str] | None:
    if not value:
        return None
    name, sep, arm_file = value.partition(":")
    if not sep or not arm_file or name not in KNOWN_POINTS:
        raise ValueError(f"{ENV_VAR}={value!r}: expected <point>:<arm file>, point one of "
                         f"{', '.join(KNOWN_POINTS)}")
    return name, arm_file


_armed: tuple[str, str] | None = _parse(os.environ.get(ENV_VAR))


def stop_point(name: str) -> None:
    """SIGSTOP this process if ``QUASAR_STOP_POINT`` names this point and is armed."""
    if _armed is None or _armed[0] != name:
        return
    try:
        os.unlink(_armed[1])
    except FileNotFoundError:
        return  # not armed (now)
    log.warning("stopping at stop point %s (SIGSTOP)", name)
    # Sent to this thread, not the process: a process-directed SIGSTOP may be taken
    # by another thread while this one runs on past the point before it is stopped
    # too. Sent here, this thread takes it on its way out of the call, and the
    # whole process stops with it.
    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
    log.warning("resumed at stop point %s", name)
