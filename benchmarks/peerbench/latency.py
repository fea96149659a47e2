"""Latency samples and the figures a report shows of them (microseconds in, ms out)."""

from __future__ import annotations

from array import array

PERCENTILES = (50.0, 99.0, 99.9)


def summarize(samples_us: array) -> dict[str, float]:
    """``{"count", "p50", "p99", "p99.9", "max"}`` in milliseconds (nearest rank)."""
    if not samples_us:
        return {"count": 0}
    ordered = sorted(samples_us)
    n = len(ordered)
    out: dict[str, float] = {"count": n}
    for q in PERCENTILES:
        rank = max(0, min(n - 1, int(-(-q * n // 100)) - 1))
        out[f"p{q:g}"] = round(ordered[rank] / 1000, 3)
    out["max"] = round(ordered[-1] / 1000, 3)
    return out
