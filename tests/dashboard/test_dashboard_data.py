"""``GET /admin/v2/quasar/dashboard`` and the page's assets, without a browser: the
snapshot of a real broker process (topics, subscriptions, an open transaction and
the topic it holds back), the assets' security headers, the 503 of an app with no
broker behind it, and the assets shipping as package data."""

from __future__ import annotations

import json
import tomllib
import urllib.request
import uuid
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import quasar.client as pulsar
from quasar.admin import create_admin_app
from quasar.admin.dashboard import DASHBOARD_ASSET_PATHS, DATA_PATH
from quasar.resources.store import PulsarResources
from quasar.testing.process import BrokerProcess

from ..admin.conftest import FakeAdminBroker, FakeMetadataStore

ROOT = Path(__file__).resolve().parents[2]
HANGING_TIMEOUT_MS = 3_600_000


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = pulsar.Client(broker.url, operation_timeout_seconds=10, enable_transaction=True)
    yield c
    c.close()


def snapshot(broker: BrokerProcess) -> dict[str, Any]:
    with urllib.request.urlopen(broker.admin_url + DATA_PATH, timeout=30) as resp:
        assert resp.status == 200
        return dict(json.loads(resp.read()))


def test_the_snapshot_shows_topics_subscriptions_and_a_held_back_topic(
    broker: BrokerProcess, client: pulsar.Client
) -> None:
    topic = f"persistent://public/default/snap-{uuid.uuid4().hex[:8]}"
    consumer = client.subscribe(topic, "reader", initial_position=pulsar.InitialPosition.Earliest)
    client.subscribe(topic, "gone").close()
    producer = client.create_producer(topic)
    txn = client.new_transaction(timeout_ms=HANGING_TIMEOUT_MS)
    producer.send(b"in-txn", txn=txn)
    producer.send(b"after")
    most, least = txn.id()

    data = snapshot(broker)
    assert data["broker"]["state"] == "ready"
    assert data["broker"]["statsUpdateFrequencyInSecs"] == 1
    assert data["totals"]["connections"] >= 1
    assert data["totals"]["producers"] >= 1
    row = next(t for t in data["topics"] if t["topic"] == topic)
    assert row["system"] is False and row["producerCount"] == 1
    assert row["storageSize"] > 0
    subs = {s["name"]: s for s in row["subscriptions"]}
    assert subs["reader"]["consumerCount"] == 1 and subs["reader"]["type"] == "Exclusive"
    assert subs["gone"]["consumerCount"] == 0
    # Both entries are after the max-read position: the whole backlog waits.
    assert subs["gone"]["msgBacklog"] == 2
    open_txn = next(t for t in data["transactions"]["open"] if t["txnId"] == f"({most},{least})")
    assert (open_txn["mostSigBits"], open_txn["leastSigBits"]) == (most, least)
    assert open_txn["status"] == "OPEN" and open_txn["producedPartitions"] == [topic]
    assert open_txn["timeoutAt"] - open_txn["openTimestamp"] == HANGING_TIMEOUT_MS
    assert data["transactions"]["coordinators"] == [
        {"id": 0, "loaded": True, "activeCount": len(data["transactions"]["open"])}
    ]
    held = next(h for h in data["heldBack"] if h["topic"] == topic)
    assert held["heldBackEntries"] == 2 and held["ongoingTxnCount"] == 1
    ages = [t["ageMs"] for t in data["transactions"]["open"]]
    assert ages == sorted(ages, reverse=True), "oldest first"

    txn.abort()
    assert consumer.receive(30_000).data() == b"after"
    data = snapshot(broker)
    assert all(h["topic"] != topic for h in data["heldBack"])
    assert all(t["txnId"] != f"({most},{least})" for t in data["transactions"]["open"])
    producer.close()
    consumer.close()


def test_assets_carry_a_content_security_policy(broker: BrokerProcess) -> None:
    for path in sorted(DASHBOARD_ASSET_PATHS):
        with urllib.request.urlopen(broker.admin_url + path, timeout=30) as resp:
            assert resp.status == 200, path
            policy = resp.headers["Content-Security-Policy"]
            assert "script-src 'self'" in policy and "default-src 'none'" in policy
            assert resp.headers["X-Content-Type-Options"] == "nosniff"


async def test_the_data_answers_503_without_a_broker() -> None:
    admin_resources = PulsarResources(FakeMetadataStore())
    admin_resources.bootstrap_standalone("standalone")
    app = create_admin_app(FakeAdminBroker(admin_resources))
    async with TestClient(TestServer(app)) as http:
        resp = await http.get(DATA_PATH)
        assert resp.status == 503
        assert (await resp.json())["reason"] == "Broker is not ready"
        assert (await http.get("/")).status == 200
        assert (await http.get("/dashboard/other.js")).status == 404


def test_every_asset_ships_as_package_data() -> None:
    static = resources.files("quasar.admin").joinpath("dashboard_static")
    names = sorted(p.name for p in static.iterdir())
    assert names == ["app.css", "app.js", "chart.js", "favicon.svg", "index.html"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "admin/dashboard_static/*" in pyproject["tool"]["setuptools"]["package-data"]["quasar"]
