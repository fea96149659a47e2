"""The end-of-run summary: a JSON-ready dict and its text form for stdout.

Units: latencies in milliseconds, throughput in messages/s, MB/s (10^6 bytes) and
Mbit/s, CPU in seconds of user + system time of the load generator's own process
(all its threads, the official client's C++ threads included).

When a run ends before its warm-up does, there is no measured window; the figures
then cover the whole run and ``window.ended_in_warmup`` says so.

``window.start_unix_s`` and ``window.end_unix_s`` bound the measured window on the
wall clock (seconds since the epoch), so a harness can read other processes' CPU
(a broker's) over exactly the same interval.
"""

from __future__ import annotations

import json
import time
from typing import Any

from quasar.perf.histogram import PERCENTILES, Histogram, percentile_key
from quasar.perf.recorder import Recorder

__all__ = ["build_summary", "format_summary", "latency_block", "write_json"]


def latency_block(hist: Histogram) -> dict[str, float | int]:
    """``{"count", "min", "mean", "p50", "p95", "p99", "p99.9", "max"}`` in ms."""
    ps = hist.percentiles(PERCENTILES)
    out: dict[str, float | int] = {
        "count": hist.count,
        "min": round(hist.min / 1000, 3),
        "mean": round(hist.mean / 1000, 3),
    }
    for q in PERCENTILES:
        out[percentile_key(q)] = round(ps[q] / 1000, 3)
    out["max"] = round(hist.max / 1000, 3)
    return out


def build_summary(
    *,
    mode: str,
    latency_kind: str,
    recorder: Recorder,
    run_seconds: float,
    cpu_seconds: float,
    window_cpu_end: float,
    info: dict[str, Any],
    stopped_by: str,
    run_started: float | None = None,
) -> dict[str, Any]:
    """Everything a run reports (the last interval must already be folded).

    ``cpu_seconds`` is the process CPU time of the whole run; ``window_cpu_end`` the
    ``time.process_time()`` reading when the workers stopped (the window's CPU is
    counted from ``recorder.measure_cpu_start`` to it). ``run_started``: the
    monotonic time the run's clock began, the window's start when it ended in the
    warm-up.
    """
    ended_in_warmup = not recorder.measuring or recorder.measure_start is None
    if ended_in_warmup and recorder.messages:
        # Nothing after the warm-up: report the whole run rather than nothing.
        hist = recorder.run_latency_us
        lag = recorder.measured_lag_us
        messages, nbytes, errors = recorder.messages, recorder.bytes, recorder.errors
        seconds = run_seconds
        window_cpu = cpu_seconds
        window_start = run_started
    else:
        hist = recorder.measured_latency_us
        lag = recorder.measured_lag_us
        messages = recorder.measured_messages
        nbytes = recorder.measured_bytes
        errors = recorder.measured_errors
        seconds = recorder.window_seconds()
        window_cpu = max(0.0, window_cpu_end - recorder.measure_cpu_start)
        window_start = recorder.measure_start
    msg_s = messages / seconds if seconds > 0 else 0.0
    summary: dict[str, Any] = {
        "mode": mode,
        **info,
        "messages": recorder.messages,
        "bytes": recorder.bytes,
        "errors": recorder.errors,
        "run_seconds": round(run_seconds, 3),
        "stopped_by": stopped_by,
        "window": {
            "seconds": round(seconds, 3),
            "messages": messages,
            "bytes": nbytes,
            "errors": errors,
            "ended_in_warmup": ended_in_warmup,
            **_wall_clock_bounds(window_start, recorder.last_time),
        },
        "throughput": {
            "msg_s": round(msg_s, 1),
            "mb_s": round(nbytes / seconds / 1e6, 3) if seconds > 0 else 0.0,
            "mbit_s": round(nbytes * 8 / seconds / 1e6, 3) if seconds > 0 else 0.0,
        },
        "latency_kind": latency_kind,
        "latency_ms": latency_block(hist),
        "cpu": {
            "seconds": round(cpu_seconds, 3),
            "window_seconds": round(window_cpu, 3),
            "cores": round(window_cpu / seconds, 3) if seconds > 0 else 0.0,
            "us_per_msg": round(window_cpu * 1e6 / messages, 2) if messages else 0.0,
        },
    }
    if lag.count:
        summary["send_lag_ms"] = latency_block(lag)
    return summary


def _wall_clock_bounds(start: float | None, end: float | None) -> dict[str, float]:
    """Monotonic ``start``/``end`` as wall-clock times (none when unknown)."""
    if start is None or end is None:
        return {}
    to_wall = time.time() - time.monotonic()
    return {
        "start_unix_s": round(start + to_wall, 6),
        "end_unix_s": round(end + to_wall, 6),
    }


def _lat_line(block: dict[str, Any]) -> str:
    keys = [percentile_key(q) for q in PERCENTILES]
    cells = "  ".join(f"{k} {block[k]:.3f}" for k in keys)
    return f"{cells}  max {block['max']:.3f}  mean {block['mean']:.3f}"


def format_summary(s: dict[str, Any]) -> str:
    """Human-readable summary (several lines, no trailing newline)."""
    w, tp, cpu = s["window"], s["throughput"], s["cpu"]
    title = f"{s['mode']} summary (client {s.get('client', '?')})"
    if w["ended_in_warmup"]:
        window = f"whole run, {w['seconds']:.2f} s (ended during the warm-up)"
    else:
        window = f"{w['seconds']:.2f} s after {s.get('warmup_s', 0):g} s warm-up"
    lines = [
        f"== {title} ==",
        f"topics          {', '.join(s.get('topics', []))}",
        f"messages        {s['messages']:,}  bytes {s['bytes']:,}  errors {s['errors']:,}"
        f"  (run {s['run_seconds']:.2f} s, stopped: {s['stopped_by']})",
        f"window          {window}: {w['messages']:,} messages",
        f"throughput      {tp['msg_s']:,.1f} msg/s  {tp['mb_s']:.2f} MB/s"
        f"  {tp['mbit_s']:.1f} Mbit/s",
        f"{s['latency_kind']} latency ms  {_lat_line(s['latency_ms'])}",
    ]
    if "send_lag_ms" in s:
        lines.append(f"send lag ms     {_lat_line(s['send_lag_ms'])}")
    lines.append(
        f"cpu             {cpu['seconds']:.2f} s in the run; window {cpu['window_seconds']:.2f} s"
        f" = {cpu['cores']:.2f} cores, {cpu['us_per_msg']:.1f} us/msg"
    )
    return "\n".join(lines)


def write_json(path: str, data: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
