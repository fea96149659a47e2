"""``quasar perf``: the load generator against a real broker, with both clients.

Functional only: the summaries must report the right counts and well-formed
percentiles. Speed is never asserted here (see ``benchmarks/run_all.py``).
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quasar.client.admin import call_admin
from quasar.perf.histogram import Histogram
from quasar.perf.main import build_parser
from quasar.perf.main import main as perf_main
from quasar.perf.options import produce_options, producer_settings
from quasar.perf.recorder import LIMIT_REACHED, Recorder, RunControl
from quasar.perf.schedule import RateSchedule
from quasar.testing.process import BrokerProcess

CLIENTS = ["quasar", "pulsar"]
PERCENTILE_KEYS = ["min", "p50", "p95", "p99", "p99.9", "max"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("perf") / "data")
    proc.start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def perf(tmp_path: Path, *args: str, timeout: float = 120) -> dict[str, Any]:
    """Run ``quasar perf ARGS --json FILE`` as a user would; return the JSON summary."""
    out = tmp_path / f"summary-{uuid.uuid4().hex[:8]}.json"
    cmd = [sys.executable, "-m", "quasar.cli.main", "perf", *args, "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{cmd}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
    assert "summary" in done.stdout  # the text summary goes to stdout
    return json.loads(out.read_text())


def assert_latency_well_formed(block: dict[str, Any], count: int) -> None:
    assert block["count"] == count
    values = [block[k] for k in PERCENTILE_KEYS]
    assert all(isinstance(v, (int, float)) and v >= 0 for v in values), block
    assert values == sorted(values), block  # min <= p50 <= ... <= max
    assert block["min"] <= block["mean"] <= block["max"]


def assert_run(summary: dict[str, Any], messages: int) -> None:
    assert summary["messages"] == messages
    assert summary["bytes"] == messages * 1024
    assert summary["errors"] == 0
    window = summary["window"]
    assert window["messages"] == messages  # no warm-up: the window is the whole run
    assert not window["ended_in_warmup"]
    assert summary["throughput"]["msg_s"] > 0
    assert summary["cpu"]["seconds"] > 0
    assert_latency_well_formed(summary["latency_ms"], messages)


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_then_consume(
    broker: BrokerProcess, tmp_path: Path, client: str
) -> None:
    topic = f"perf-{client}-{uuid.uuid4().hex[:8]}"
    url = ["-u", broker.url]
    produced = perf(tmp_path, "produce", *url, "--client", client, "-m", "2000", topic)
    assert produced["mode"] == "produce" and produced["client"] == client
    assert produced["latency_kind"] == "publish"
    assert produced["stopped_by"] == "message limit reached"
    assert produced["sent"] == 2000
    assert_run(produced, 2000)

    consumed = perf(
        tmp_path,
        "consume",
        *url,
        "--client",
        client,
        "-m",
        "2000",
        "-sp",
        "Earliest",
        "-ss",
        "perf-test",
        topic,
    )
    assert consumed["mode"] == "consume" and consumed["latency_kind"] == "end-to-end"
    assert consumed["stopped_by"] == "message limit reached"
    assert_run(consumed, 2000)


def test_consume_with_batch_receive_takes_every_message(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = f"perf-batch-receive-{uuid.uuid4().hex[:8]}"
    url = ["-u", broker.url]
    perf(tmp_path, "produce", *url, "--batching", "-m", "2000", topic)
    consumed = perf(
        tmp_path,
        "consume",
        *url,
        "--client",
        "pulsar",
        "--batch-receive",
        "300",
        "-m",
        "2000",
        "-sp",
        "Earliest",
        topic,
    )
    assert consumed["stopped_by"] == "message limit reached"
    assert_run(consumed, 2000)


@pytest.mark.parametrize("client", CLIENTS)
def test_pubsub_reports_both_sides(
    broker: BrokerProcess, tmp_path: Path, client: str
) -> None:
    # A fixed rate, so the run is short and light whatever the machine.
    result = perf(
        tmp_path,
        "pubsub",
        "-u",
        broker.url,
        "--client",
        client,
        "--no-batching",
        "-r",
        "500",
        "-t",
        "2",
        "-i",
        "1",
    )
    assert result["mode"] == "pubsub"
    produce, consume = result["produce"], result["consume"]
    assert produce["stopped_by"] == "time limit reached"
    n = produce["messages"]
    assert n > 0 and produce["errors"] == 0
    # The consumer stops once it has everything the broker confirmed.
    assert consume["messages"] == n
    assert consume["stopped_by"] == "message limit reached"
    assert_latency_well_formed(produce["latency_ms"], produce["window"]["messages"])
    assert_latency_well_formed(consume["latency_ms"], consume["window"]["messages"])
    # Fixed rate: how late sends left their schedule is reported too.
    assert_latency_well_formed(produce["send_lag_ms"], produce["sent"])


def test_partitioned_topic_is_created(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = f"perf-part-{uuid.uuid4().hex[:8]}"
    produced = perf(
        tmp_path,
        "produce",
        "-u",
        broker.url,
        "--admin-url",
        broker.admin_url,
        "-np",
        "3",
        "-m",
        "300",
        topic,
    )
    assert_run(produced, 300)
    meta = call_admin(
        broker.admin_url,
        lambda admin: admin.request(
            "GET", f"/admin/v2/persistent/public/default/{topic}/partitions"
        ),
    )
    assert meta["partitions"] == 3


@pytest.mark.parametrize("client", CLIENTS)
def test_pending_limit_across_partitions_is_passed_to_the_client(
    broker: BrokerProcess, tmp_path: Path, client: str
) -> None:
    """Both clients take the limit (1 in flight per partition here) and still
    publish everything, unbatched, over all partitions."""
    topic = f"perf-across-{client}-{uuid.uuid4().hex[:8]}"
    produced = perf(
        tmp_path, "produce", "-u", broker.url, "--admin-url", broker.admin_url,
        "--client", client, "-np", "4", "--no-batching", "-o", "1000",
        "--max-outstanding-across-partitions", "4", "-m", "400", topic,
    )
    assert_run(produced, 400)
    stats = call_admin(
        broker.admin_url,
        lambda admin: admin.request(
            "GET", f"/admin/v2/persistent/public/default/{topic}/partitioned-stats"
        ),
    )
    # Round-robin routing without batching: every partition got a share.
    assert all(p["msgInCounter"] > 0 for p in stats["partitions"].values()), stats


def test_pending_limit_across_partitions_option() -> None:
    ns = build_parser().parse_args(["produce", "t"])
    assert producer_settings(produce_options(ns))[
        "max_pending_messages_across_partitions"
    ] == 50_000  # pulsar-perf's and both clients' default
    ns = build_parser().parse_args(
        ["produce", "--max-outstanding-across-partitions", "1000", "t"]
    )
    assert producer_settings(produce_options(ns))[
        "max_pending_messages_across_partitions"
    ] == 1000
    assert perf_main(["produce", "--max-outstanding-across-partitions", "0", "t"]) == 2


def test_window_bounds_on_the_wall_clock(broker: BrokerProcess, tmp_path: Path) -> None:
    """The summary says when its window began and ended, so another process's CPU
    can be read over the same interval."""
    before = time.time()
    produced = perf(
        tmp_path, "produce", "-u", broker.url, "-m", "3000", "--warmup", "0.2",
        f"perf-window-{uuid.uuid4().hex[:8]}",
    )
    after = time.time()
    window = produced["window"]
    assert before <= window["start_unix_s"] <= window["end_unix_s"] <= after
    assert window["end_unix_s"] - window["start_unix_s"] == pytest.approx(
        window["seconds"], abs=0.01
    )


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert perf_main(["produce"]) == 2  # a topic is required
    assert perf_main(["produce", "-r", "-5", "t"]) == 2
    assert perf_main(["--help"]) == 0
    assert "produce" in capsys.readouterr().out


def test_unreachable_broker_fails_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    from quasar.testing.process import free_port

    url = f"pulsar://127.0.0.1:{free_port()}"
    code = perf_main(["produce", "-u", url, "--operation-timeout", "2", "-m", "1", "t"])
    assert code == 1
    assert "error" in capsys.readouterr().err


def test_histogram_percentiles_match_sorted_samples() -> None:
    rng = random.Random(7)
    samples = [int(rng.lognormvariate(8, 1.5)) for _ in range(20_000)]
    hist = Histogram()
    for v in samples:
        hist.record(v)
    ordered = sorted(samples)
    for q in (50.0, 95.0, 99.0, 99.9, 100.0):
        exact = ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]
        got = hist.percentile(q)
        # Never below the exact value, at most one bucket (< 1/128) above it.
        assert exact <= got <= exact + exact / 128 + 1, (q, exact, got)
    assert hist.max == ordered[-1] and hist.min == ordered[0]
    assert Histogram.from_json(
        json.loads(json.dumps(hist.to_json()))
    ).percentiles() == (hist.percentiles())


@given(
    st.lists(
        st.one_of(
            st.floats(-1e3, 1e6, allow_nan=False),
            st.integers(0, 2**40).map(float),
        ),
        max_size=300,
    ),
    st.sampled_from([3_600_000_000, 1_000, 70_000]),
)
def test_histogram_record_many_equals_record_of_each(
    values: list[float], max_value: int
) -> None:
    one_by_one, grouped = Histogram(max_value), Histogram(max_value)
    one_by_one.record(5.0)  # grouped samples land on a histogram that has some
    grouped.record(5.0)
    for v in values:
        one_by_one.record(v)
    grouped.record_many(values)
    assert grouped.to_json() == one_by_one.to_json()


def test_recorder_record_many_counts_each_message() -> None:
    rec = Recorder()
    rec.start_measuring(0.0)  # nothing recorded yet: the window opens at a sample
    rec.record_many([], 0, 1.0, 1.0)  # no samples: no window start either
    assert rec.measure_start is None
    rec.record_many([1000.0, 2000.0, 3000.0], 3 * 1024, 10.0, 10.5)
    rec.record(4000.0, 1024, 11.0)
    snap = rec.fold()
    assert (snap.messages, snap.bytes, snap.latency_us.count) == (4, 4096, 4)
    assert rec.measure_start == 10.0 and rec.last_time == 11.0
    assert rec.window_seconds() == 1.0


def test_run_control_budget_in_chunks() -> None:
    control = RunControl(10)
    assert control.claim_many(4) == 4 and not control.stopped
    assert sum(1 for _ in control.grants(4)) == 6  # 4 + 2: no more than is left
    assert control.stopped and control.reason == LIMIT_REACHED
    assert control.claim_many(4) == 0 and not control.claim()


def test_run_control_grants_until_stopped() -> None:
    control = RunControl()
    taken = 0
    for _ in control.grants(8):
        taken += 1
        if taken == 3:
            control.stop("time limit reached")
    assert taken == 8  # what was granted is still handed out, then it ends
    assert control.reason == "time limit reached"


def test_run_control_limit_set_late() -> None:
    control = RunControl()
    assert all(control.claim() for _ in range(5))
    control.set_limit(7)
    assert control.claim() and not control.stopped
    assert control.claim() and control.stopped  # the last one: handled, then stop
    assert not control.claim()
    late = RunControl()
    late.claim_many(5)
    late.set_limit(5)  # already used up
    assert late.stopped


def test_rate_schedule_is_fixed_and_phased() -> None:
    a = RateSchedule(1000.0, start=10.0)
    b = RateSchedule(1000.0, start=10.0, phase=0.5)
    assert [a.next_due() for _ in range(3)] == pytest.approx([10.0, 10.001, 10.002])
    assert b.next_due() == pytest.approx(10.0005)
