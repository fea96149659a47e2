"""The standalone broker warns when it listens beyond loopback without
authentication."""

from __future__ import annotations

import logging

import pytest

from quasar.config import ServiceConfiguration
from quasar.server import standalone
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
    monkeypatch: pytest.MonkeyPatch, bind: str, authentication: bool, warns: bool
) -> None:
    # The module's own logger is swapped for one that keeps what it is given: what
    # other tests in the same process did to logging's global state cannot hide it.
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.Logger("quasar.server.standalone.test", logging.WARNING)
    logger.addHandler(Keep())
    monkeypatch.setattr(standalone, "log", logger)
    assert warn_if_exposed(bind, authentication) is warns
    text = "\n".join(r.getMessage() for r in records)
    assert ("authentication off" in text) is warns
    if warns:
        assert bind in text and records[0].levelno == logging.WARNING
