"""quasar: ``quasar standalone`` with its default configuration, driven by
``quasar perf`` with the official ``pulsar-client`` or with quasar's own client.

Durability: the default configuration fsyncs an entry before the broker sends its
receipt (``journalSyncData=true``, group commit of at most 1 ms). ``quasar perf``
is the project's own load generator (``benchmarks/README.md``); it measures the same
things the same way as ``peerbench.loadgen``: publish latency from when a message
was due, end-to-end latency from the message's ``publish_time`` (1 ms resolution), a
warm-up left out of the figures. W1 and W3 run without batching and with at most
1,000 messages pending a receipt (``-o 1000``); W2 with the producer's batching (1 ms,
128 KiB, 1,000 messages) and the same bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from peerbench.server import ServerProcess, Unavailable
from peerbench.workloads import Workload

SRC = Path(__file__).resolve().parents[2] / "src"


class QuasarServer(ServerProcess):
    system = "quasar"
    settings = "default configuration: fsync before every receipt (journalSyncData=true)"

    def start(self) -> None:
        sys.path.insert(0, str(SRC))
        from quasar.testing.process import BrokerProcess

        self.broker = BrokerProcess(self.work_dir / "data", log_path=self.log)
        try:
            self.broker.start()
        except Exception as exc:
            raise Unavailable(f"quasar standalone did not start: {exc}") from exc
        self.proc = self.broker.proc

    def stop(self) -> None:
        self.broker.stop()

    def version(self) -> str:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=SRC)
        return f"git {rev.stdout.strip()}" if rev.returncode == 0 else "?"

    def spec(self) -> dict[str, Any]:
        return {"url": self.broker.url}


class QuasarPerfRunner:
    """The ``Runner`` interface of ``peerbench.loadgen`` over ``quasar perf``."""

    def __init__(self, spec: dict[str, Any], work_dir: Path) -> None:
        self.spec = spec
        self.work_dir = work_dir
        self.client = spec["client"]
        self.topic = spec["name"]

    def _perf(self, mode: str, args: list[str], timeout_s: float) -> dict[str, Any]:
        out = self.work_dir / f"perf-{mode}.json"
        out.unlink(missing_ok=True)
        cmd = [
            sys.executable, "-m", "quasar.cli.main", "perf", mode, "-u", self.spec["url"],
            "--client", self.client, "-i", "3600", "--json", str(out), *args,
        ]
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"quasar perf {mode} failed ({proc.returncode}): {proc.stderr[-500:]}")
        return json.loads(out.read_text())  # type: ignore[no-any-return]

    @staticmethod
    def _producer_args(wl: Workload) -> list[str]:
        args = ["--batching" if wl.batching else "--no-batching", "-o", str(wl.in_flight), "-s", str(wl.size)]
        if wl.rate:
            args += ["-r", str(wl.rate)]
        return args

    @staticmethod
    def _produce_result(s: dict[str, Any]) -> dict[str, Any]:
        lat = s["latency_ms"]
        return {
            "messages": s["messages"],
            "errors": s["errors"],
            "window_messages": s["window"]["messages"],
            "window_s": s["window"]["seconds"],
            "msg_s": s["throughput"]["msg_s"],
            "publish_latency_ms": {k: lat[k] for k in ("count", "p50", "p99", "p99.9", "max")},
        }

    @staticmethod
    def _consume_result(s: dict[str, Any]) -> dict[str, Any]:
        lat = s["latency_ms"]
        return {
            "messages": s["messages"],
            "window_messages": s["window"]["messages"],
            "window_s": s["window"]["seconds"],
            "msg_s": s["throughput"]["msg_s"],
            "e2e_latency_ms": {k: lat[k] for k in ("count", "p50", "p99", "p99.9", "max")},
        }

    def setup(self, wl: Workload) -> None:
        # pubsub makes its own subscription; a backlog needs one that exists before
        # it is published, so that the broker keeps it.
        if not wl.backlog_messages:
            return
        self._perf("consume", ["-ss", "backlog", "-t", "1", self.topic], 120)

    def pair(self, wl: Workload) -> dict[str, Any]:
        args = [*self._producer_args(wl), "-t", f"{wl.duration_s:g}", "--warmup", f"{wl.warmup_s:g}", self.topic]
        got = self._perf("pubsub", args, wl.duration_s + 180)
        out: dict[str, Any] = {}
        for role, convert in (("produce", self._produce_result), ("consume", self._consume_result)):
            out[role] = {"error": got[role]["error"]} if "error" in got[role] else convert(got[role])
        return out

    def fill(self, wl: Workload) -> dict[str, Any]:
        args = [*self._producer_args(wl), "-m", str(wl.backlog_messages), self.topic]
        return self._produce_result(self._perf("produce", args, 3600))

    def drain(self, wl: Workload) -> dict[str, Any]:
        args = ["-ss", "backlog", "-m", str(wl.backlog_messages), self.topic]
        return self._consume_result(self._perf("consume", args, 3600))
