"""Fixtures for the interop suite: one real broker process, driven by real clients.

The suite runs every scenario twice: with the official ``pulsar-client`` package and
with quasar's own client (``quasar.client``), which mirrors its names. Topics get
unique names per test so tests share one broker without seeing each other's data.
"""

from __future__ import annotations

import json
import logging
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quasar.testing.process import BrokerProcess

CLIENT_IMPLS = ["pulsar", "quasar"]


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("interop") / "data"
    proc = BrokerProcess(data)
    proc.start()
    yield proc
    code = proc.stop()
    assert code == 0, f"broker exited with {code}:\n{proc.read_log()}"


@pytest.fixture(params=CLIENT_IMPLS)
def pulsar_mod(request: pytest.FixtureRequest) -> Any:
    if request.param == "pulsar":
        import pulsar

        return pulsar
    import quasar.client

    return quasar.client


def make_client(mod: Any, url: str) -> Any:
    if mod.__name__ == "pulsar":
        logger = logging.getLogger("pulsar-client")
        logger.setLevel(logging.WARNING)
        return mod.Client(url, operation_timeout_seconds=10, logger=logger)
    return mod.Client(url, operation_timeout_seconds=10)


@pytest.fixture
def client(pulsar_mod: Any, broker: BrokerProcess) -> Iterator[Any]:
    c = make_client(pulsar_mod, broker.url)
    yield c
    c.close()


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/t-{uuid.uuid4().hex[:12]}"


class Admin:
    """A tiny admin REST client (urllib) for test set-up."""

    def __init__(self, base: str) -> None:
        self.base = base

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.request(method, path, body)
        assert 200 <= status < 300, (method, path, status, answer)
        return answer


@pytest.fixture(scope="session")
def admin(broker: BrokerProcess) -> Admin:
    return Admin(broker.admin_url)


def topic_path(topic: str) -> str:
    """persistent://t/ns/x -> /admin/v2/persistent/t/ns/x"""
    domain, rest = topic.split("://", 1)
    return f"/admin/v2/{domain}/{rest}"


def receive_all(consumer: Any, n: int, timeout_ms: int = 10_000) -> list[Any]:
    return [consumer.receive(timeout_ms) for _ in range(n)]


def assert_no_message(consumer: Any, mod: Any, timeout_ms: int = 300) -> None:
    """Nothing arrives within a short window (used after everything was acked)."""
    with pytest.raises(mod.Timeout):
        consumer.receive(timeout_ms)


__all__ = ["Admin", "Path", "assert_no_message", "receive_all", "topic_path"]
