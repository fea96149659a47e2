"""The Grafana dashboard (``docs/grafana/quasar.json``) and the Prometheus alerting
rules (``docs/grafana/alerts.yml``) only name metrics a real broker exports.

Every PromQL expression of every panel, template variable and alerting rule is
tokenized down to the metric names it selects; a real broker process then runs a
workload that makes every family exist (a transaction kept open, one that
acknowledges on a subscription and commits, a subscription with a backlog, a backlog
quota, a connection refused by token authentication), and each name, with the labels
its selectors match on, must appear in its ``/metrics``. A renamed metric therefore
breaks this test instead of leaving an empty panel. ``rate()`` and ``increase()``
may only read counters: real ones, or the Pulsar series that count since the topic or
coordinator loaded but are printed as gauges (``PULSAR_GAUGE_COUNTERS``); never a
rate the broker already computed (``pulsar_rate_in``) or a per-interval bucket.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import quasar.client as pulsar
from quasar.auth.tokens import create_token
from quasar.errors import AuthenticationError
from quasar.testing.process import BrokerProcess
from quasar.testing.secured import token_settings

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana" / "quasar.json"
ALERTS = ROOT / "docs" / "grafana" / "alerts.yml"
WAIT_S = 30.0
HANGING_TIMEOUT_MS = 3_600_000
# Authentication is on so that the authentication series exist too.
SECRET = b"grafana-dashboard-test-secret-key"
TOKEN = create_token("ops", SECRET)

# PromQL's functions and aggregation operators: an identifier followed by "(" must be
# one of these (so a typo is reported, not taken for a metric).
PROMQL_FUNCTIONS = frozenset("""
    abs absent absent_over_time avg_over_time ceil changes clamp clamp_max clamp_min
    count_over_time day_of_month day_of_week day_of_year days_in_month delta deriv exp
    floor histogram_avg histogram_count histogram_fraction histogram_quantile
    histogram_stddev histogram_stdvar histogram_sum holt_winters hour idelta increase
    irate label_join label_replace last_over_time ln log10 log2 mad_over_time
    max_over_time min_over_time minute month predict_linear present_over_time
    quantile_over_time rate resets round scalar sgn sort sort_desc sqrt stddev_over_time
    stdvar_over_time sum_over_time time timestamp vector year
    sum min max avg group stddev stdvar count count_values bottomk topk quantile
""".split())
PROMQL_KEYWORDS = frozenset(
    "and or unless by without on ignoring group_left group_right bool offset inf nan".split()
)
# Clauses whose parenthesised lists hold label names, not metrics.
_LABEL_LIST = re.compile(
    r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", re.I
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NUMBER = re.compile(r"(?<![\w:])(?:0x[0-9a-f]+|\d+(?:\.\d*)?(?:e[+-]?\d+)?)", re.I)
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = frozenset({"instance", "job"})
_RATE_ARG = re.compile(r"\b(?:rate|irate|increase)\s*\(\s*([A-Za-z_:][A-Za-z0-9_:]*)")

# Series Pulsar prints as gauges although they only grow while the topic, connection
# listener or coordinator stays loaded: rate() and increase() read them correctly (a
# reload is a counter reset). Per-interval counts such as pulsar_storage_write_latency_count
# are not among them.
PULSAR_GAUGE_COUNTERS = frozenset({
    "pulsar_in_messages_total", "pulsar_in_bytes_total",
    "pulsar_out_messages_total", "pulsar_out_bytes_total",
    "pulsar_subscription_total_msg_expired",
    "pulsar_storage_backlog_quota_exceeded_evictions_total",
    "pulsar_txn_created_total", "pulsar_txn_committed_total", "pulsar_txn_aborted_total",
    "pulsar_txn_timeout_total", "pulsar_txn_append_log_total",
    "pulsar_txn_tb_committed_total", "pulsar_txn_tb_aborted_total",
    "pulsar_connection_created_total_count", "pulsar_connection_closed_total_count",
    "pulsar_connection_create_success_count", "pulsar_connection_create_fail_count",
})


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana's ``$variables`` allowed)."""
    text = _STRING.sub('""', expr)
    text = re.sub(r"\$\{[^}]*\}|\$\w+", "", text)  # Grafana variables
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range and subquery durations
    text = re.sub(r"\boffset\s+-?\w+", " ", text)
    text = _LABEL_LIST.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    names = set()
    for match in _IDENT.finditer(text):
        word = match.group()
        if word.lower() in PROMQL_KEYWORDS:
            continue
        if text[match.end():].lstrip().startswith("("):
            assert word in PROMQL_FUNCTIONS, f"unknown PromQL function {word!r} in {expr!r}"
        else:
            names.add(word)
    return names


def matched_labels(expr: str) -> dict[str, set[str]]:
    """``{metric: label names its selectors match on}``."""
    out: dict[str, set[str]] = {}
    for name, matchers in _SELECTOR.findall(_STRING.sub('""', expr)):
        out.setdefault(name, set()).update(_MATCHER_LABEL.findall(matchers))
    return out


def variable_expr(query: str) -> str:
    """The PromQL inside a Grafana Prometheus variable query."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_]\w*)\s*\)\s*", query, re.S)
    if m:
        return m.group(1)
    m = re.fullmatch(r"\s*(?:query_result|label_names)\((.*)\)\s*", query, re.S)
    if m:
        return m.group(1)
    raise AssertionError(f"variable query not understood: {query!r}")


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))  # panels of a collapsed row
    return out


def dashboard_exprs(dashboard: dict[str, Any]) -> dict[str, str]:
    """``{where: PromQL}`` over every panel target and every query variable."""
    exprs = {}
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            exprs[f"panel {panel['title']!r} target {target['refId']}"] = target["expr"]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]
            query = query["query"] if isinstance(query, dict) else query
            exprs[f"variable {var['name']}"] = variable_expr(query)
    return exprs


def alert_exprs(rules_file: dict[str, Any]) -> dict[str, str]:
    return {
        f"alert {rule['alert']}": rule["expr"]
        for group in rules_file["groups"] for rule in group["rules"]
    }


# -- the tokenizer -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (topic) (pulsar_rate_in{cluster=~"$cluster", topic=~"a|b"})',
         {"pulsar_rate_in"}),
        ("histogram_quantile(0.99, sum by (instance, le) "
         "(rate(quasar_storage_fsync_latency_seconds_bucket[$__rate_interval])))",
         {"quasar_storage_fsync_latency_seconds_bucket"}),
        ("a_total / on (topic) group_left (subscription) b offset 5m > 1e3 and bool c",
         {"a_total", "b", "c"}),
        ('label_replace(up, "dst", "x", "src", "(.*)") unless ${other} * 2',
         {"up"}),
        ("max by (topic) (x) and on (topic) (max by (topic) (y) > 0)", {"x", "y"}),
    ],
)
def test_the_tokenizer_keeps_metric_names_only(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_tokenizer_reports_unknown_functions() -> None:
    with pytest.raises(AssertionError, match="unknown PromQL function 'rat'"):
        metric_names("rat(x[5m])")


def test_selectors_are_read_for_their_label_names() -> None:
    expr = 'sum(a{cluster=~"$cluster", topic!="x{y}"}) / b{quantile="0.99"} + c'
    assert matched_labels(expr) == {"a": {"cluster", "topic"}, "b": {"quantile"}}


def test_variable_queries_are_read_as_their_selector() -> None:
    assert variable_expr('label_values(m{cluster=~"$cluster"}, topic)') == 'm{cluster=~"$cluster"}'


# -- the files, without a broker -------------------------------------------------------
def test_dashboard_is_importable_with_a_prometheus_input() -> None:
    dashboard = load_dashboard()
    assert [(i["name"], i["type"], i["pluginId"]) for i in dashboard["__inputs"]] == [
        ("DS_PROMETHEUS", "datasource", "prometheus")
    ]
    assert dashboard["schemaVersion"] >= 36 and dashboard["uid"] and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert list(variables) == ["cluster", "namespace", "topic", "subscription"]
    for var in variables.values():
        assert var["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert var["definition"].startswith("label_values(")
    ids = [p["id"] for p in all_panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_every_panel_has_a_title_and_a_datasource() -> None:
    for panel in all_panels(load_dashboard()):
        assert panel.get("title"), panel
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, panel
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            assert target.get("datasource", panel["datasource"]) == panel["datasource"]
            assert target["expr"].strip(), (panel["title"], target)


def test_alerting_rules_have_prometheus_structure() -> None:
    """What ``promtool check rules`` checks first, as far as structure goes."""
    rules_file = yaml.safe_load(ALERTS.read_text())
    assert set(rules_file) == {"groups"}
    names = [g["name"] for g in rules_file["groups"]]
    assert len(names) == len(set(names)), "group names must be unique"
    duration = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
    for group in rules_file["groups"]:
        assert set(group) <= {"name", "interval", "limit", "rules"}, group.keys()
        assert group["rules"], group["name"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels",
                                 "annotations"}, rule
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"]), rule["alert"]
            assert isinstance(rule["expr"], str) and rule["expr"].strip()
            if "for" in rule:
                assert duration.match(rule["for"]), rule["for"]
            for key in ("labels", "annotations"):
                mapping = rule.get(key, {})
                assert all(isinstance(k, str) and isinstance(v, str)
                           for k, v in mapping.items()), (rule["alert"], key)
            assert rule.get("labels", {}).get("severity") in {"info", "warning", "critical"}


# -- against a real broker -------------------------------------------------------------
@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("grafana") / "data",
        settings={"statsUpdateFrequencyInSecs": "1", **token_settings(SECRET)},
    ).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def admin_post(broker: BrokerProcess, path: str, body: Any) -> None:
    req = urllib.request.Request(
        broker.admin_url + path, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status in (200, 204)


def scrape(broker: BrokerProcess) -> tuple[dict[str, set[str]], dict[str, str]]:
    """The sample names of ``/metrics`` with the label names each carries, and the
    type of each family by sample name."""
    with urllib.request.urlopen(broker.admin_url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    samples: dict[str, set[str]] = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, set()).update(sample.labels)
            types[sample.name] = family.type
    return samples, types


@pytest.fixture(scope="module")
def workload(broker: BrokerProcess) -> Iterator[None]:
    """A subscription with a backlog, a transaction left open on a topic, one that
    acknowledges on a subscription and commits, a backlog quota, and a connection
    refused for a bad token."""
    admin_post(broker, "/admin/v2/namespaces/public/default/backlogQuota",
               {"limitSize": 100_000_000, "limitTime": -1, "policy": "producer_request_hold"})
    intruder = pulsar.Client(
        broker.url, operation_timeout_seconds=10,
        authentication=pulsar.AuthenticationToken(create_token("ops", b"not-the-key" * 3)),
    )
    with pytest.raises(AuthenticationError):
        intruder.create_producer("persistent://public/default/grafana-workload")
    intruder.close()
    client = pulsar.Client(
        broker.url, operation_timeout_seconds=10, enable_transaction=True,
        authentication=pulsar.AuthenticationToken(TOKEN),
    )
    topic = "persistent://public/default/grafana-workload"
    client.subscribe(topic, "lagging", initial_position=pulsar.InitialPosition.Earliest).close()
    consumer = client.subscribe(topic, "done", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(f"m-{i}".encode())
    acking = client.new_transaction()
    consumer.acknowledge(consumer.receive(timeout_millis=10_000), txn=acking)
    acking.commit()
    hanging = client.new_transaction(timeout_ms=HANGING_TIMEOUT_MS)
    producer.send(b"held", txn=hanging)
    yield
    hanging.abort()
    client.close()


def missing_names(
    wanted: dict[str, str], samples: dict[str, set[str]], types: dict[str, str]
) -> list[str]:
    missing = []
    for where, expr in wanted.items():
        for name in sorted(metric_names(expr)):
            # A histogram or summary may be named by its family too.
            as_family = any(
                types.get(name + suffix) in ("histogram", "summary")
                for suffix in ("_bucket", "_count", "_sum")
            )
            if name not in samples and not as_family:
                missing.append(f"{where}: {name}")
        for name, labels in matched_labels(expr).items():
            unknown = labels - samples.get(name, set()) - TARGET_LABELS
            if name in samples and unknown:
                missing.append(f"{where}: {name} has no label {sorted(unknown)}")
    return missing


def test_every_metric_the_dashboard_and_alerts_name_is_exported(
    broker: BrokerProcess, workload: None
) -> None:
    wanted = {**dashboard_exprs(load_dashboard()),
              **alert_exprs(yaml.safe_load(ALERTS.read_text()))}
    assert len(wanted) > 50
    deadline = time.monotonic() + WAIT_S
    # Series appear as the workload's effects land (a committed transaction's
    # pending-ack series once its end reached the subscription): scrape until
    # every name is there, or report the ones still missing.
    while True:
        samples, types = scrape(broker)
        missing = missing_names(wanted, samples, types)
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not missing, "names and labels no broker exports:\n" + "\n".join(missing)


def test_rates_are_taken_of_counters_only(broker: BrokerProcess, workload: None) -> None:
    wanted = {**dashboard_exprs(load_dashboard()),
              **alert_exprs(yaml.safe_load(ALERTS.read_text()))}
    _, types = scrape(broker)
    wrong = []
    for where, expr in wanted.items():
        for name in _RATE_ARG.findall(expr):
            counter = types.get(name) in ("counter", "histogram", "summary")
            if not counter and name not in PULSAR_GAUGE_COUNTERS:
                wrong.append(f"{where}: rate of {name} ({types.get(name)})")
    assert not wrong, "\n".join(wrong)
