"""Fixtures shared by the test directories that drive a real broker process."""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator

import pytest

from quasar.testing.process import BrokerProcess
from quasar.testing.raw import close_all
from quasar.testing.zookeeper import ZooKeeperProcess, missing_reason


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


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Give the root logger back its handlers and level after every test: ``quasar``
    commands run in-process (``quasar.cli.main.main``) configure it, and a level one
    test left (``--log-level ERROR``) would hide the warnings a later test in the
    same process looks for."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def require_zookeeper() -> None:
    """Fail under CI, skip elsewhere, when no ZooKeeper server can be started."""
    reason = missing_reason()
    if reason is None:
        return
    reason = f"ZooKeeper tests need Debian's zookeeper package: {reason}; `make test` installs it"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper server for the whole run; tests keep apart by chroot
    (``zk_url``). A test that stops ZooKeeper starts its own server instead."""
    require_zookeeper()
    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


_CHROOTS = itertools.count()


@pytest.fixture
def zk_url(zookeeper: ZooKeeperProcess) -> str:
    """A ``metadataStoreUrl`` on the shared server with a chroot of this test's own."""
    return zookeeper.url(f"/test-{os.getpid()}-{next(_CHROOTS)}")
