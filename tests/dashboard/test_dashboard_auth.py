"""The dashboard on a broker with token authentication and authorization: the page
and its scripts load without credentials, the data does not; the page asks for a
token, refuses a role that is no super-user with the broker's reason, shows the
data after a super-user signs in, and never puts the token in a URL."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.testing.process import BrokerProcess
from quasar.testing.secured import token_settings

from .conftest import BROKER_SETTINGS

try:
    from selenium.webdriver.common.by import By
except ImportError:  # reported by the browser fixture
    pass

Wait = Callable[[Callable[[Any], Any], str], Any]
SECRET = create_secret_key()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = BROKER_SETTINGS | token_settings(SECRET, super_users="operator")
    proc = BrokerProcess(tmp_path_factory.mktemp("secured") / "data", settings=settings).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


def status_of(url: str, token: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_assets_are_open_and_the_data_needs_a_superuser(broker: BrokerProcess) -> None:
    for path in ("/", "/dashboard/app.js", "/dashboard/chart.js", "/dashboard/app.css",
                 "/dashboard/favicon.svg"):
        assert status_of(broker.admin_url + path)[0] == 200, path
    data = broker.admin_url + "/admin/v2/quasar/dashboard"
    assert status_of(data)[0] == 401
    status, body = status_of(data, create_token("app", SECRET))
    assert (status, body["reason"]) == (401, "This operation requires super-user access")
    status, body = status_of(data, create_token("operator", SECRET))
    assert status == 200 and json.loads(body)["broker"]["state"] == "ready"


def sign_in(browser: Any, wait: Wait, token: str) -> None:
    wait(lambda d: d.find_element(By.ID, "signin").is_displayed(), "the sign-in form")
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#signin-form button[type=submit]").click()


def test_the_page_asks_for_a_token_and_shows_data_after_sign_in(
    broker: BrokerProcess, browser: Any, wait: Wait
) -> None:
    browser.get(broker.admin_url + "/")
    wait(lambda d: d.find_element(By.ID, "signin").is_displayed(), "the sign-in form")
    assert not browser.find_element(By.ID, "main").is_displayed()

    # A valid role that is no super-user: back to the form, with the broker's reason.
    sign_in(browser, wait, create_token("app", SECRET))
    wait(lambda d: "super-user" in d.find_element(By.ID, "signin-reason").text,
         "the refusal's reason")
    assert not browser.find_element(By.ID, "main").is_displayed()

    operator = create_token("operator", SECRET)
    sign_in(browser, wait, operator)
    wait(lambda d: "ready" in d.find_element(By.ID, "status").text, "the data")
    assert browser.find_element(By.ID, "main").is_displayed()
    assert operator not in browser.current_url
    # Kept for this tab only; a reload stays signed in.
    assert browser.execute_script(
        "return sessionStorage.getItem('quasar.dashboard.token')") == operator
    browser.refresh()
    wait(lambda d: "ready" in d.find_element(By.ID, "status").text, "the data after a reload")

    # Signing out forgets the token and shows the form again.
    browser.find_element(By.ID, "sign-out").click()
    wait(lambda d: d.find_element(By.ID, "signin").is_displayed(), "the sign-in form")
    assert browser.execute_script(
        "return sessionStorage.getItem('quasar.dashboard.token')") is None
    # The only errors are the refused data requests (401), no script errors.
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert all("401" in e["message"] for e in errors), errors
