"""The memory soak (``quasar.testing.soak``) at test scale, with both clients: sixteen
times the entry cache published past a consumer that never reads and one stopped at
its unacked limit; the broker's RSS stays within what its settings allow, far below
the bytes published, and both consumers then read everything in order."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from quasar.testing.process import BrokerProcess
from quasar.testing.soak import SoakPlan, run_soak

PLAN = SoakPlan()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("soak") / "data"
    proc = BrokerProcess(data, settings=PLAN.broker_settings()).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


@pytest.mark.parametrize("client", ["pulsar", "quasar.client"])
def test_memory_is_flat_past_stalled_consumers(broker: BrokerProcess, client: str) -> None:
    topic = f"persistent://public/default/soak-{uuid.uuid4().hex[:8]}"
    report = run_soak(broker, importlib.import_module(client), topic, PLAN)
    print("\n" + "\n".join(report.lines()))
    bound = PLAN.memory_bound_bytes()
    # The bound is what the settings let the broker hold; the test means something
    # only while it is well below what was published.
    assert bound < report.published_bytes / 3
    assert report.growth_bytes < bound, report.lines()
