"""The metrics registry and the Prometheus text exposition format (0.0.4)."""

from __future__ import annotations

import math

import pytest

from quasar.metrics import (
    Counter,
    Gauge,
    Histogram,
    MetricFamily,
    Registry,
    Sample,
    render,
)


def test_counter_and_gauge_lines() -> None:
    reg = Registry()
    c = Counter("jobs_done", "Jobs done.", ("kind",))
    g = Gauge("queue_depth", "Depth now")
    reg.register(c)
    reg.register(g)
    c.labels("a").inc()
    c.labels("a").inc(2.5)
    c.labels("b")
    g.labels().set(7)
    g.labels().dec(2)
    assert render(reg) == (
        "# HELP jobs_done Jobs done.\n"
        "# TYPE jobs_done counter\n"
        'jobs_done{kind="a"} 3.5\n'
        'jobs_done{kind="b"} 0.0\n'
        "# HELP queue_depth Depth now\n"
        "# TYPE queue_depth gauge\n"
        "queue_depth 5.0\n"
    )


def test_histogram_buckets_are_cumulative_with_inclusive_bounds() -> None:
    reg = Registry()
    h = Histogram("size_bytes", "Sizes", ("cluster",), buckets=[10, 100])
    reg.register(h)
    child = h.labels("c1")
    for v in (1, 10, 11, 100, 1000):
        child.observe(v)
    assert render(reg) == (
        "# HELP size_bytes Sizes\n"
        "# TYPE size_bytes histogram\n"
        'size_bytes_bucket{cluster="c1",le="10.0"} 2.0\n'
        'size_bytes_bucket{cluster="c1",le="100.0"} 4.0\n'
        'size_bytes_bucket{cluster="c1",le="+Inf"} 5.0\n'
        'size_bytes_sum{cluster="c1"} 1122.0\n'
        'size_bytes_count{cluster="c1"} 5.0\n'
    )


def test_fractional_buckets_and_no_labels() -> None:
    reg = Registry()
    h = Histogram("delay_seconds", "d", buckets=(0.001, 0.005, math.inf))
    reg.register(h)
    h.labels().observe(0.003)
    lines = render(reg).splitlines()
    assert lines[2:] == [
        'delay_seconds_bucket{le="0.001"} 0.0',
        'delay_seconds_bucket{le="0.005"} 1.0',
        'delay_seconds_bucket{le="+Inf"} 1.0',
        "delay_seconds_sum 0.003",
        "delay_seconds_count 1.0",
    ]


def test_escaping() -> None:
    reg = Registry()
    c = Counter("x", 'help with \\ and\nnewline "quoted"', ("path",))
    reg.register(c)
    c.labels('a\\b"c\nd').inc()
    assert render(reg).splitlines() == [
        '# HELP x help with \\\\ and\\nnewline "quoted"',
        "# TYPE x counter",
        'x{path="a\\\\b\\"c\\nd"} 1.0',
    ]


def test_custom_collectors_merge_by_family_name() -> None:
    reg = Registry()

    class Stats:
        def __init__(self, name: str, value: float) -> None:
            self.name, self.value = name, value

        def collect(self) -> list[MetricFamily]:
            return [MetricFamily("broker_topics", "gauge", "Topics",
                                 [Sample("broker_topics", (("broker", self.name),), self.value)])]

    reg.register(Stats("a", 1))
    reg.register(Stats("b", 2))
    text = render(reg)
    assert text.count("# TYPE broker_topics gauge") == 1
    assert 'broker_topics{broker="a"} 1.0\nbroker_topics{broker="b"} 2.0\n' in text
    reg.register(Counter("broker_topics", "clash"))
    with pytest.raises(ValueError, match="counter"):
        render(reg)


def test_register_unregister_and_remove() -> None:
    reg = Registry()
    c = Counter("c", "c", ("l",))
    reg.register(c)
    reg.register(c)
    c.labels("1").inc()
    assert render(reg).count("# TYPE c counter") == 1
    c.remove("1")
    assert render(reg) == "# HELP c c\n# TYPE c counter\n"
    reg.unregister(c)
    assert render(reg) == ""


@pytest.mark.parametrize(
    "make",
    [
        lambda: Counter("bad-name", "h"),
        lambda: Counter("9starts_with_digit", "h"),
        lambda: Counter("ok", "h", ("__reserved",)),
        lambda: Counter("ok", "h", ("a", "a")),
        lambda: Histogram("h", "h", ("le",), buckets=[1]),
        lambda: Histogram("h", "h", buckets=[5, 1]),
        lambda: Histogram("h", "h", buckets=[]),
    ],
)
def test_invalid_definitions(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def test_misuse() -> None:
    c = Counter("c", "c", ("a", "b"))
    with pytest.raises(ValueError):
        c.labels("only-one")
    with pytest.raises(ValueError):
        c.labels("1", "2").inc(-1)


def test_special_values() -> None:
    reg = Registry()
    g = Gauge("g", "g", ("k",))
    reg.register(g)
    g.labels("inf").set(math.inf)
    g.labels("ninf").set(-math.inf)
    g.labels("nan").set(math.nan)
    assert render(reg).splitlines()[2:] == [
        'g{k="inf"} +Inf', 'g{k="ninf"} -Inf', 'g{k="nan"} NaN',
    ]


def test_pip160_families() -> None:
    from quasar.transaction.batched_log.metrics import (
        coordinator_log_metrics,
        pending_ack_log_metrics,
    )

    reg = Registry()
    tc, pa = coordinator_log_metrics(), pending_ack_log_metrics()
    reg.register(tc)
    reg.register(pa)
    tc.child("standalone", "0").batch_written(None, 12, 700, 0.5)
    pa.child("standalone")
    text = render(reg)
    assert ('pulsar_txn_tc_batched_log_entry_size_bytes_bucket'
            '{cluster="standalone",coordinator_id="0",le="1024.0"} 1.0') in text
    assert ('pulsar_txn_tc_batched_log_records_count_per_entry_bucket'
            '{cluster="standalone",coordinator_id="0",le="10.0"} 0.0') in text
    assert ('pulsar_txn_tc_batched_log_records_count_per_entry_bucket'
            '{cluster="standalone",coordinator_id="0",le="50.0"} 1.0') in text
    buckets = [line.split('le="')[1].split('"')[0] for line in text.splitlines()
               if line.startswith("pulsar_pending_ack_batched_log_entry_size_bytes_bucket")]
    assert buckets == ["128.0", "512.0", "1024.0", "2048.0", "4096.0", "16384.0",
                       "102400.0", "1232896.0", "+Inf"]
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    for prefix in ("pulsar_txn_tc", "pulsar_pending_ack"):
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
            assert name in names
            assert f"# TYPE {name} {kind}" in text
