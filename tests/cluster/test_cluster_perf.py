"""``quasar perf`` against a 2-broker cluster: a service URL naming both brokers and a
partitioned topic whose partitions the two brokers share, with both client drivers.

Functional only (counts, errors); speed is measured by
``benchmarks/cluster_scaling.py``, never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from quasar.testing.cluster import ClusterProcess

from .conftest import CLIENT_IMPLS, http_request

PARTITIONS = 4
MESSAGES = 2000


def perf(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / f"summary-{uuid.uuid4().hex[:8]}.json"
    cmd = [sys.executable, "-m", "quasar.cli.main", "perf", *args, "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return json.loads(out.read_text())


def owner_port(cluster: ClusterProcess, topic: str) -> int:
    """The binary port of the broker that owns ``topic`` (a lookup through the first
    broker, following its redirect to the owner as a client does)."""
    lookup = f"{cluster.brokers[0].admin_url}/lookup/v2/topic/persistent/public/default/{topic}"
    with urllib.request.urlopen(lookup, timeout=15) as answer:
        body = json.loads(answer.read())
    return int(body["brokerUrl"].rsplit(":", 1)[1])


@pytest.mark.parametrize("client", CLIENT_IMPLS)
def test_perf_on_a_partitioned_topic_over_both_brokers(
    cluster: ClusterProcess, tmp_path: Path, client: str
) -> None:
    topic = f"perf-cluster-{client}-{uuid.uuid4().hex[:8]}"
    status, _, body = http_request(
        cluster.brokers[0], "PUT",
        f"/admin/v2/persistent/public/default/{topic}/partitions", PARTITIONS,
    )
    assert status == 204, body
    # Looked up one after another through one broker, the partitions' bundles go to
    # the least loaded member in turn: both brokers serve the topic.
    owners = [owner_port(cluster, f"{topic}-partition-{i}") for i in range(PARTITIONS)]
    assert set(owners) == {b.port for b in cluster.brokers}, owners
    url = ["-u", cluster.service_url, "--client", client]
    assert "," in cluster.service_url  # both brokers in one URL
    produced = perf(
        tmp_path, "produce", *url, "--admin-url", cluster.brokers[1].admin_url,
        "-np", str(PARTITIONS), "--no-batching", "-m", str(MESSAGES), topic,
    )
    assert produced["messages"] == MESSAGES and produced["errors"] == 0
    consumed = perf(
        tmp_path, "consume", *url, "-sp", "Earliest", "-ss", "perf-test",
        "-m", str(MESSAGES), topic,
    )
    assert consumed["messages"] == MESSAGES and consumed["errors"] == 0
    assert consumed["stopped_by"] == "message limit reached"
    # Ownership stayed where it was: the run went through both brokers.
    assert [owner_port(cluster, f"{topic}-partition-{i}") for i in range(PARTITIONS)] == owners
