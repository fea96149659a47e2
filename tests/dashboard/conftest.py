"""A real broker process and a real headless Chromium driven by Selenium.

Chromium and its driver come from Debian (``chromium``, ``chromium-driver``);
``make test`` installs them when they are missing. Without them these tests fail
under ``CI=true`` and are skipped elsewhere, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quasar.testing.process import BrokerProcess

try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # a dev dependency; its absence is reported by require_browser
    webdriver = None

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Long enough for a loaded two-core machine; every wait ends as soon as its
# condition holds.
WAIT_S = 45.0
# Stats every second, so rates move within the page's two-second refresh.
BROKER_SETTINGS = {
    "statsUpdateFrequencyInSecs": "1",
    "transactionCoordinatorCount": "1",
}
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1400,1000",
)


def require_browser() -> None:
    """Fail under CI, skip elsewhere, when the browser or Selenium is missing."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if webdriver is None:
        missing.append("the selenium package (pip install -e '.[dev]')")
    if not missing:
        return
    reason = (
        f"browser tests need {', '.join(missing)}; `make test` installs Chromium "
        "(apt-get install chromium chromium-driver)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("dashboard") / "data", settings=BROKER_SETTINGS
    ).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    require_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    # The page's console and uncaught errors, read by the tests.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(
        options=options, service=Service(executable_path=str(CHROMEDRIVER))
    )
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def wait(browser: Any) -> Callable[[Callable[[Any], Any], str], Any]:
    """Wait until ``condition(driver)`` is truthy; return its value.

    The page rebuilds its tables and figures at every refresh, so an element found a
    moment ago may be gone: a condition that meets a stale element is tried again."""

    def until(condition: Callable[[Any], Any], what: str) -> Any:
        return WebDriverWait(
            browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,)
        ).until(condition, f"timed out waiting for {what}")

    return until
