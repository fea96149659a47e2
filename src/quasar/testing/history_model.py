"""The records of a history (writes, reads, transactions), its outcomes and
anomalies, and the report of a check: the data ``history.py`` records and its
checks (``history_order.py``) read."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

TxnKey = Hashable
DEFAULT_READER = "final"
DEFAULT_SUBSCRIPTION = "sub"


class Outcome(enum.Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Anomaly:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass(frozen=True)
class Write:
    index: int  # event number
    txn: TxnKey | None
    value: str
    partition: str | None
    source: str | None
    producer: str | None
    seq: int | None
    key: str | None = None


@dataclass(frozen=True)
class Read:
    index: int
    value: str
    partition: str | None
    position: Any
    reader: str


@dataclass
class TxnRecord:
    key: TxnKey
    begun_at: int
    outcome: Outcome | None = None
    ended_at: int | None = None
    writes: list[str] = field(default_factory=list)
    acks: list[tuple[str, str]] = field(default_factory=list)  # (subscription, input)
    # (subscription, input) -> event numbers of the ack's intent and of its answer.
    ack_events: dict[tuple[str, str], tuple[int, int | None]] = field(default_factory=dict)
    committing_at: int | None = None  # event number of the first commit request
    begun_t: float | None = None  # monotonic seconds, when the history carries times
    ended_t: float | None = None
    timeout_s: float | None = None


@dataclass
class Report:
    anomalies: list[Anomaly]
    # How each transaction ended, as far as the reads tell (known outcomes as given).
    resolved: dict[TxnKey, Outcome]
    counts: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def kinds(self) -> set[str]:
        return {a.kind for a in self.anomalies}

    def summary(self, limit: int = 30) -> str:
        lines = [f"{len(self.anomalies)} anomalies; counts {self.counts}"]
        by_kind = Counter(a.kind for a in self.anomalies)
        if by_kind:
            lines.append("by kind: " + ", ".join(f"{k}={n}" for k, n in sorted(by_kind.items())))
        lines.extend(f"  {a}" for a in self.anomalies[:limit])
        if len(self.anomalies) > limit:
            lines.append(f"  ... {len(self.anomalies) - limit} more")
        return "\n".join(lines)

    def assert_ok(self) -> None:
        """Raises ``AssertionError`` listing the anomalies, if any."""
        if self.anomalies:
            raise AssertionError("history check failed:\n" + self.summary())
