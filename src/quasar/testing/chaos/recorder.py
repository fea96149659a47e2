"""Per-worker JSON-lines histories of a chaos run.

Every worker appends one line per operation step, flushed at once, so that a worker
killed with SIGKILL has recorded everything it may have done: an intent line before
each request (``send``, ``begin``, ``committing``, ``ack``, ...) and an outcome line
after its answer (``send_ok``, ``end``, ...). Each line carries ``t``, the host's
monotonic clock (``CLOCK_MONOTONIC`` is shared by the processes of one host), so the
runner merges all workers' lines and its own fault times into one order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any


class Recorder:
    """Appends operation lines to one worker's history file."""

    def __init__(self, path: Path, worker: str, incarnation: int) -> None:
        self._file: IO[str] = open(path, "a", buffering=1)  # noqa: SIM115
        self.worker = worker
        self.incarnation = incarnation

    def record(self, op: str, **fields: Any) -> None:
        fields.update(op=op, w=self.worker, inc=self.incarnation, t=time.monotonic())
        self._file.write(json.dumps(fields, sort_keys=True) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_lines(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """Every complete line of ``paths`` (a torn last line of a killed worker is
    skipped), in file order."""
    for path in paths:
        try:
            text = Path(path).read_text()
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def merged(paths: Iterable[Path], extra: Iterable[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """All lines of ``paths`` and ``extra`` in time order (ties keep input order)."""
    lines = list(read_lines(paths)) + list(extra)
    return [e for _, _, e in sorted(
        ((e.get("t", 0.0), i, e) for i, e in enumerate(lines)), key=lambda x: x[:2]
    )]
