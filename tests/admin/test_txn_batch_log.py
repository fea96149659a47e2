"""PIP-160 admin: /admin/v3/transactions batch-log switches and status, the
``quasar admin transactions`` commands, and ``GET /metrics``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.registry import CollectorRegistry

from quasar.admin import create_admin_app
from quasar.cli.main import main
from quasar.clock import ManualClock
from quasar.metrics import broker_registry
from quasar.resources.store import PulsarResources
from quasar.storage import MemoryManagedLedgerFactory, MemoryMetadataStore
from quasar.transaction.batched_log import BatchedLogs, BatchedWriteConfig

# ``quasar`` commands configure the root logger; each test gets it back as it was.
pytestmark = pytest.mark.usefixtures("restore_logging")

Client = TestClient[Any, Any]
BASE = "/admin/v3/transactions"


class Broker:
    """The admin broker as far as these routes look at it."""

    def __init__(self, logs: BatchedLogs | None) -> None:
        self.resources = PulsarResources(MemoryMetadataStore())
        self.cluster_name = "standalone"
        self.transaction_batched_logs = logs


@pytest.fixture
def metrics() -> CollectorRegistry:
    return broker_registry()


@pytest.fixture
async def logs(metrics: CollectorRegistry) -> AsyncIterator[BatchedLogs]:
    factory = MemoryManagedLedgerFactory(MemoryMetadataStore(), clock=ManualClock())
    logs = BatchedLogs(BatchedWriteConfig(), BatchedWriteConfig(enabled=True),
                       cluster="standalone", registry=metrics)
    ledgers = [await factory.open(f"t/ns/persistent/log{i}") for i in range(3)]
    writers = [
        logs.coordinator.new_writer(ledgers[0], "0", bytes),
        logs.coordinator.new_writer(ledgers[1], "1", bytes),
        logs.pending_ack.new_writer(ledgers[2], "persistent://public/default/t-sub", bytes),
    ]
    yield logs
    del writers
    logs.close()
    for ml in ledgers:
        await ml.close()
    await factory.close()


@pytest.fixture
async def client(logs: BatchedLogs, metrics: CollectorRegistry) -> AsyncIterator[Client]:
    app = create_admin_app(Broker(logs), metrics=metrics)  # type: ignore[arg-type]
    async with TestClient(TestServer(app)) as c:
        yield c


async def test_tc_batch_log_switch_and_status(client: Client) -> None:
    r = await client.get(f"{BASE}/txnTcBatchLogStat")
    assert r.status == 200
    assert await r.json() == {
        "txnTcBatchLogEnabled": False,
        "coodinatorArray": [{"0": False}, {"1": False}],
    }
    r = await client.post(f"{BASE}/txnTcBatchLog?enable=true")
    assert r.status == 204
    r = await client.get(f"{BASE}/txnTcBatchLogStat")
    assert await r.json() == {
        "txnTcBatchLogEnabled": True,
        "coodinatorArray": [{"0": True}, {"1": True}],
    }
    r = await client.post(f"{BASE}/txnTcBatchLog", json={"enable": False})
    assert r.status == 204
    assert (await (await client.get(f"{BASE}/txnTcBatchLogStat")).json())[
        "txnTcBatchLogEnabled"] is False


async def test_pending_ack_batch_log_switch_and_status(client: Client) -> None:
    r = await client.get(f"{BASE}/txnPendingAckBatchLogStat")
    assert await r.json() == {
        "txnPendingAckBatchLogEnabled": True,
        "subscriptionArray": [{"persistent://public/default/t-sub": True}],
    }
    r = await client.post(f"{BASE}/txnPendingAckBatchLog", data=b"false")
    assert r.status == 204
    r = await client.get(f"{BASE}/txnPendingAckBatchLogStat")
    assert await r.json() == {
        "txnPendingAckBatchLogEnabled": False,
        "subscriptionArray": [{"persistent://public/default/t-sub": False}],
    }


@pytest.mark.parametrize("query", ["?enable=yes", "", "?enable="])
async def test_bad_enable_is_400(client: Client, query: str) -> None:
    r = await client.post(f"{BASE}/txnTcBatchLog{query}")
    assert r.status == 400
    assert "enable" in (await r.json())["reason"]


async def test_without_transactions_is_not_allowed() -> None:
    app = create_admin_app(Broker(None))  # type: ignore[arg-type]
    async with TestClient(TestServer(app)) as c:
        r = await c.get(f"{BASE}/txnTcBatchLogStat")
        assert r.status == 405
        assert "not enabled" in (await r.json())["reason"]


async def test_metrics_route(client: Client) -> None:
    r = await client.get("/metrics")
    assert r.status == 200
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = await r.text()
    for name in (
        "pulsar_txn_tc_batched_log_records_count_per_entry",
        "pulsar_txn_tc_batched_log_entry_size_bytes",
        "pulsar_txn_tc_batched_log_oldest_record_delay_time_seconds",
        "pulsar_txn_tc_batched_log_triggering_count_by_records_total",
        "pulsar_txn_tc_batched_log_triggering_count_by_size_total",
        "pulsar_txn_tc_batched_log_triggering_count_by_delay_time_total",
        "pulsar_txn_tc_batched_log_triggering_count_by_force_total",
        "pulsar_pending_ack_batched_log_records_count_per_entry",
        "pulsar_pending_ack_batched_log_triggering_count_by_force_total",
    ):
        assert f"# TYPE {name} " in text
    assert ('pulsar_txn_tc_batched_log_triggering_count_by_records_total'
            '{cluster="standalone",coordinator_id="1"} 0.0') in text
    assert ('pulsar_pending_ack_batched_log_records_count_per_entry_bucket'
            '{cluster="standalone",le="+Inf"} 0.0') in text


# --- CLI ---------------------------------------------------------------------------


async def _cli(client: Client, *argv: str) -> int:
    url = str(client.server.make_url("")).rstrip("/")
    # JSON output: these tests read the API's answers back.
    args = ["--log-level", "WARNING", "admin", "--admin-url", url, "--output", "json",
            "transactions", *argv]
    return await asyncio.to_thread(main, args)


async def test_cli_commands(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    assert await _cli(client, "set-txn-tc-batch-log", "--enable", "true") == 0
    assert await _cli(client, "get-txn-tc-batch-log-stat") == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"txnTcBatchLogEnabled": True, "coodinatorArray": [{"0": True}, {"1": True}]}
    assert await _cli(client, "set-txn-pending-ack-batch-log", "--enable", "false") == 0
    assert await _cli(client, "get-txn-pending-ack-batch-log-stat") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["txnPendingAckBatchLogEnabled"] is False
    assert await _cli(client, "set-txn-tc-batch-log", "--enable", "maybe") != 0


async def test_cli_client_transactions_path(capsys: pytest.CaptureFixture[str]) -> None:
    """The command calls the PIP-255 route (served here by a stub) with the name
    encoded as one path segment."""
    seen: list[str] = []

    async def client_txns(request: web.Request) -> web.Response:
        seen.append(request.raw_path)
        return web.json_response([{"txnId": "(0,1)", "status": "COMMITTED"}])

    app = web.Application()
    app.router.add_get(f"{BASE}/clientTransactions/{{name}}", client_txns)
    async with TestClient(TestServer(app)) as stub:
        assert await _cli(stub, "client-transactions", "my client/1") == 0
    assert seen == [f"{BASE}/clientTransactions/my%20client%2F1"]
    assert json.loads(capsys.readouterr().out) == [{"txnId": "(0,1)", "status": "COMMITTED"}]
