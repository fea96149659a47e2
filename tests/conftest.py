"""Fixtures shared by the test directories that drive a real broker process."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from quasar.testing.process import BrokerProcess
from quasar.testing.raw import close_all


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker process per test module that asks for it (a module's own ``broker``
    fixture, or a nearer conftest's, takes precedence)."""
    name = request.module.__name__.rpartition(".")[2]
    proc = BrokerProcess(tmp_path_factory.mktemp(name) / "data").start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture
def close_raw() -> Iterator[None]:
    """Close every raw connection a test opened; use as
    ``pytestmark = pytest.mark.usefixtures("close_raw")``."""
    yield
    close_all()


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Give the root logger back its handlers and level after the test: ``quasar``
    commands run in-process (``quasar.cli.main.main``) configure it. Use with
    ``pytestmark = pytest.mark.usefixtures("restore_logging")``."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
