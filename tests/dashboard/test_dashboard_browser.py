"""The web dashboard at ``/`` in a real headless Chromium against a real broker:
the page loads without script errors, its charts move while ``quasar perf``
produces, a stuck subscription is highlighted, a hanging transaction is aborted
from the page and the blocked reader receives what was behind it, and a topic named
like markup is shown as text.

Set ``QUASAR_DASHBOARD_SCREENSHOT=docs/images/dashboard.png`` to save the
transactions view with its open transaction (the picture in docs/operations.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client as pulsar
from quasar.testing.process import BrokerProcess

from . import conftest as browser_setup

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
except ImportError:  # reported by require_browser
    pass

Wait = Callable[[Callable[[Any], Any], str], Any]
HANGING_TIMEOUT_MS = 3_600_000


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = pulsar.Client(broker.url, operation_timeout_seconds=10, enable_transaction=True)
    yield c
    c.close()


def open_page(browser: Any, broker: BrokerProcess, wait: Wait, view: str = "overview") -> None:
    browser.get(f"{broker.admin_url}/#{view}")
    wait(lambda d: "ready" in d.find_element(By.ID, "status").text, "the first snapshot")


def read(wait: Wait, find: Callable[[Any], Any], what: str) -> Any:
    """``find(driver)``, found again if the page rebuilt the element meanwhile."""
    return wait(lambda d: [find(d)], what)[0]


def click(wait: Wait, find: Callable[[Any], Any], what: str) -> None:
    """Click what ``find(driver)`` finds, once it exists (again if it was rebuilt)."""

    def attempt(driver: Any) -> bool:
        element = find(driver)
        if element is None:
            return False
        element.click()
        return True

    wait(attempt, what)


def js_errors(browser: Any) -> list[dict[str, Any]]:
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def chart_last(browser: Any, chart: str) -> list[float]:
    last = browser.find_element(By.ID, chart).get_attribute("data-last") or ""
    return [float(v) for v in last.split(",") if v]


def test_every_view_loads_without_script_errors(
    broker: BrokerProcess, browser: Any, wait: Wait
) -> None:
    open_page(browser, broker, wait)
    assert read(wait, lambda d: d.find_element(By.ID, "fact-version").text,
                "the version").startswith("Version")
    # The broker's health check, run by the page, passed.
    wait(lambda d: d.find_element(By.ID, "fact-health").text == "Health check\nok",
         "the health check")
    assert "statsUpdateFrequencyInSecs" in browser.find_element(By.ID, "rate-window").text
    for view in ("topics", "subscriptions", "transactions", "overview"):
        browser.find_element(By.CSS_SELECTOR, f'#nav a[data-view="{view}"]').click()
        wait(lambda d, v=view: d.find_element(By.ID, f"view-{v}").is_displayed(), view)
    # Two more snapshots rendered: the refresh loop runs.
    samples = int(browser.find_element(By.ID, "chart-rates").get_attribute("data-samples"))
    wait(lambda d: int(d.find_element(By.ID, "chart-rates").get_attribute("data-samples"))
         >= samples + 2, "two more refreshes")
    assert js_errors(browser) == []


def test_charts_move_while_perf_produces_and_a_stuck_subscription_is_red(
    broker: BrokerProcess, browser: Any, wait: Wait, client: pulsar.Client
) -> None:
    topic = f"persistent://public/default/perf-{uuid.uuid4().hex[:8]}"
    # A durable subscription whose consumer went away: its backlog will grow.
    client.subscribe(topic, "abandoned").close()
    open_page(browser, broker, wait)
    assert chart_last(browser, "chart-rates")[0] == 0
    perf = subprocess.Popen(
        [sys.executable, "-m", "quasar.cli.main", "perf", "produce", "-u", broker.url,
         "-r", "200", "-s", "64", "-t", "120", "-i", "60", topic],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait(lambda d: chart_last(d, "chart-rates")[0] > 0, "the rate-in chart to rise")
        wait(lambda d: chart_last(d, "chart-backlog")[0] > 0, "the backlog chart to rise")
        # The chart drew a line through its samples, and the overview says so too.
        line = '#chart-rates polyline[data-series="in"]'
        points = read(wait, lambda d: d.find_element(By.CSS_SELECTOR, line)
                      .get_attribute("points"), "the rate-in line")
        assert len(points.split()) >= 2
        assert read(wait, lambda d: d.find_element(By.ID, "fact-rate-in").text,
                    "the rate in") != "Msg/s in\n0"

        # The topic's row, and its subscriptions one click away.
        browser.find_element(By.CSS_SELECTOR, '#nav a[data-view="topics"]').click()
        click(wait, lambda d: _row(d, "topics-table", topic), "the topic's row")
        wait(lambda d: d.find_element(By.ID, "topic-detail-name").text == topic,
             "the topic's subscriptions")

        # Growing backlog and no consumer: highlighted as stuck.
        browser.find_element(By.CSS_SELECTOR, '#nav a[data-view="subscriptions"]').click()
        wait(lambda d: "stuck" in (_sub_row(d, "abandoned").get_attribute("class") or ""),
             "the abandoned subscription highlighted")
    finally:
        perf.terminate()
        perf.wait(30)
    assert js_errors(browser) == []


def _row(driver: Any, table: str, topic: str) -> Any:
    for row in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr"):
        if row.get_attribute("data-topic") == topic:
            return row
    return None


def _sub_row(driver: Any, subscription: str) -> Any:
    for row in driver.find_elements(By.CSS_SELECTOR, "#subscriptions-table tbody tr"):
        if row.get_attribute("data-subscription") == subscription:
            return row
    return None


def test_aborting_a_hanging_transaction_from_the_page_releases_the_reader(
    broker: BrokerProcess, browser: Any, wait: Wait, client: pulsar.Client
) -> None:
    topic = f"persistent://public/default/orders-{uuid.uuid4().hex[:8]}"
    consumer = client.subscribe(topic, "reader", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    hanging = client.new_transaction(timeout_ms=HANGING_TIMEOUT_MS)
    producer.send(b"in-hanging-txn", txn=hanging)
    producer.send(b"after-1")
    producer.send(b"after-2")
    most, least = hanging.id()
    txn_id = f"({most},{least})"

    open_page(browser, broker, wait, "transactions")
    wait(lambda d: (row := _row(d, "held-back-table", topic)) is not None
         and row.find_elements(By.TAG_NAME, "td")[1].text == "3",
         "three held-back entries")
    txn_row = f'tr[data-txn="{txn_id}"]'
    assert topic in read(wait, lambda d: d.find_element(By.CSS_SELECTOR, txn_row).text,
                         "the open transaction's row")
    screenshot = os.environ.get("QUASAR_DASHBOARD_SCREENSHOT")
    if screenshot:
        browser.save_screenshot(screenshot)

    # Cancelling the confirmation changes nothing.
    abort_button = f"{txn_row} button.abort"
    click(wait, lambda d: d.find_element(By.CSS_SELECTOR, abort_button), "Abort")
    wait(ec.alert_is_present(), "the confirmation dialog").dismiss()
    assert _txn_status(broker, most, least) == "OPEN"

    click(wait, lambda d: d.find_element(By.CSS_SELECTOR, abort_button), "Abort")
    dialog = wait(ec.alert_is_present(), "the confirmation dialog")
    assert txn_id in dialog.text
    dialog.accept()
    received = [consumer.receive(30_000).data() for _ in range(2)]
    assert received == [b"after-1", b"after-2"]
    wait(lambda d: not d.find_elements(By.CSS_SELECTOR, txn_row),
         "the aborted transaction to leave the table")
    wait(lambda d: _row(d, "held-back-table", topic) is None, "the topic released")
    assert js_errors(browser) == []
    producer.close()
    consumer.close()


def _txn_status(broker: BrokerProcess, most: int, least: int) -> str:
    url = f"{broker.admin_url}/admin/v3/transactions/transactionMetadata/{most}/{least}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        return str(json.loads(resp.read())["status"])


def test_a_topic_named_like_markup_is_shown_as_text(
    broker: BrokerProcess, browser: Any, wait: Wait, client: pulsar.Client
) -> None:
    marker = uuid.uuid4().hex[:8]
    topic = f"persistent://public/default/<img src=x onerror=window.__xss_{marker}=1>"
    producer = client.create_producer(topic)
    producer.send(b"x")
    client.subscribe(topic, f"<b>sub-{marker}</b>").close()
    open_page(browser, broker, wait, "topics")
    wait(lambda d: (row := _row(d, "topics-table", topic)) is not None
         and row.find_element(By.TAG_NAME, "td").text == topic, "the topic's name as text")
    click(wait, lambda d: _row(d, "topics-table", topic), "the topic's row")
    wait(lambda d: d.find_element(By.ID, "topic-detail-name").text == topic, "its detail")
    first_cell = "#topic-subscriptions-table tbody td"
    wait(lambda d: d.find_element(By.CSS_SELECTOR, first_cell).text == f"<b>sub-{marker}</b>",
         "the subscription's name as text")
    # Nothing was parsed as markup: no image, no bold element, no handler ran.
    assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
    assert browser.find_elements(By.CSS_SELECTOR, "main b") == []
    assert browser.execute_script(f"return window.__xss_{marker}") is None
    producer.close()


def test_browser_missing_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The install check itself: no silent skip where the browser must exist."""
    monkeypatch.setattr(browser_setup, "CHROMIUM", Path("/nonexistent/chromium"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="make test"):
        browser_setup.require_browser()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="chromium"):
        browser_setup.require_browser()


def test_a_broker_without_transactions_says_so(
    tmp_path: Path, browser: Any, wait: Wait
) -> None:
    settings = {"transactionCoordinatorEnabled": "false", "statsUpdateFrequencyInSecs": "1"}
    with BrokerProcess(tmp_path / "data", settings=settings) as plain:
        open_page(browser, plain, wait, "transactions")
        wait(lambda d: "transactionCoordinatorEnabled=false"
             in d.find_element(By.ID, "coordinators").text, "the transactions hint")
        wait(lambda d: "No open transactions"
             in d.find_element(By.ID, "transactions-table").text, "an empty table")
        assert js_errors(browser) == []
