"""Fixtures of the hostile-client tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from quasar.testing.hostile import HostileClient, LogWatch
from quasar.testing.process import BrokerProcess


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[HostileClient]:
    """A connection to the broker; after the test, the broker must have logged no
    failure and still serve the connection."""
    watch = LogWatch(broker.log_path)
    c = HostileClient(broker.port)
    yield c
    c.ping()
    assert watch.unexpected_failures() == [], watch.new_text()
