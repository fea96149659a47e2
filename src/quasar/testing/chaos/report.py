"""From the recorded lines of a chaos run to a verdict and a printed summary.

:func:`build_history` replays the merged lines of every worker and of the runner
into a :class:`~quasar.testing.history.History`; :class:`RunSummary` holds what the
run prints: operations by kind, faults by kind, the broker's sampled RSS, and the
checker's anomalies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from quasar.testing.history import History, Outcome, Report

# The lines that are operations (an intent sent to the broker), as counted and
# reported; outcome lines (send_ok, end, ack_done, ...) belong to them.
OPERATION_KINDS = frozenset({
    "send", "begin", "committing", "commit_retry", "abort", "abandon", "recv", "ack",
    "compact",
})
FINAL_READER = "final"


def build_history(lines: Iterable[dict[str, Any]]) -> History:
    """Replay merged, time-ordered lines (see ``recorder.merged``) into a history
    whose conflicting transaction outcomes are anomalies, not errors."""
    h = History(conflicts_are_anomalies=True)
    faults: dict[int, dict[str, Any]] = {}
    # The faults in force when each pending send was made. A fault that lasted
    # through a whole send (a proxy cut, a blackhole, a full disk) may have broken
    # its connection at any moment in between, not only at inject or heal, so it
    # counts as a disruption between that send and its receipt.
    in_force_at_send: dict[str, set[int]] = {}
    for e in lines:
        op = e.get("op")
        if op == "send":
            h.write(e.get("txn"), e["value"], key=e.get("key"),
                    producer=e.get("producer"), seq=e.get("seq"))
            in_force_at_send[e["value"]] = set(faults)
        elif op == "send_ok":
            for n in sorted(in_force_at_send.pop(e["value"], set()) & set(faults)):
                h.disruption(f"{faults[n]['kind']} in force throughout a send")
            h.write_done(e["value"])
        elif op == "send_fail":
            in_force_at_send.pop(e["value"], None)
        elif op == "begin":
            h.begin(e["txn"], at=e["t"], timeout_s=e.get("timeout_s"))
        elif op == "committing":
            h.committing(e["txn"])
        elif op == "end":
            h.end(e["txn"], Outcome(e["outcome"]), at=e["t"])
        elif op == "recv":
            h.read(e["value"], partition=e["partition"],
                   position=tuple(e["position"]), reader=e["sub"])
        elif op == "final_read":
            h.read(e["value"], partition=e["partition"],
                   position=tuple(e["position"]), reader=FINAL_READER)
        elif op == "sentinel":
            h.write(None, e["value"], partition=e["partition"])
            h.write_done(e["value"])
        elif op == "fault_start":
            faults[e["n"]] = e
            h.disruption(f"{e['kind']} injected")
        elif op == "fault_end":
            h.disruption(f"{e['kind']} healed")
            start = faults.pop(e["n"], e)
            h.fault(start["t"], e["t"], e["kind"])
        elif op == "no_progress":
            h.no_progress(e["what"])
        elif op == "compact_done" and e.get("status") == "SUCCESS":
            h.compaction_done(e["partition"], tuple(e["horizon"]))
        elif op == "cpass_start":
            h.compacted_pass_start(e["pass"], e["partition"])
        elif op == "cread":
            h.compacted_read(e["pass"], e["value"], position=tuple(e["position"]))
        elif op == "cpass_end":
            h.compacted_pass_end(e["pass"], complete=e["complete"])
    return h


@dataclass
class RunSummary:
    seed: int
    operations: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    # The broker's RSS, sampled through the run (every half second while it runs).
    rss_samples: list[int] = field(default_factory=list)
    duration_s: float = 0.0
    report: Report | None = None

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    @property
    def rss_max_bytes(self) -> int:
        return max(self.rss_samples, default=0)

    @property
    def rss_last_bytes(self) -> int:
        return self.rss_samples[-1] if self.rss_samples else 0

    def rss_text(self) -> str:
        """First, median, max and last sample: memory that stays flat through the
        faults shows as a median and a last sample near the first."""
        if not self.rss_samples:
            return "broker RSS: not sampled"
        mib = [b / 2**20 for b in self.rss_samples]
        median = sorted(mib)[len(mib) // 2]
        return (
            f"broker RSS ({len(mib)} samples): first {mib[0]:.1f} MiB, median {median:.1f} "
            f"MiB, max {max(mib):.1f} MiB, last {mib[-1]:.1f} MiB"
        )

    def text(self, anomaly_limit: int = 30) -> str:
        ops = sum(self.operations.values())
        lines = [
            f"chaos seed {self.seed}: {ops} operations, {sum(self.faults.values())} "
            f"faults in {self.duration_s:.0f}s",
            "operations: " + _by_kind(self.operations),
            "faults: " + _by_kind(self.faults),
            self.rss_text(),
        ]
        if self.report is None:
            lines.append("no verdict: the run did not finish")
        else:
            lines.append(self.report.summary(limit=anomaly_limit))
            lines.append("verdict: " + ("OK" if self.report.ok else "VIOLATIONS"))
        return "\n".join(lines)


def _by_kind(counts: Counter[str]) -> str:
    return ", ".join(f"{k}={n}" for k, n in sorted(counts.items())) or "none"
