"""Compaction in a chaos run: every partition compacted at the plan's times, through
the admin API, racing with the faults; and a last compaction before the final drain.

Each compaction of a partition is recorded as

* ``compact`` (``partition``): the intent, before ``PUT .../compaction`` (an
  operation of the run);
* ``compact_done`` (``partition``, ``status``, and with ``SUCCESS`` the
  ``horizon`` ``[ledger, entry]`` and ``generation``): once ``GET .../compaction``
  no longer answers ``RUNNING``.

The horizon is the mark-delete position of the ``__compaction`` cursor in
``GET .../internalStats``, read only after the status is ``SUCCESS``: the broker
reports success once the new compacted view is durable, and since compactions of
a partition follow each other here, nothing moves the cursor between the two
requests. A compaction cut by a broker kill or pause has no ``SUCCESS`` and no
horizon: the checker holds nothing to it, and everything must still be there in the
final drain. ``compact_done`` is recorded after the horizon is known, so a
compacted pass started after it reads that view or a newer one.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import quasar.client as qc
from quasar.testing.chaos.compacted_reader import read_pass
from quasar.testing.chaos.recorder import Recorder

log = logging.getLogger("chaos.compaction")

REQUEST_TIMEOUT_S = 5.0
# How long one compaction may stay RUNNING before the driver moves on (it is then
# recorded with status "unknown").
COMPACTION_WAIT_S = 30.0
POLL_INTERVAL_S = 0.1
COMPACTOR = "compactor"
# What a request to a broker that is down, paused or restarting may raise: refused
# or reset connections, timeouts, a response cut short, a body that is not JSON.
REQUEST_FAILED = (OSError, http.client.HTTPException, ValueError)


def _admin_path(partition: str) -> str:
    return partition.replace("persistent://", "/admin/v2/persistent/", 1)


def _request(admin_url: str, method: str, path: str) -> tuple[int, Any]:
    req = urllib.request.Request(admin_url + path, method=method,
                                 data=b"" if method == "PUT" else None)
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as r:
            body = r.read()
            return r.status, json.loads(body) if body else None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def compact_partition(
    admin_url: str, partition: str, rec: Recorder, stop: threading.Event | None = None
) -> str:
    """Compact ``partition`` and wait for the outcome; returns the recorded status
    (``SUCCESS``, ``ERROR``, ``NOT_RUN`` after a restart, or ``unknown``)."""
    path = _admin_path(partition)
    rec.record("compact", partition=partition)
    try:
        code, body = _request(admin_url, "PUT", path + "/compaction")
        if code not in (204, 409):  # 409: one runs already (a retried request)
            log.info("compact %s: HTTP %s %s", partition, code, body)
    except REQUEST_FAILED as exc:
        log.info("compact %s: %r", partition, exc)
    status = "unknown"
    deadline = time.monotonic() + COMPACTION_WAIT_S
    unreachable = False  # said once per compaction, not once per poll of a broker down
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        try:
            code, body = _request(admin_url, "GET", path + "/compaction")
        except REQUEST_FAILED as exc:
            if not unreachable:
                log.info("compaction status %s: %r (asking again)", partition, exc)
            unreachable = True
            code, body = 0, None
        if code == 200 and isinstance(body, dict) and body.get("status") != "RUNNING":
            status = str(body.get("status"))
            break
        time.sleep(POLL_INTERVAL_S)  # polling interval of a bounded wait
    if status != "SUCCESS":
        rec.record("compact_done", partition=partition, status=status)
        return status
    cursor: dict[str, Any] | None = None
    try:
        code, stats = _request(admin_url, "GET", path + "/internalStats")
        if code == 200:
            cursor = stats["cursors"]["__compaction"]
            ledger, entry = (int(x) for x in cursor["markDeletePosition"].split(":"))
    except (*REQUEST_FAILED, KeyError, TypeError) as exc:
        log.info("internal stats %s: %r", partition, exc)
        cursor = None
    if cursor is None:
        rec.record("compact_done", partition=partition, status="unknown")
        return "unknown"
    rec.record("compact_done", partition=partition, status=status, horizon=[ledger, entry],
               generation=cursor["properties"].get("compactedLedgerGeneration"))
    return status


class CompactionDriver:
    """Compacts every partition at the plan's times (seconds after ``started``), in
    a thread of the runner, so compactions race with the faults it injects."""

    def __init__(self, admin_url: str, partitions: list[str], times: tuple[float, ...],
                 history: Path) -> None:
        self.admin_url, self.partitions, self.times = admin_url, partitions, times
        self.history = history
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, started: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(started,),
                                        name="chaos-compaction", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(COMPACTION_WAIT_S + 2 * REQUEST_TIMEOUT_S)

    def _run(self, started: float) -> None:
        rec = Recorder(self.history, COMPACTOR, 1)
        try:
            for at in self.times:
                if self._stop.wait(max(0.0, started + at - time.monotonic())):
                    return
                for partition in self.partitions:
                    compact_partition(self.admin_url, partition, rec, self._stop)
        finally:
            rec.close()


def final_compaction(url: str, admin_url: str, partitions: list[str], rec: Recorder) -> None:
    """After the workload: compact every partition once more and read each one
    compacted to the end, before the final drain shows that compaction deleted
    nothing the other subscriptions still need."""
    for partition in partitions:
        compact_partition(admin_url, partition, rec)
    client = qc.Client(url, operation_timeout_seconds=30)
    try:
        for n, partition in enumerate(partitions):
            read_pass(client, partition, rec, f"final.P{n}")
    finally:
        client.close()


__all__ = ["COMPACTOR", "CompactionDriver", "compact_partition", "final_compaction"]
