"""pulsar_txn_tc_preserver_* from the preservers' stats, in the Prometheus exposition."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from quasar.transaction.coordinator.preserver import PreserverStats
from quasar.transaction.coordinator.preserver_metrics import PreserverMetrics


def test_exposition_per_coordinator() -> None:
    a, b = PreserverStats(), PreserverStats()
    a.entries, a.client_names, a.appends, a.flushes, a.expirations = 5, 2, 7, 3, 2
    a.flush_latency.observe(0.003)
    a.flush_latency.observe(40.0)
    b.trimmed = 4
    registry = CollectorRegistry()
    registry.register(PreserverMetrics("standalone", lambda: [(1, b), (0, a)]))
    text = generate_latest(registry).decode()
    lines = set(text.splitlines())
    zero = 'cluster="standalone",coordinator_id="0"'
    one = 'cluster="standalone",coordinator_id="1"'
    assert "# TYPE pulsar_txn_tc_preserver_entries gauge" in lines
    assert "# TYPE pulsar_txn_tc_preserver_appends_total counter" in lines
    assert "# TYPE pulsar_txn_tc_preserver_flush_latency_seconds histogram" in lines
    assert f"pulsar_txn_tc_preserver_entries{{{zero}}} 5.0" in lines
    assert f"pulsar_txn_tc_preserver_client_names{{{zero}}} 2.0" in lines
    assert f"pulsar_txn_tc_preserver_appends_total{{{zero}}} 7.0" in lines
    assert f"pulsar_txn_tc_preserver_expirations_total{{{zero}}} 2.0" in lines
    assert f"pulsar_txn_tc_preserver_trimmed_total{{{one}}} 4.0" in lines
    assert f'pulsar_txn_tc_preserver_flush_latency_seconds_bucket{{{zero},le="0.005"}} 1.0' in lines
    assert f'pulsar_txn_tc_preserver_flush_latency_seconds_bucket{{{zero},le="+Inf"}} 2.0' in lines
    assert f"pulsar_txn_tc_preserver_flush_latency_seconds_count{{{zero}}} 2.0" in lines
    assert f"pulsar_txn_tc_preserver_flush_latency_seconds_sum{{{zero}}} 40.003" in lines


def test_no_coordinator_loaded_exports_only_headers() -> None:
    registry = CollectorRegistry()
    registry.register(PreserverMetrics("c", lambda: []))
    text = generate_latest(registry).decode()
    assert "pulsar_txn_tc_preserver_entries{" not in text
