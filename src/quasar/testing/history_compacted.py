"""Checks of compacted reads: what ``read_compacted`` readers saw against the log.

A history records completed compactions (a partition and its horizon, the last
position the compacted view covers) and passes of compacted readers (a reader
from the earliest position to the end of one partition: its start, each message
read, and whether it reached the end). The truth about the log is the final
reader's complete, read-committed read with positions: which values each
partition holds, and where (a plain send resent after a reconnect is stored twice).

Rules (each sound under redelivery and reconnects):

``nonmonotonic-read``
    a pass's positions went back (or repeated) without a disruption (a fault, a
    reconnect) after the first read it repeats. Within a pass, a reader resumes
    after its last message; only a reconnect may make it read some again.
``compacted-key-reorder``
    within a pass, between two rewinds, a value of a key read after a value of the
    same key that is stored later in every copy (the view and the topic after it
    are read in log order).
``resurrected-value``
    a pass started after a compaction of its partition completed returned a value
    of a key stored (in every copy) before that key's latest value up to the
    compaction's horizon: the view, or any newer one, holds the latest value of
    each key up to its horizon, and the topic after it holds only later ones, so a
    superseded value can come from nowhere legitimate. A reconnect reads the then
    current view, never an older one (a completed compaction is durable).
``lost-latest-value``
    a pass started after a completed compaction reached the end without returning,
    for some key, that key's latest value up to the horizon or a later one. Only
    complete passes count; one cut by an error or a kill is held to the rules above.

Aborted, uncommitted and phantom values are judged as for every other reader
(``history.py``). Keys are the writers' (the workload writes no tombstones: every
keyed value is kept by compaction until a later value of its key supersedes it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from quasar.testing.history_model import Anomaly, Read, Write
from quasar.testing.history_order import count_between

COMPACTED_READER = "compacted"

Position = tuple[int, int]  # (ledger, entry): what a horizon is compared with


@dataclass(frozen=True)
class CompactionDone:
    index: int  # event number: a pass that starts after it reads this view or newer
    partition: str
    horizon: Position


@dataclass(frozen=True)
class CompactedRead:
    index: int
    value: str
    position: tuple[int, ...]


@dataclass
class CompactedPass:
    pass_id: str
    partition: str
    started_at: int  # event number
    reads: list[CompactedRead] = field(default_factory=list)
    complete: bool = False


class CompactedReads:
    """The compactions and compacted passes of one history (recorded by ``History``)."""

    def __init__(self) -> None:
        self.compactions: list[CompactionDone] = []
        self.passes: dict[str, CompactedPass] = {}

    def compaction(self, index: int, partition: str, horizon: Position) -> None:
        self.compactions.append(CompactionDone(index, partition, horizon))

    def start(self, index: int, pass_id: str, partition: str) -> None:
        """Raises: ValueError: the pass was started before."""
        if pass_id in self.passes:
            raise ValueError(f"compacted pass {pass_id!r} started twice")
        self.passes[pass_id] = CompactedPass(pass_id, partition, index)

    def read(self, index: int, pass_id: str, value: str, position: Any) -> None:
        """Raises: ValueError: the pass was not started."""
        self._pass(pass_id).reads.append(
            CompactedRead(index, value, tuple(position) if position else ())
        )

    def end(self, pass_id: str, complete: bool) -> None:
        """Raises: ValueError: the pass was not started."""
        self._pass(pass_id).complete = complete

    def _pass(self, pass_id: str) -> CompactedPass:
        p = self.passes.get(pass_id)
        if p is None:
            raise ValueError(f"compacted pass {pass_id!r} was not started")
        return p

    def as_reads(self) -> list[Read]:
        """Every compacted read as a read of reader ``compacted``, for the rules
        that hold for all readers (phantom, aborted, uncommitted)."""
        return [
            Read(r.index, r.value, p.partition, r.position, COMPACTED_READER)
            for p in self.passes.values() for r in p.reads
        ]

    def counts(self) -> dict[str, int]:
        return {
            "compactions": len(self.compactions),
            "compacted-passes": len(self.passes),
            "compacted-complete-passes": sum(p.complete for p in self.passes.values()),
            "compacted-reads": sum(len(p.reads) for p in self.passes.values()),
        }


class _Log:
    """Where the final reader found each value, per partition."""

    def __init__(self, final_reads: list[Read], writes: dict[str, Write]) -> None:
        self.writes = writes
        self.stored: dict[tuple[str | None, str], list[Position]] = defaultdict(list)
        self.entries: dict[str | None, list[tuple[Position, str]]] = defaultdict(list)
        for r in final_reads:
            if r.position is None:
                continue
            pos = (r.position[0], r.position[1])
            self.stored[(r.partition, r.value)].append(pos)
            self.entries[r.partition].append((pos, r.value))
        self._latest: dict[tuple[str, Position], dict[str, Position]] = {}

    def key(self, value: str) -> str | None:
        w = self.writes.get(value)
        return None if w is None else w.key

    def latest_before(self, partition: str, horizon: Position) -> dict[str, Position]:
        """Per key, the position of its last value at or before ``horizon``."""
        cached = self._latest.get((partition, horizon))
        if cached is None:
            cached = {}
            for pos, value in self.entries.get(partition, ()):
                k = self.key(value)
                if k is not None and pos <= horizon and pos > cached.get(k, (-1, -1)):
                    cached[k] = pos
            self._latest[(partition, horizon)] = cached
        return cached


def compacted_anomalies(
    reads: CompactedReads,
    writes: dict[str, Write],
    final_reads: list[Read],
    disruptions: list[int],
) -> list[Anomaly]:
    """The anomalies of the module docstring, for every pass of ``reads``."""
    log = _Log(final_reads, writes)
    out: list[Anomaly] = []
    for p in reads.passes.values():
        out.extend(_order_anomalies(p, log, disruptions))
        done = [c for c in reads.compactions
                if c.partition == p.partition and c.index < p.started_at]
        if done:
            horizon = max(c.horizon for c in done)
            out.extend(_view_anomalies(p, log, horizon))
    return out


def _order_anomalies(p: CompactedPass, log: _Log, disruptions: list[int]) -> list[Anomaly]:
    out: list[Anomaly] = []
    last: tuple[int, ...] | None = None
    by_key: dict[str, tuple[str, Position]] = {}  # key -> (value, its first copy)
    for i, r in enumerate(p.reads):
        if last is not None and r.position <= last:
            # A rewind: excused by a disruption after the first read it repeats.
            first_repeated = next(x for x in p.reads[:i] if x.position >= r.position)
            if not count_between(disruptions, first_repeated.index, r.index):
                out.append(Anomaly(
                    "nonmonotonic-read",
                    f"{r.value!r} at {r.position} after {last} in compacted pass "
                    f"{p.pass_id!r} of {p.partition}, no reconnect in between",
                ))
            by_key.clear()
        last = r.position
        k = log.key(r.value)
        stored = log.stored.get((p.partition, r.value))
        if k is None or not stored:
            continue  # phantom, aborted or lost: judged by the other rules
        prev = by_key.get(k)
        if prev is not None and max(stored) < prev[1]:
            out.append(Anomaly(
                "compacted-key-reorder",
                f"{r.value!r} (stored at {max(stored)}) read after {prev[0]!r} (stored "
                f"at {prev[1]}) for key {k!r} in compacted pass {p.pass_id!r}",
            ))
        by_key[k] = (r.value, min(stored))
    return out


def _view_anomalies(p: CompactedPass, log: _Log, horizon: Position) -> list[Anomaly]:
    out: list[Anomaly] = []
    latest = log.latest_before(p.partition, horizon)
    newest_read: dict[str, Position] = {}
    for r in p.reads:
        k = log.key(r.value)
        stored = log.stored.get((p.partition, r.value))
        if k is None or not stored:
            continue
        newest_read[k] = max(newest_read.get(k, (-1, -1)), max(stored))
        if k in latest and max(stored) < latest[k]:
            out.append(Anomaly(
                "resurrected-value",
                f"{r.value!r} (stored at {max(stored)}) of key {k!r} read in compacted "
                f"pass {p.pass_id!r} of {p.partition}, after a compaction up to "
                f"{horizon} kept its value at {latest[k]}",
            ))
    if p.complete:
        for k, pos in sorted(latest.items()):
            if newest_read.get(k, (-1, -1)) < pos:
                out.append(Anomaly(
                    "lost-latest-value",
                    f"complete compacted pass {p.pass_id!r} of {p.partition} did not "
                    f"read key {k!r}'s value at {pos} (latest up to the horizon "
                    f"{horizon}) or a later one",
                ))
    return out


__all__ = ["COMPACTED_READER", "CompactedReads", "compacted_anomalies"]
