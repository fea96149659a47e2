"""Order checks of a history: positions and per-producer and per-key send order
as the final reader saw them (INV-ORD)."""

from __future__ import annotations

import bisect
from typing import Any

from quasar.testing.history_model import Anomaly, Read, Write


def count_between(indexes: list[int], low: int, high: int) -> int:
    return bisect.bisect_left(indexes, high) - bisect.bisect_right(indexes, low)


def order_anomalies(reads: list[Read], writes: dict[str, Write]) -> list[Anomaly]:
    out: list[Anomaly] = []
    last_pos: dict[str | None, Any] = {}
    last_seq: dict[tuple[str | None, str], tuple[int, str]] = {}
    for r in reads:
        if r.position is not None:
            prev = last_pos.get(r.partition)
            if prev is not None and not prev < r.position:
                out.append(Anomaly(
                    "nonmonotonic-read",
                    f"{r.value!r} at {r.position} after {prev} on {r.partition}",
                ))
            last_pos[r.partition] = r.position
        w = writes.get(r.value)
        if w is None or w.producer is None or w.seq is None:
            continue
        key = (r.partition, w.producer)
        prev_seq = last_seq.get(key)
        if prev_seq is not None and prev_seq[1] != r.value and prev_seq[0] >= w.seq:
            out.append(Anomaly(
                "reorder",
                f"{r.value!r} (seq {w.seq}) read after {prev_seq[1]!r} (seq {prev_seq[0]}) "
                f"of producer {w.producer!r} on {r.partition}",
            ))
        last_seq[key] = (w.seq, r.value)
    return out


def key_order_anomalies(reads: list[Read], writes: dict[str, Write]) -> list[Anomaly]:
    """Per-key order: values of one producer with one key are read in send order
    (the key routes them to one partition, whatever the partitioning)."""
    out: list[Anomaly] = []
    last: dict[tuple[str, str], tuple[int, str]] = {}
    for r in reads:
        w = writes.get(r.value)
        if w is None or w.key is None or w.producer is None or w.seq is None:
            continue
        k = (w.key, w.producer)
        prev = last.get(k)
        if prev is not None and prev[1] != r.value and prev[0] >= w.seq:
            out.append(Anomaly(
                "key-reorder",
                f"{r.value!r} (seq {w.seq}) read after {prev[1]!r} (seq {prev[0]}) "
                f"for key {w.key!r} of producer {w.producer!r}",
            ))
        last[k] = (w.seq, r.value)
    return out
