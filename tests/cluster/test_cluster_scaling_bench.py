"""A smoke run of ``benchmarks/cluster_scaling.py``: the harness, not the figures.

One short round of one workload: it must start its own ZooKeeper and both clusters,
spread the partitions over the two brokers and report positive figures for both
configurations. Speed is never asserted (the machine is shared; see
docs/performance.md, "Scaling out").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_zookeeper

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cluster_scaling.py"
PARTITIONS = 4

# Two clusters started, driven for about 3 s each and stopped: well under a minute
# on an idle machine; the bound leaves room for a loaded one.
pytestmark = pytest.mark.timeout(240)


def test_smoke_run_reports_both_configurations(tmp_path: Path) -> None:
    require_zookeeper()
    out = tmp_path / "scaling.json"
    done = subprocess.run(
        [
            sys.executable, str(SCRIPT), "--rounds", "1", "--duration-s", "2",
            "--warmup-s", "0.5", "--workloads", "W1", "--partitions", str(PARTITIONS),
            "--json", str(out), "--keep-dir", str(tmp_path / "work"),
        ],
        capture_output=True, text=True, timeout=220,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    assert "load average at start" in done.stdout and "W1" in done.stdout
    report = json.loads(out.read_text())
    assert len(report["loadavg_start"]) == 3 and len(report["loadavg_end"]) == 3
    runs = {m["brokers"]: m for m in report["measurements"]}
    assert set(runs) == {1, 2}
    for brokers, m in runs.items():
        assert m["error"] is None, m
        assert m["published_msg_s"] > 0 and m["consumed_msg_s"] > 0, m
        assert m["broker_us_per_msg"] > 0 and m["publish_p99_ms"] > 0, m
        assert len(m["broker_cpu_s"]) == brokers
        assert sorted(m["owners"]) == [str(i) for i in range(PARTITIONS)]
    # Both brokers own partitions and both did work.
    assert set(runs[2]["owners"].values()) == {0, 1}
    assert all(share > 0 for share in runs[2]["broker_share"])
    medians = report["medians"]["W1"]
    assert medians["1"]["rounds"] == 1 and medians["2"]["rounds"] == 1
    assert medians["ratio_2_to_1"]["published_msg_s"] > 0
