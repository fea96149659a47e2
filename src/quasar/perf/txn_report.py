"""Progress lines and the end-of-run summary of ``quasar perf transaction``.

Progress (stderr, every interval)::

    [txn] 12.0s  1,020 txn/s  prod 1,020 msg/s  cons 1,020 msg/s  commit ms p50 3.1 p99 7.9  txn ms p50 20.2 p99 41.0  total 12,240

Summary units: latencies in ms, rates per second of the measured window, CPU in
seconds of user + system time of the load generator's process.
"""

from __future__ import annotations

from typing import Any

from quasar.perf.histogram import PERCENTILES, percentile_key
from quasar.perf.reporter import Reporter
from quasar.perf.summary import latency_block
from quasar.perf.txn_recorder import LATENCIES, TxnRecorder, TxnTotals

__all__ = ["TxnReporter", "build_txn_summary", "format_txn_summary", "txn_progress_line"]


def txn_progress_line(
    label: str, elapsed_s: float, interval_s: float, snap: TxnTotals, total: int
) -> str:
    def rate(n: int) -> float:
        return n / interval_s if interval_s > 0 else 0.0

    parts = [
        f"[{label}] {elapsed_s:6.1f}s",
        f"{rate(snap.transactions):8,.0f} txn/s",
        f"prod {rate(snap.produced):8,.0f} msg/s",
        f"cons {rate(snap.consumed):8,.0f} msg/s",
    ]
    loop_title = "loop" if label == "no-txn" else "txn"
    for name, title in (("commit", "commit"), ("transaction", loop_title)):
        hist = snap.latency_us[name]
        if hist.count:
            ps = hist.percentiles((50.0, 99.0))
            parts.append(
                f"{title} ms p50 {ps[50.0] / 1000:.1f} p99 {ps[99.0] / 1000:.1f}"
            )
    if snap.aborted:
        parts.append(f"aborted {snap.aborted:,}")
    if snap.errors:
        parts.append(f"errors {snap.errors:,}")
    parts.append(f"total {total:,}")
    return "  ".join(parts)


class TxnReporter(Reporter):
    """``Reporter`` with transaction progress lines (same warm-up and time limit)."""

    recorder: TxnRecorder  # type: ignore[assignment]

    def progress(self, elapsed: float, interval: float, snap: Any) -> str:
        return txn_progress_line(self.label, elapsed, interval, snap, self.recorder.messages)


def build_txn_summary(
    *,
    recorder: TxnRecorder,
    run_seconds: float,
    cpu_seconds: float,
    window_cpu_end: float,
    info: dict[str, Any],
    stopped_by: str,
    transactions_enabled: bool,
) -> dict[str, Any]:
    """Everything a transaction run reports (the last interval must be folded)."""
    run = recorder.run
    ended_in_warmup = not recorder.measuring or recorder.measure_start is None
    if ended_in_warmup:
        totals, seconds, window_cpu = run, run_seconds, cpu_seconds
    else:
        totals = recorder.window
        seconds = recorder.window_seconds()
        window_cpu = max(0.0, window_cpu_end - recorder.measure_cpu_start)

    def per_s(n: int) -> float:
        return round(n / seconds, 1) if seconds > 0 else 0.0

    msgs = totals.produced + totals.consumed
    latency: dict[str, Any] = {}
    for name in LATENCIES:
        hist = totals.latency_us[name]
        if name == "transaction" or hist.count:
            latency[name] = latency_block(hist)
    summary: dict[str, Any] = {
        "mode": "transaction",
        "client": "quasar",
        "transactions_enabled": transactions_enabled,
        **info,
        "transactions": run.transactions,
        "committed": run.committed,
        "aborted": run.aborted,
        "errors": run.errors,
        "error_types": dict(run.error_types),
        "messages_produced": run.produced,
        "messages_consumed": run.consumed,
        "bytes_produced": run.produced_bytes,
        "run_seconds": round(run_seconds, 3),
        "stopped_by": stopped_by,
        "window": {
            "seconds": round(seconds, 3),
            "transactions": totals.transactions,
            "committed": totals.committed,
            "aborted": totals.aborted,
            "errors": totals.errors,
            "messages_produced": totals.produced,
            "messages_consumed": totals.consumed,
            "ended_in_warmup": ended_in_warmup,
        },
        "throughput": {
            "txn_s": per_s(totals.transactions),
            "committed_txn_s": per_s(totals.committed),
            "produced_msg_s": per_s(totals.produced),
            "consumed_msg_s": per_s(totals.consumed),
            "produced_mb_s": round(totals.produced_bytes / seconds / 1e6, 3)
            if seconds > 0
            else 0.0,
            "produced_per_txn": round(totals.produced / totals.transactions, 1)
            if totals.transactions
            else 0.0,
        },
        "latency_ms": latency,
        "cpu": {
            "seconds": round(cpu_seconds, 3),
            "window_seconds": round(window_cpu, 3),
            "cores": round(window_cpu / seconds, 3) if seconds > 0 else 0.0,
            "us_per_txn": round(window_cpu * 1e6 / totals.transactions, 2)
            if totals.transactions
            else 0.0,
            "us_per_msg": round(window_cpu * 1e6 / msgs, 2) if msgs else 0.0,
        },
    }
    if recorder.first_error is not None:
        summary["first_error"] = recorder.first_error
    return summary


def _lat_line(block: dict[str, Any]) -> str:
    cells = "  ".join(
        f"{k} {block[k]:.3f}" for k in (percentile_key(q) for q in PERCENTILES)
    )
    return f"{cells}  max {block['max']:.3f}  mean {block['mean']:.3f}  (n {block['count']:,})"


def _per_txn(cfg: dict[str, Any]) -> str:
    interval = cfg.get("txn_interval_ms")
    if interval:
        return f"committed every {interval} ms"
    return f"-nmp {cfg.get('messages_produced')}"


def format_txn_summary(s: dict[str, Any]) -> str:
    """Human-readable summary (several lines, no trailing newline)."""
    w, tp, cpu = s["window"], s["throughput"], s["cpu"]
    kind = "transactions" if s["transactions_enabled"] else "NO transactions (--txn-disable)"
    cfg = s.get("config", {})
    if w["ended_in_warmup"]:
        window = f"whole run, {w['seconds']:.2f} s (ended during the warm-up)"
    else:
        window = f"{w['seconds']:.2f} s after {s.get('warmup_s', 0):g} s warm-up"
    lines = [
        f"== transaction summary (client quasar, {kind}) ==",
        f"input           {', '.join(s.get('input_topics', [])) or '-'}"
        f"  (-nmc {cfg.get('messages_consumed')}, prefilled"
        f" {s.get('prefill', {}).get('messages', 0):,} per topic)",
        f"output          {', '.join(s.get('output_topics', [])) or '-'}"
        f"  ({_per_txn(cfg)}, -c {cfg.get('concurrency')})",
        f"transactions    {s['transactions']:,}  committed {s['committed']:,}"
        f"  aborted {s['aborted']:,}  errors {s['errors']:,}"
        f"  (run {s['run_seconds']:.2f} s, stopped: {s['stopped_by']})",
    ]
    if s.get("abandoned_transactions"):
        lines.append(
            f"abandoned       {s['abandoned_transactions']:,} transactions still waiting"
            " for input when the run stopped (aborted, not counted)"
        )
    if s["error_types"]:
        kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(s["error_types"].items()))
        lines.append(f"error types     {kinds}; first: {s.get('first_error', '')}")
    lines += [
        f"messages        produced {s['messages_produced']:,}  consumed {s['messages_consumed']:,}",
        f"window          {window}: {w['transactions']:,} transactions",
        f"throughput      {tp['txn_s']:,.1f} txn/s  produced {tp['produced_msg_s']:,.1f} msg/s"
        f"  consumed {tp['consumed_msg_s']:,.1f} msg/s  {tp['produced_mb_s']:.2f} MB/s out",
    ]
    if cfg.get("txn_interval_ms"):
        unit = "transaction" if s["transactions_enabled"] else "loop"
        lines.append(f"messages/{unit:<7} {tp['produced_per_txn']:,.1f} produced on average")
    titles = {
        "transaction": "txn latency ms" if s["transactions_enabled"] else "loop latency ms",
        "commit": "commit ms",
        "abort": "abort ms",
        "open": "open ms",
        "ack": "ack ms",
        "send": "send ms",
    }
    for name, block in s["latency_ms"].items():
        lines.append(f"{titles[name]:<16}{_lat_line(block)}")
    lines.append(
        f"cpu             {cpu['seconds']:.2f} s in the run; window {cpu['window_seconds']:.2f} s"
        f" = {cpu['cores']:.2f} cores, {cpu['us_per_txn']:.1f} us/txn"
    )
    return "\n".join(lines)
