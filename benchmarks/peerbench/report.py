"""The report: quasar's ratios to each peer, a markdown table and PNG charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from peerbench.systems import QUASAR_SYSTEMS


def _pub(run: dict[str, Any]) -> float | None:
    """A run's headline rate: published msg/s, or the W4 drain's consumed msg/s."""
    if "drain" in run:
        return run["drain"].get("msg_s")
    return run.get("produce", {}).get("msg_s")


def _cpu(run: dict[str, Any]) -> float | None:
    if "drain" in run:
        return run["drain"].get("server_cpu_us_per_msg")
    return run.get("server_cpu_us_per_msg")


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def ratios(systems: dict[str, Any]) -> dict[str, Any]:
    """``{quasar_system: {peer: {workload: {"msg_s": q/p, "cpu_us_per_msg": q/p}}}}``."""
    out: dict[str, Any] = {}
    for q in QUASAR_SYSTEMS:
        qruns = systems.get(q, {}).get("runs")
        if not qruns:
            continue
        out[q] = {}
        for peer, data in systems.items():
            if peer in QUASAR_SYSTEMS or not data.get("runs"):
                continue
            out[q][peer] = {
                wl: {"msg_s": _ratio(_pub(qr), _pub(data["runs"].get(wl, {}))),
                     "cpu_us_per_msg": _ratio(_cpu(qr), _cpu(data["runs"].get(wl, {})))}
                for wl, qr in qruns.items() if wl in data["runs"]
            }
    return out


def _lat(block: dict[str, Any] | None) -> str:
    if not block or not block.get("count"):
        return "–"
    return f"{block['p50']:.2f} / {block['p99']:.2f} / {block['p99.9']:.2f}"


def _num(v: float | None, fmt: str = "{:,.0f}") -> str:
    return "–" if v is None else fmt.format(v)


def markdown(result: dict[str, Any]) -> str:
    meta = result["meta"]
    lines = [
        "# quasar side by side with RabbitMQ, Redis streams and NATS JetStream",
        "",
        f"Run {meta['started']} on {meta['cpus']} CPUs ({meta['cpu_model']}), load average "
        f"{meta['loadavg_start']} at the start and {meta['loadavg_end']} at the end; "
        f"{meta['duration_s']:g} s per timed run, backlog {meta['backlog_mb']:g} MB, 1 KiB messages.",
        "",
        "| system | workload | published msg/s | consumed msg/s | publish p50 / p99 / p99.9 ms "
        "| end-to-end p50 / p99 / p99.9 ms | server CPU µs/msg |",
        "|---|---|---:|---:|---|---|---:|",
    ]
    for name, data in result["systems"].items():
        if "unavailable" in data:
            lines.append(f"| {name} | unavailable: {data['unavailable']} | | | | | |")
            continue
        for wl, run in data["runs"].items():
            if "skipped" in run or "error" in run:
                why = run.get("skipped") or "error: " + str(run.get("error"))[:120]
                lines.append(f"| {name} | {wl} | {why} | | | | |")
            elif "drain" in run:
                f, d = run["fill"], run["drain"]
                lines.append(
                    f"| {name} | W4 fill {run['backlog_messages']:,} | {_num(f.get('msg_s'))} | | "
                    f"{_lat(f.get('publish_latency_ms'))} | | {_num(f.get('server_cpu_us_per_msg'), '{:.1f}')} |")
                lines.append(
                    f"| {name} | W4 drain | | {_num(d.get('msg_s'))} | | | "
                    f"{_num(d.get('server_cpu_us_per_msg'), '{:.1f}')} |")
            else:
                p, c = run.get("produce", {}), run.get("consume", {})
                lines.append(
                    f"| {name} | {wl} | {_num(p.get('msg_s'))} | {_num(c.get('msg_s'))} | "
                    f"{_lat(p.get('publish_latency_ms'))} | {_lat(c.get('e2e_latency_ms'))} | "
                    f"{_num(run.get('server_cpu_us_per_msg'), '{:.1f}')} |")
    lines += ["", "Messages per fsync (a separate, shorter pass with strace attached; its rate is "
              "lower than the timed run's):", "",
              "| system | workload | messages | sync calls | messages per sync | msg/s while traced |",
              "|---|---|---:|---:|---:|---:|"]
    for name, data in result["systems"].items():
        for wl, s in data.get("fsync", {}).items():
            if "messages" not in s:
                lines.append(f"| {name} | {wl} | {s.get('unavailable') or s.get('error')} | | | |")
                continue
            calls = ", ".join(f"{k} {v:,}" for k, v in s["sync_calls"].items() if v) or "0"
            lines.append(f"| {name} | {wl} | {s['messages']:,} | {calls} | "
                         f"{_num(s['messages_per_sync'], '{:.2f}')} | {_num(s['traced_msg_s'])} |")
    lines += ["", "quasar's ratio to each peer (msg/s: above 1 is faster; CPU µs/msg: below 1 is "
              "cheaper; W4 is the drain):", "", "| quasar | peer | workload | msg/s ratio | CPU/msg ratio |",
              "|---|---|---|---:|---:|"]
    for q, peers in result["ratios"].items():
        for peer, by_wl in peers.items():
            for wl, r in by_wl.items():
                lines.append(f"| {q} | {peer} | {wl} | {_num(r['msg_s'], '{:.2f}')} | "
                             f"{_num(r['cpu_us_per_msg'], '{:.2f}')} |")
    lines += ["", "Settings:", ""]
    for name, data in result["systems"].items():
        lines.append(f"* **{name}** ({data.get('version', '?')}): {data['settings']}")
    return "\n".join(lines) + "\n"


def _short(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def charts(result: dict[str, Any], out_dir: Path) -> list[str]:
    """PNG charts beside the JSON; the file names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = {n: d for n, d in result["systems"].items() if d.get("runs")}
    names = list(ok)
    written: list[str] = []

    def bars(title: str, ylabel: str, series: dict[str, list[float | None]], labels: list[str], path: str,
             log: bool = False) -> None:
        fig, ax = plt.subplots(figsize=(10, 5))
        width = 0.8 / max(1, len(series))
        for i, (label, values) in enumerate(series.items()):
            xs = [x + i * width for x in range(len(labels))]
            drawn = ax.bar(xs, [float("nan") if v is None else v for v in values], width, label=label)
            ax.bar_label(drawn, labels=["" if v is None else _short(v) for v in values], fontsize=6,
                         rotation=90, padding=2)
            # A missing figure (not run, no batching, failed) is marked, not drawn as 0.
            for x, v in zip(xs, values, strict=True):
                if v is None:
                    ax.text(x, 0.01, "n/a", rotation=90, fontsize=7, ha="center", va="bottom",
                            transform=ax.get_xaxis_transform())
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))], labels)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out_dir / path, dpi=110)
        plt.close(fig)
        written.append(path)

    wls = [w for w in ("W1", "W2", "W4") if any(w in d["runs"] for d in ok.values())]
    if wls and names:
        labels = [{"W4": "W4 drain"}.get(w, w) for w in wls]
        bars("Throughput (1 KiB, durable before confirm)", "msg/s",
             {n: [_pub(ok[n]["runs"].get(w, {})) for w in wls] for n in names}, labels, "throughput.png")
        bars("Server CPU per message (process tree, user + system)", "µs per message",
             {n: [_cpu(ok[n]["runs"].get(w, {})) for w in wls] for n in names}, labels, "cpu_per_msg.png")
    w3 = sorted({w for d in ok.values() for w in d["runs"] if w.startswith("W3")}, key=lambda w: int(w[3:]))
    for kind, key, path in (("publish", "produce", "latency_publish.png"),
                            ("end-to-end", "consume", "latency_e2e.png")):
        if not w3:
            break
        field = "publish_latency_ms" if key == "produce" else "e2e_latency_ms"
        labels = [f"{w[3:]}/s {q}" for w in w3 for q in ("p50", "p99", "p99.9")]
        series = {n: [ok[n]["runs"].get(w, {}).get(key, {}).get(field, {}).get(q)
                      for w in w3 for q in ("p50", "p99", "p99.9")] for n in names}
        bars(f"W3 {kind} latency at fixed rates", "ms (log scale)", series, labels, path, log=True)
    sync_wls = [w for w in ("W1", "W2") if any(w in d.get("fsync", {}) for d in ok.values())]
    if sync_wls:
        bars("Messages per fsync (strace pass)", "messages per sync call",
             {n: [ok[n].get("fsync", {}).get(w, {}).get("messages_per_sync") for w in sync_wls]
              for n in names}, sync_wls, "messages_per_fsync.png")
    return written
