"""Admission control: how far each partition may advance in one micro-batch.

Positions are ``(ledger, entry)`` pairs, not dense offsets, so the budget is counted in
*stored entries* walked over the partition's ledger list (``internalStats``): a
``maxRecordsPerTrigger`` of N admits at most N entries, which is N records for
unbatched producers and at most N batches for batching producers. Transaction markers
and aborted entries count too (as Kafka's offsets count them), so a trigger may admit
fewer rows than the limit, never more entries. ``maxBytesPerTrigger`` is turned into
entries with each ledger's average entry size. The budget is shared between the
partitions in proportion to their backlogs (at least one entry each), like Kafka's.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark_quasar.ledgers import LedgerSpan
from pyspark_quasar.positions import EARLIEST, Bound


def _first_entry(start: Bound, spans: list[LedgerSpan]) -> tuple[int, int] | None:
    """The first entry position not yet read after ``start``."""
    if start.kind == EARLIEST:
        for s in spans:
            if s.entries > 0:
                return (s.ledger_id, 0)
        return None
    entry = start.entry if start.kind == "from" else start.entry + 1
    if start.kind == "after" and start.batch >= 0:
        entry = start.entry  # rest of a partly read batch
    return (start.ledger, entry)


def _walk(
    spans: list[LedgerSpan], first: tuple[int, int], budget: int | None, cap: Bound
) -> tuple[int, tuple[int, int] | None]:
    """Entries from ``first`` up to the cap's entry (inclusive), and the position of
    the ``budget``-th one (None when the budget reaches the cap)."""
    cap_pos = (cap.ledger, cap.entry)
    count = 0
    for s in spans:
        if s.ledger_id < first[0] or s.entries == 0:
            continue
        lo = first[1] if s.ledger_id == first[0] else 0
        hi = s.entries - 1
        if s.ledger_id > cap_pos[0]:
            break
        if s.ledger_id == cap_pos[0]:
            hi = min(hi, cap_pos[1])
        if hi < lo:
            continue
        n = hi - lo + 1
        if budget is not None and count + n >= budget:
            return count + n, (s.ledger_id, lo + (budget - count) - 1)
        count += n
    return count, None


def _avg_entry_bytes(spans: list[LedgerSpan]) -> float:
    entries = sum(s.entries for s in spans)
    size = sum(s.size for s in spans)
    return size / entries if entries and size else 1024.0


def _shares(backlogs: dict[str, int], budget: int | None) -> dict[str, int]:
    """Split ``budget`` entries in proportion to the backlogs (largest remainders get
    the rounding leftovers; at least one entry each, never more than the backlog)."""
    total = sum(backlogs.values())
    if budget is None or total <= budget:
        return dict(backlogs)
    shares = {t: max(1, budget * n // total) for t, n in backlogs.items()}
    leftover = budget - sum(shares.values())
    by_remainder = sorted(backlogs, key=lambda t: -(budget * backlogs[t] % total))
    for t in by_remainder:
        if leftover <= 0:
            break
        if shares[t] < backlogs[t]:
            shares[t] += 1
            leftover -= 1
    return shares


def limit_offsets(
    starts: dict[str, Bound],
    caps: dict[str, Bound],
    spans_of: Callable[[str], list[LedgerSpan] | None],
    max_entries: int | None,
    max_bytes: int | None,
) -> dict[str, Bound]:
    """The end bound of each partition under the limits (``caps`` when none bind)."""
    if max_entries is None and max_bytes is None:
        return dict(caps)
    backlog: dict[str, tuple[int, list[LedgerSpan], tuple[int, int]]] = {}
    for topic, cap in caps.items():
        start = starts.get(topic, Bound.earliest())
        if start.is_empty_range_to(cap):
            continue
        spans = spans_of(topic) or []  # None: the partition is gone
        first = _first_entry(start, spans)
        if first is None:
            continue
        n, _ = _walk(spans, first, None, cap)
        if n > 0:
            backlog[topic] = (n, spans, first)
    total = sum(n for n, _, _ in backlog.values())
    entry_shares = _shares({t: n for t, (n, _, _) in backlog.items()}, max_entries)
    ends = {t: starts.get(t, Bound.earliest()) for t in caps}
    for topic, (n, spans, first) in backlog.items():
        share = entry_shares[topic]
        if max_bytes is not None:
            per_entry = _avg_entry_bytes(spans)
            byte_share = max_bytes * n // total if total else max_bytes
            share = min(share, max(1, int(byte_share // per_entry)))
        if share >= n:
            ends[topic] = caps[topic]
            continue
        _, pos = _walk(spans, first, share, caps[topic])
        assert pos is not None
        cap = caps[topic]
        if pos >= (cap.ledger, cap.entry):
            ends[topic] = cap
        else:
            ends[topic] = Bound.after(pos[0], pos[1], -1)
    return ends
