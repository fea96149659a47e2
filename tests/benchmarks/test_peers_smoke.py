"""``benchmarks/peers.py`` end to end at tiny durations: the report's shape.

Not a performance test: it checks that each system that can run here produces a
JSON report with positive figures, a markdown table and (with matplotlib) charts.
quasar always runs; a peer whose server or Python client is not installed is
skipped with the reason (``make bench-peers`` installs them), and a system that
cannot start is reported as unavailable, never left out.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "peers.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

from peerbench.nats_jetstream import nats_server_binary  # noqa: E402
from peerbench.rabbitmq import RABBITMQ_SERVER  # noqa: E402


def _missing(binary: str | None, module: str) -> str | None:
    if binary is None:
        return "server not installed (make bench-peers installs it)"
    if importlib.util.find_spec(module) is None:
        return f"Python client {module} not installed (pip install -e '.[bench]')"
    return None


PEERS = {
    "redis-streams": lambda: _missing(shutil.which("redis-server"), "redis"),
    "rabbitmq-quorum,rabbitmq-classic": lambda: _missing(
        str(RABBITMQ_SERVER) if RABBITMQ_SERVER.exists() else None, "aio_pika"),
    "nats-jetstream": lambda: _missing(nats_server_binary(), "nats"),
}


def run_peers(tmp_path: Path, systems: str, workloads: str, duration_s: float) -> dict[str, Any]:
    out = tmp_path / "out"
    cmd = [sys.executable, str(SCRIPT), "--out", str(out), "--systems", systems,
           "--workloads", workloads, "--duration-s", str(duration_s), "--rates", "500", "--backlog-mb", "0.5"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "peers.md").read_text().startswith("# quasar side by side")
    result = json.loads((out / "peers.json").read_text())
    for chart in result["charts"]:
        assert (out / chart).stat().st_size > 0
    if importlib.util.find_spec("matplotlib") is not None:
        assert "throughput.png" in result["charts"]
    return result


def assert_timed_run(run: dict[str, Any]) -> None:
    assert "error" not in run, run
    produce, consume = run["produce"], run["consume"]
    assert produce["msg_s"] > 0 and consume["msg_s"] > 0
    assert produce["errors"] == 0
    assert consume["messages"] == produce["messages"] > 0
    for block in (produce["publish_latency_ms"], consume["e2e_latency_ms"]):
        assert block["count"] > 0
        assert 0 < block["p50"] <= block["p99"] <= block["p99.9"] <= block["max"]
    assert run["server_cpu_us_per_msg"] > 0


def assert_system(data: dict[str, Any], workloads: list[str]) -> None:
    assert "unavailable" not in data, data["unavailable"]
    assert data["settings"] and data["version"]
    runs = data["runs"]
    assert set(runs) == set(workloads)
    for name, run in runs.items():
        if name == "W4":
            assert run["fill"]["messages"] == run["drain"]["messages"] == run["backlog_messages"]
            assert run["fill"]["msg_s"] > 0 and run["drain"]["msg_s"] > 0
            assert run["fill"]["server_cpu_us_per_msg"] is not None
        elif "skipped" not in run:
            assert_timed_run(run)
    for sync in data["fsync"].values():
        if "unavailable" in sync:  # no strace here
            continue
        assert "error" not in sync, sync
        assert sync["messages"] > 0
        # Every system here makes each message durable: at least one sync call.
        assert sum(sync["sync_calls"].values()) > 0
        assert sync["messages_per_sync"] > 0


def test_quasar_own_client(tmp_path: Path) -> None:
    result = run_peers(tmp_path, "quasar-own", "W1,W3,W4", 1)
    assert_system(result["systems"]["quasar-own"], ["W1", "W3@500", "W4"])
    assert result["meta"]["loadavg_end"]


@pytest.mark.parametrize("systems", list(PEERS))
def test_peer(tmp_path: Path, systems: str) -> None:
    missing = PEERS[systems]()
    if missing:
        pytest.skip(f"{systems}: {missing}")
    # NATS confirms a burst at a time with 1,000 in flight, so a window shorter than
    # a burst can see no confirmation at all: three seconds see several.
    result = run_peers(tmp_path, systems, "W1,W2,W4", 3)
    for name in systems.split(","):
        data = result["systems"][name]
        assert_system(data, ["W1", "W2", "W4"])
        if name == "redis-streams":
            assert "skipped" not in data["runs"]["W2"]
        else:
            assert data["runs"]["W2"]["skipped"] == "the client has no batching"


def test_unavailable_system_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("peers_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    from peerbench.server import ServerProcess, Unavailable

    class Missing(ServerProcess):
        def start(self) -> None:
            raise Unavailable("nats-server is not installed")

    monkeypatch.setattr(peers, "server_class", lambda kind: Missing)
    args = peers.parse_args(["--systems", "nats-jetstream", "--workloads", "W1"])
    result = peers.run(args)
    assert result["systems"]["nats-jetstream"]["unavailable"] == "nats-server is not installed"
    assert "| nats-jetstream | unavailable: nats-server is not installed |" in peers.markdown(result)
