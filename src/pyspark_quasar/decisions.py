"""The sink's durable commit decisions: one small JSON file per micro-batch.

Layout under the state directory (``txnStateLocation``, default
``<checkpointLocation>/_quasar_sink``)::

    <state>/
      sink.json                 {"version": 1, "sinkId": "...", "partitions": N}
      decisions/
        <batchId>.json          {"version": 1, "batchId": b, "sinkId": "...",
                                 "txns": [{"most": m, "least": l,
                                           "client": "<sinkId>-p<p>",
                                           "partition": p, "attempt": a,
                                           "rows": n}, ...]}

A decision file exists iff the commit decision for that batch was taken: it is
written to a temporary file, fsynced, renamed into place and the directory fsynced
*before* the first transaction is committed. Files older than ``retain`` batches are
deleted after each commit. Bump ``version`` on any change of these layouts.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1
DEFAULT_RETAIN = 100  # Spark's minBatchesToRetain default


@dataclass(frozen=True)
class TxnRecord:
    """One task attempt's transaction, as the task reported it (the commit message)."""

    most: int
    least: int
    client: str
    partition: int
    attempt: int
    rows: int

    @property
    def txn_id(self) -> tuple[int, int]:
        return (self.most, self.least)


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(data, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class DecisionStore:
    """Decision files of one sink (see the module docstring)."""

    def __init__(self, location: str, retain: int = DEFAULT_RETAIN) -> None:
        self.root = Path(location)
        self.dir = self.root / "decisions"
        self.retain = retain

    def _path(self, batch_id: int) -> Path:
        return self.dir / f"{batch_id}.json"

    def get(self, batch_id: int) -> list[TxnRecord] | None:
        """The recorded transactions of ``batch_id``, or None if undecided."""
        try:
            data = json.loads(self._path(batch_id).read_text())
        except FileNotFoundError:
            return None
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self._path(batch_id)}: unknown format {data.get('version')}")
        return [TxnRecord(**t) for t in data["txns"]]

    def record(self, batch_id: int, sink_id: str, txns: list[TxnRecord]) -> None:
        """Take the commit decision for ``batch_id`` (durable when this returns)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        _write_atomically(
            self._path(batch_id),
            {
                "version": FORMAT_VERSION,
                "batchId": batch_id,
                "sinkId": sink_id,
                "txns": [asdict(t) for t in sorted(txns, key=lambda t: t.partition)],
            },
        )

    def drop(self, batch_id: int) -> None:
        """Forget a decision whose transactions all turned out aborted."""
        self._path(batch_id).unlink(missing_ok=True)

    def prune(self, batch_id: int) -> None:
        """Delete decisions older than ``batch_id - retain``."""
        if not self.dir.exists():
            return
        for p in self.dir.glob("*.json"):
            try:
                b = int(p.stem)
            except ValueError:
                continue
            if b < batch_id - self.retain:
                p.unlink(missing_ok=True)

    def sink_info(self) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads((self.root / "sink.json").read_text())
            return data
        except FileNotFoundError:
            return None

    def remember_sink(self, sink_id: str, partitions: int) -> None:
        """Record the sink id and the most partitions seen (for sweeps after a
        failure whose commit messages are all missing)."""
        info = self.sink_info()
        if info and info.get("sinkId") == sink_id and info.get("partitions", 0) >= partitions:
            return
        known = int(info.get("partitions", 0)) if info else 0
        self.root.mkdir(parents=True, exist_ok=True)
        _write_atomically(
            self.root / "sink.json",
            {"version": FORMAT_VERSION, "sinkId": sink_id, "partitions": max(known, partitions)},
        )
