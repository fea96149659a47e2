"""Fault injection for the connector's own tests; inert unless a test asks for it.

* ``QUASAR_SPARK_CRASH_POINT=<point>@<batchId>`` (environment of the driver process,
  inherited by Spark's Python workers): at that point of that batch the worker
  SIGKILLs the Spark driver — the JVM and the Python process that started it — and
  then itself: a driver crash at an exact place. ``QUASAR_SPARK_CRASH_MARKER``, if
  set, names a file written just before, so a test can tell the crash happened.
* Option ``test.failPoints`` (comma-separated ``<point>@b<batchId>[p<partition>]
  [a<attempt>]``): raise :class:`InjectedFault` there; e.g. ``task.write@b1p0a0``
  fails the first attempt of partition 0 of batch 1, ``sink.commit@b2`` fails the
  driver's commit of batch 2 after its transactions were committed. An item ending
  in ``=hold:<dir>`` holds the task there instead: it writes ``<dir>/<pid>.held``
  (the pid of the Python worker running it) and waits until ``<dir>/release``
  exists, so a test can kill that task's executor, worker or driver while the task
  is known to be running (``task.write``: its rows sent in its open transaction).

Points: ``task.write`` (after the task sent its rows, before it returns),
``sink.decided`` (decision recorded, nothing committed yet), ``sink.committed``
(every transaction of the batch committed, before Spark records the batch).
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

CRASH_ENV = "QUASAR_SPARK_CRASH_POINT"
MARKER_ENV = "QUASAR_SPARK_CRASH_MARKER"
_SPEC = re.compile(r"^([a-z.]+)@b(\d+)(?:p(\d+))?(?:a(\d+))?(?:=hold:(.+))?$")
HOLD_MAX_S = 300.0  # a held task that nobody kills or releases fails after this
_HOLD_POLL_S = 0.05


class InjectedFault(RuntimeError):
    """A failure a test asked for (``test.failPoints``)."""


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def _kill_driver() -> None:
    """SIGKILL the JVM this worker descends from, the JVM's parent, then this process."""
    pid = os.getpid()
    while pid > 1:
        pid = _parent(pid)
        if _comm(pid) == "java":
            parent = _parent(pid)
            os.kill(pid, signal.SIGKILL)
            if parent > 1:
                os.kill(parent, signal.SIGKILL)
            break
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(point: str, batch_id: int) -> None:
    """Kill the driver here if ``QUASAR_SPARK_CRASH_POINT`` says so."""
    spec = os.environ.get(CRASH_ENV)
    if not spec or spec != f"{point}@{batch_id}":
        return
    marker = os.environ.get(MARKER_ENV)
    if marker:
        Path(marker).write_text(f"{point}@{batch_id}\n")
    _kill_driver()


def fail_point(
    spec: str | None,
    point: str,
    batch_id: int,
    partition: int | None = None,
    attempt: int | None = None,
) -> None:
    """Raise :class:`InjectedFault` if ``spec`` (option ``test.failPoints``) matches."""
    if not spec:
        return
    for item in spec.split(","):
        m = _SPEC.match(item.strip())
        if m is None or m.group(1) != point or int(m.group(2)) != batch_id:
            continue
        if m.group(3) is not None and partition != int(m.group(3)):
            continue
        if m.group(4) is not None and attempt != int(m.group(4)):
            continue
        if m.group(5) is not None:
            _hold(item.strip(), Path(m.group(5)))
            continue
        raise InjectedFault(f"injected failure at {item.strip()}")


def _hold(item: str, directory: Path) -> None:
    """Announce this task and wait for the release file, bounded.

    Raises:
        InjectedFault: not released within ``HOLD_MAX_S``, or this process was orphaned
            (its executor died without taking it along): the task must not go on.
    """
    parent = os.getppid()
    marker = directory / f"{os.getpid()}.held"
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(item + "\n")
    tmp.rename(marker)  # the test never sees a half-written marker
    release = directory / "release"
    deadline = time.monotonic() + HOLD_MAX_S
    while not release.exists():
        if os.getppid() != parent:
            raise InjectedFault(f"held at {item}: orphaned")
        if time.monotonic() > deadline:
            raise InjectedFault(f"held at {item}: not released within {HOLD_MAX_S}s")
        time.sleep(_HOLD_POLL_S)  # polling interval of a bounded wait for a file
