"""The broker registry and its exposition: names, types, formats, negotiation."""

from __future__ import annotations

import math

import pytest
from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families as parse_text
from prometheus_client.registry import Collector, CollectorRegistry

from quasar.metrics import broker_registry, exposition
from quasar.transaction.batched_log.metrics import (
    Trigger,
    coordinator_log_metrics,
    pending_ack_log_metrics,
)
from quasar.transaction.coordinator.preserver import PreserverStats
from quasar.transaction.coordinator.preserver_metrics import PreserverMetrics

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class _Fixed(Collector):
    def __init__(self, *families: GaugeMetricFamily) -> None:
        self.families = families

    def collect(self) -> list[GaugeMetricFamily]:
        return list(self.families)


def _text(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def _populated() -> CollectorRegistry:
    """A broker registry with every collector quasar registers, each with a series."""
    registry = broker_registry()
    tc, pa = coordinator_log_metrics(), pending_ack_log_metrics()
    tc.child("standalone", "0").batch_written(Trigger.RECORDS, 12, 700, 0.5)
    tc.child("standalone", "0").written(12)
    pa.child("standalone").forced()
    stats = PreserverStats()
    stats.appends = 3
    stats.flush_latency.observe(0.002)
    registry.register(tc)
    registry.register(pa)
    registry.register(PreserverMetrics("standalone", lambda: [(0, stats)]))
    return registry


def test_plain_text_unless_openmetrics_is_accepted() -> None:
    registry = _populated()
    for accept in (None, "", "text/plain", "*/*", "application/json"):
        body, content_type = exposition(registry, accept)
        assert content_type == CONTENT_TYPE_PLAIN_0_0_4
        assert content_type == "text/plain; version=0.0.4; charset=utf-8"
        assert not body.decode().endswith("# EOF\n")
    prometheus = (
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
        "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    )
    body, content_type = exposition(registry, prometheus)
    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    assert body.decode().endswith("# EOF\n")


def test_both_formats_parse_with_the_same_series() -> None:
    """Every family quasar exports is valid in both formats (the library's parsers
    accept it), and the series names are the same in both."""
    registry = _populated()
    text, _ = exposition(registry, None)
    om, _ = exposition(registry, OPENMETRICS)

    def names(families: object) -> set[str]:
        return {s.name for f in families for s in f.samples  # type: ignore[attr-defined]
                if not s.name.startswith(("process_", "python_"))
                and not s.name.endswith("_created")}

    text_names = names(parse_text(text.decode()))
    assert text_names == names(parse_openmetrics(om.decode()))
    assert "pulsar_txn_tc_batched_log_triggering_count_by_records_total" in text_names
    assert "pulsar_txn_tc_preserver_appends_total" in text_names
    assert "quasar_txn_tc_log_records_written_total" in text_names


def test_no_created_series_for_quasars_metrics() -> None:
    text = _text(_populated())
    created = [line for line in text.splitlines()
               if "_created" in line and not line.startswith("#")]
    assert created == []


def test_process_and_native_series() -> None:
    text = _text(broker_registry())
    assert "# TYPE process_cpu_seconds_total counter" in text
    assert "# TYPE python_info gauge" in text
    assert "# TYPE quasar_native_extension_active gauge" in text
    assert 'quasar_native_extension_active{extension="_syncio"}' in text
    assert 'quasar_native_extension_active{extension="_batchsplit"}' in text


def test_each_broker_has_its_own_registry() -> None:
    a, b = broker_registry(), broker_registry()
    a.register(coordinator_log_metrics())
    b.register(coordinator_log_metrics())  # no clash: another broker's registry
    assert "pulsar_txn_tc_batched_log_entry_size_bytes" not in _text(broker_registry())


def test_one_name_cannot_be_registered_twice() -> None:
    registry = broker_registry()
    registry.register(coordinator_log_metrics())
    with pytest.raises(ValueError, match="Duplicated"):
        registry.register(coordinator_log_metrics())


def test_histogram_buckets_are_cumulative_with_inclusive_bounds() -> None:
    registry = CollectorRegistry()
    metrics = pending_ack_log_metrics()
    registry.register(metrics)
    stats = metrics.child("c1")
    for records in (1, 10, 11, 50, 1000, 5000):
        stats.batch_written(None, records, 1, 0.0)
    p = "pulsar_pending_ack_batched_log_records_count_per_entry"
    lines = _text(registry).splitlines()
    for line in (
        f'{p}_bucket{{cluster="c1",le="10.0"}} 2.0',
        f'{p}_bucket{{cluster="c1",le="50.0"}} 4.0',
        f'{p}_bucket{{cluster="c1",le="1000.0"}} 5.0',
        f'{p}_bucket{{cluster="c1",le="+Inf"}} 6.0',
        f'{p}_sum{{cluster="c1"}} 6072.0',
        f'{p}_count{{cluster="c1"}} 6.0',
    ):
        assert line in lines, line


def test_fractional_buckets() -> None:
    registry = CollectorRegistry()
    metrics = pending_ack_log_metrics()
    registry.register(metrics)
    metrics.child("c").batch_written(None, 1, 1, 3.0)  # 3 ms
    p = "pulsar_pending_ack_batched_log_oldest_record_delay_time_seconds"
    lines = _text(registry).splitlines()
    assert [line for line in lines if line.startswith(p)] == [
        f'{p}_bucket{{cluster="c",le="0.001"}} 0.0',
        f'{p}_bucket{{cluster="c",le="0.005"}} 1.0',
        f'{p}_bucket{{cluster="c",le="0.01"}} 1.0',
        f'{p}_bucket{{cluster="c",le="+Inf"}} 1.0',
        f'{p}_count{{cluster="c"}} 1.0',
        f'{p}_sum{{cluster="c"}} 0.003',
    ]


def test_removed_writer_leaves_only_the_headers() -> None:
    registry = CollectorRegistry()
    metrics = coordinator_log_metrics()
    registry.register(metrics)
    metrics.child("c", "1").written(3)
    assert 'quasar_txn_tc_log_records_written_total{cluster="c",coordinator_id="1"} 3.0' in (
        _text(registry)
    )
    metrics.remove("c", "1")
    text = _text(registry)
    assert 'coordinator_id="1"' not in text
    assert "# TYPE quasar_txn_tc_log_records_written_total counter" in text
    registry.unregister(metrics)
    assert _text(registry) == ""


def test_child_needs_one_value_per_label() -> None:
    with pytest.raises(ValueError):
        coordinator_log_metrics().child("only-the-cluster")


def test_escaping_and_special_values() -> None:
    family = GaugeMetricFamily("g", 'help with \\ and\nnewline "quoted"', labels=["k"])
    family.add_metric(['a\\b"c\nd'], 1)
    family.add_metric(["inf"], math.inf)
    family.add_metric(["ninf"], -math.inf)
    family.add_metric(["nan"], math.nan)
    registry = CollectorRegistry()
    registry.register(_Fixed(family))
    assert _text(registry).splitlines() == [
        '# HELP g help with \\\\ and\\nnewline "quoted"',
        "# TYPE g gauge",
        'g{k="a\\\\b\\"c\\nd"} 1.0',
        'g{k="inf"} +Inf',
        'g{k="ninf"} -Inf',
        'g{k="nan"} NaN',
    ]


def test_pip160_families() -> None:
    registry = CollectorRegistry()
    tc, pa = coordinator_log_metrics(), pending_ack_log_metrics()
    registry.register(tc)
    registry.register(pa)
    tc.child("standalone", "0").batch_written(None, 12, 700, 0.5)
    pa.child("standalone")
    text = _text(registry)
    assert ('pulsar_txn_tc_batched_log_entry_size_bytes_bucket'
            '{cluster="standalone",coordinator_id="0",le="1024.0"} 1.0') in text
    assert ('pulsar_txn_tc_batched_log_records_count_per_entry_bucket'
            '{cluster="standalone",coordinator_id="0",le="10.0"} 0.0') in text
    assert ('pulsar_txn_tc_batched_log_records_count_per_entry_bucket'
            '{cluster="standalone",coordinator_id="0",le="50.0"} 1.0') in text
    buckets = [line.split('le="')[1].split('"')[0] for line in text.splitlines()
               if line.startswith("pulsar_pending_ack_batched_log_entry_size_bytes_bucket")]
    # prometheus_client writes bounds from 1e6 up as Go does ("1.232896e+06"); every
    # Prometheus parses the ``le`` value as a number.
    assert buckets == ["128.0", "512.0", "1024.0", "2048.0", "4096.0", "16384.0",
                       "102400.0", "1.232896e+06", "+Inf"]
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    for prefix in ("pulsar_txn_tc", "pulsar_pending_ack"):
        # The triggering counts are counters: in the text format 0.0.4 the family and
        # its samples carry ``_total``, as Prometheus client libraries write counters.
        for suffix, kind in (
            ("records_count_per_entry", "histogram"),
            ("entry_size_bytes", "histogram"),
            ("oldest_record_delay_time_seconds", "histogram"),
            ("triggering_count_by_records", "counter"),
            ("triggering_count_by_size", "counter"),
            ("triggering_count_by_delay_time", "counter"),
            ("triggering_count_by_force", "counter"),
        ):
            name = f"{prefix}_batched_log_{suffix}"
            if kind == "counter":
                name += "_total"
            assert name in names
            assert f"# TYPE {name} {kind}" in text
    assert ('pulsar_txn_tc_batched_log_triggering_count_by_records_total'
            '{cluster="standalone",coordinator_id="0"} 0.0') in text
