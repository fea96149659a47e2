"""``GET /metrics`` on the admin app: the broker's own registry, negotiated format."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.registry import CollectorRegistry

from quasar.admin import create_admin_app
from quasar.metrics import broker_registry
from quasar.resources.store import PulsarResources
from quasar.storage import MemoryMetadataStore
from quasar.transaction.batched_log.metrics import coordinator_log_metrics

PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


class _Broker:
    def __init__(self) -> None:
        self.resources = PulsarResources(MemoryMetadataStore())
        self.cluster_name = "standalone"


def _registry() -> CollectorRegistry:
    registry = broker_registry()
    metrics = coordinator_log_metrics()
    metrics.child("standalone", "0").written(4)
    registry.register(metrics)
    return registry


async def _get(registry: CollectorRegistry | None, headers: dict[str, str]) -> Any:
    app = create_admin_app(_Broker(), metrics=registry)  # type: ignore[arg-type]
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/metrics", headers=headers)
        assert r.status == 200
        return r.headers["Content-Type"], await r.text()


async def test_text_format_by_default() -> None:
    content_type, text = await _get(_registry(), {})
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert ('quasar_txn_tc_log_records_written_total'
            '{cluster="standalone",coordinator_id="0"} 4.0') in text
    assert "# EOF" not in text


async def test_openmetrics_when_the_scraper_asks() -> None:
    content_type, text = await _get(_registry(), {"Accept": PROMETHEUS_ACCEPT})
    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    assert "# TYPE quasar_txn_tc_log_records_written counter" in text
    assert text.endswith("# EOF\n")


async def test_without_a_broker_registry_the_process_series_are_served() -> None:
    _, text = await _get(None, {})
    assert "process_cpu_seconds_total" in text
    assert "quasar_native_extension_active" in text
    assert "pulsar_txn_tc" not in text
