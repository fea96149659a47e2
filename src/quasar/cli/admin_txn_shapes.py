"""How ``quasar admin transactions`` reads durations and prints slow transactions."""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from quasar.cli.output import Table

__all__ = ["parse_duration_ms", "slow_transactions_table"]

# pulsar-admin's relative times (RelativeTimeUtil), plus milliseconds; a bare number
# is seconds, as there.
_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
             "w": 604_800_000}
_DURATION = re.compile(r"([0-9]{1,12})(ms|s|m|h|d|w)?")


def parse_duration_ms(text: str) -> int:
    """``30s``, ``5m``, ``1h``, ``500ms`` or ``30`` (seconds) in milliseconds.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration (e.g. 30s, 5m, 1h, 500ms)"
        )
    return int(match.group(1)) * _UNITS_MS[match.group(2) or "s"]


def _time(ms: Any) -> str:
    if not isinstance(ms, int) or ms <= 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _span(ms: int) -> str:
    """A duration for a person: ``45s``, ``12m05s``, ``3h02m``."""
    seconds = max(ms, 0) // 1000
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def slow_transactions_table(
    result: Any, now_ms: Callable[[], int] = lambda: int(time.time() * 1000)
) -> Table:
    """One row per transaction, oldest first: the columns an operator hunting a
    hanging transaction reads (the timeout is the time left before the coordinator
    aborts it on its own)."""
    columns = ["TXN ID", "STATUS", "OPENED (UTC)", "TIMEOUT IN", "AGE", "OWNER", "PARTITIONS"]
    now = now_ms()
    txns = sorted(
        (t for t in result.values() if isinstance(t, dict)),
        key=lambda t: t.get("openTimestamp") or 0,
    )
    rows = []
    for t in txns:
        opened = t.get("openTimestamp") or 0
        timeout_at = t.get("timeoutAt") or 0
        partitions = sorted(t.get("producedPartitions") or {})
        acked = sorted(
            f"{topic}/{sub}"
            for topic, subs in (t.get("ackedPartitions") or {}).items()
            for sub in subs
        )
        rows.append([
            t.get("txnId", ""),
            t.get("status", ""),
            _time(opened),
            _span(timeout_at - now) if timeout_at else "",
            _span(now - opened) if opened else "",
            t.get("owner") or "",
            " ".join(partitions + acked),
        ])
    return Table(columns, rows)
