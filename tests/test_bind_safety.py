"""The standalone broker warns when it listens beyond loopback without
authentication."""

from __future__ import annotations

import logging

import pytest

from quasar.config import ServiceConfiguration
from quasar.server.standalone import warn_if_exposed


def test_default_binds_loopback() -> None:
    assert ServiceConfiguration().broker.bind_address == "127.0.0.1"


@pytest.mark.parametrize(
    ("bind", "authentication", "warns"),
    [
        ("127.0.0.1", False, False),
        ("::1", False, False),
        ("localhost", False, False),
        ("0.0.0.0", False, True),
        ("10.1.2.3", False, True),
        ("broker.example", False, True),
        ("0.0.0.0", True, False),
    ],
)
def test_warns_beyond_loopback_without_authentication(
    caplog: pytest.LogCaptureFixture, bind: str, authentication: bool, warns: bool
) -> None:
    with caplog.at_level(logging.WARNING, logger="quasar.server.standalone"):
        assert warn_if_exposed(bind, authentication) is warns
    assert ("authentication off" in caplog.text) is warns
    if warns:
        assert bind in caplog.text
