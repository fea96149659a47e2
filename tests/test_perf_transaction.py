"""``quasar perf transaction`` against a real broker.

Functional only: counts and well-formed summaries. Speed is never asserted here (see
``benchmarks/run_all.py --transactions``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quasar.perf.main import main as perf_main
from quasar.testing.process import BrokerProcess

PERCENTILE_KEYS = ["min", "p50", "p95", "p99", "p99.9", "max"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("perf-txn") / "data")
    proc.start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def perf_txn(tmp_path: Path, *args: str, timeout: float = 120) -> dict[str, Any]:
    """Run ``quasar perf transaction ARGS --json FILE``; return the JSON summary."""
    out = tmp_path / f"summary-{uuid.uuid4().hex[:8]}.json"
    cmd = [
        sys.executable, "-m", "quasar.cli.main", "perf", "transaction",
        *args, "-i", "1", "--json", str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{cmd}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
    assert "transaction summary" in done.stdout
    return json.loads(out.read_text())


def assert_latency_well_formed(block: dict[str, Any], count: int) -> None:
    assert block["count"] == count
    values = [block[k] for k in PERCENTILE_KEYS]
    assert all(isinstance(v, (int, float)) and v >= 0 for v in values), block
    assert values == sorted(values), block
    assert block["min"] <= block["mean"] <= block["max"]


def assert_counts(s: dict[str, Any], nmp: int, nmc: int) -> None:
    n = s["transactions"]
    assert n > 0
    assert s["errors"] == 0 and s["error_types"] == {}
    assert n == s["committed"] + s["aborted"]
    assert s["messages_produced"] == n * nmp
    assert s["messages_consumed"] == n * nmc
    assert s["bytes_produced"] == n * nmp * 1024
    w = s["window"]
    assert not w["ended_in_warmup"]
    assert w["transactions"] == n  # no warm-up: the window is the whole run
    assert s["throughput"]["txn_s"] > 0
    assert s["cpu"]["seconds"] > 0
    assert_latency_well_formed(s["latency_ms"]["transaction"], n)


def test_produce_only_transactions(broker: BrokerProcess, tmp_path: Path) -> None:
    s = perf_txn(
        tmp_path, "-u", broker.url, "-nmc", "0", "-nmp", "5", "-c", "2", "-t", "2"
    )
    assert s["mode"] == "transaction" and s["transactions_enabled"] is True
    assert s["stopped_by"] == "time limit reached"
    assert s["input_topics"] == [] and len(s["output_topics"]) == 1
    assert s["prefill"]["messages"] == 0
    assert_counts(s, nmp=5, nmc=0)
    assert s["aborted"] == 0 and s["throughput"]["consumed_msg_s"] == 0
    n = s["transactions"]
    assert_latency_well_formed(s["latency_ms"]["commit"], n)
    assert_latency_well_formed(s["latency_ms"]["open"], n)
    assert "abort" not in s["latency_ms"] and "ack" not in s["latency_ms"]
    assert_latency_well_formed(s["latency_ms"]["send"], n)
    # A commit is part of its transaction.
    assert s["latency_ms"]["commit"]["max"] <= s["latency_ms"]["transaction"]["max"]


def test_txn_disable_is_the_same_loop_without_transactions(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    s = perf_txn(
        tmp_path, "-u", broker.url, "-nmc", "0", "-nmp", "5", "-c", "2", "-t", "2",
        "--txn-disable",
    )
    assert s["transactions_enabled"] is False
    assert "setup_transactions" not in s
    assert_counts(s, nmp=5, nmc=0)
    assert s["aborted"] == 0
    # No commit, abort, open or ack latency without transactions.
    assert set(s["latency_ms"]) == {"transaction", "send"}
    assert_latency_well_formed(s["latency_ms"]["send"], s["transactions"])


def test_consume_produce_budget_and_seeded_aborts(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    ntxn, ratio, seed = 120, 0.25, 7
    s = perf_txn(
        tmp_path, "-u", broker.url, "-nmc", "1", "-nmp", "2", "-c", "4",
        "-ntxn", str(ntxn), "--abort-ratio", str(ratio), "--seed", str(seed),
    )
    # The n-th transaction claimed is aborted iff the n-th draw of the seed is below.
    rng = random.Random(seed)
    expected_aborts = sum(rng.random() < ratio for _ in range(ntxn))
    assert s["stopped_by"] == "transaction limit reached"
    assert s["prefill"]["messages"] == ntxn  # -ntxn x -nmc into the fresh input
    assert s["transactions"] == ntxn
    assert s["aborted"] == expected_aborts
    assert_counts(s, nmp=2, nmc=1)
    assert_latency_well_formed(s["latency_ms"]["commit"], ntxn - expected_aborts)
    assert_latency_well_formed(s["latency_ms"]["abort"], expected_aborts)
    assert_latency_well_formed(s["latency_ms"]["ack"], ntxn)

    # Committed acks took effect and aborted ones did not: the same subscription
    # still holds exactly the messages of the aborted transactions.
    rest = perf_txn(
        tmp_path, "-u", broker.url, "-nmc", "1", "-nmp", "0",
        "--input", s["input_topics"][0], "-ss", s["subscription"],
        "--input-idle-timeout", "2",
    )
    assert rest["prefill"]["messages"] == 0  # a named input is not prefilled
    assert rest["stopped_by"] == "no input for 2 s"
    assert rest["transactions"] == expected_aborts
    assert rest["errors"] == 0


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert perf_main(["transaction", "-nmp", "0", "-nmc", "0"]) == 2
    assert perf_main(["transaction", "--abort-ratio", "1.5"]) == 2
    assert perf_main(["transaction", "--txn-disable", "--abort-ratio", "0.5"]) == 2
    assert perf_main(["transaction", "-c", "0"]) == 2
    assert perf_main(["transaction", "--help"]) == 0
    assert "-nmp" in capsys.readouterr().out


async def _drain(url: str, topic: str, expected: int) -> list[Any]:
    """Every message of ``topic`` from the start: ids of what a consumer receives,
    read until ``expected`` have come and then one more receive times out."""
    from quasar.client import aio
    from quasar.client.enums import InitialPosition
    from quasar.errors import Timeout

    client = aio.Client(url)
    try:
        consumer = await client.subscribe(
            topic, "verify", initial_position=InitialPosition.Earliest,
            receiver_queue_size=1000,
        )
        ids: list[Any] = []
        while True:
            # Bounded: a long wait only until the expected count, then a short one
            # that must find nothing more.
            try:
                msg = await consumer.receive(10_000 if len(ids) < expected else 500)
            except Timeout:
                return ids
            ids.append(msg.message_id())
            await consumer.acknowledge(msg)
    finally:
        await client.close()


def test_transactions_committed_every_interval(broker: BrokerProcess, tmp_path: Path) -> None:
    import asyncio

    s = perf_txn(tmp_path, "-u", broker.url, "--txn-interval-ms", "100", "-c", "2", "-t", "2")
    cfg = s["config"]
    assert cfg["txn_interval_ms"] == 100 and cfg["messages_produced"] == 0
    assert s["transactions_enabled"] is True and s["input_topics"] == []
    assert s["errors"] == 0 and s["aborted"] == 0
    n = s["transactions"]
    # Two lanes committing every 100 ms for 2 s: about 40, at least a few.
    assert 4 <= n <= 60, n
    assert s["messages_produced"] > n
    tp = s["throughput"]
    assert tp["txn_s"] > 0 and tp["produced_msg_s"] > 0
    assert tp["produced_per_txn"] == pytest.approx(
        s["window"]["messages_produced"] / s["window"]["transactions"], abs=0.1
    )
    assert_latency_well_formed(s["latency_ms"]["commit"], n)
    assert_latency_well_formed(s["latency_ms"]["open"], n)
    assert "send" not in s["latency_ms"] and "ack" not in s["latency_ms"]
    # Every committed message is there, once.
    ids = asyncio.run(_drain(broker.url, s["output_topics"][0], s["messages_produced"]))
    assert len(ids) == s["messages_produced"]
    assert len(set(map(str, ids))) == len(ids)


def test_interval_baseline_without_transactions(broker: BrokerProcess, tmp_path: Path) -> None:
    s = perf_txn(
        tmp_path, "-u", broker.url, "--txn-interval-ms", "100", "-t", "2", "--txn-disable"
    )
    assert s["transactions_enabled"] is False and "setup_transactions" not in s
    assert s["errors"] == 0
    assert s["transactions"] >= 2  # loops of 100 ms
    assert s["throughput"]["produced_msg_s"] > 0
    assert set(s["latency_ms"]) == {"transaction"}
