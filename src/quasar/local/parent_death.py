"""Children that end when their supervisor dies, however it dies.

A supervisor killed with SIGKILL (``kill -9``, the OOM killer) runs no clean-up, so
the servers it started would run on as orphans. On Linux a child can ask the kernel
for a signal when its parent dies (``prctl(PR_SET_PDEATHSIG)``); a SIGTERM then stops
it as gracefully as ``cluster down`` would. The kernel sends it when the *thread*
that forked the child ends, so the supervisor must start its children from a thread
that lives as long as it does (its main thread).

Elsewhere there is no such request: ``die_with_parent_preexec`` is ``None`` and the
children outlive a killed supervisor (docs/cluster.md says how to stop them).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["die_with_parent_preexec"]

# linux/prctl.h
_PR_SET_PDEATHSIG = 1


def die_with_parent_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive SIGTERM when this process
    dies; ``None`` where the platform has no such request (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    # Loaded here, before the fork: the child between fork and exec should do as
    # little as possible (no imports, no dynamic loading).
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    parent = os.getpid()

    def request() -> None:
        if prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        # The parent may have died between fork and prctl: then no signal comes,
        # and the child has already been re-parented.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return request
