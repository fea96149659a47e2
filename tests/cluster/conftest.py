"""Fixtures for cluster tests: real ZooKeeper (the session's shared server, one
chroot per cluster) and real ``quasar broker`` processes sharing one data dir."""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from quasar.testing.cluster import ClusterProcess
from quasar.testing.process import BrokerProcess
from quasar.testing.zookeeper import ZooKeeperProcess

CLIENT_IMPLS = ["pulsar", "quasar"]


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcess]:
    """Two members for the tests that do not kill anything."""
    with ClusterProcess(tmp_path_factory.mktemp("cluster"), zookeeper, brokers=2) as c:
        yield c


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
        return mod.Client(url, operation_timeout_seconds=15, logger=logger)
    return mod.Client(url, operation_timeout_seconds=15)


def http_request(
    broker: BrokerProcess, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, str], Any]:
    """One request without following redirects: (status, headers, JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", broker.http_port, timeout=15)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        raw = r.read()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw
        return r.status, dict(r.getheaders()), parsed
    finally:
        conn.close()


def owned_bundles(cluster: ClusterProcess, broker: BrokerProcess) -> set[str]:
    """``tenant/ns/0xLOW_0xHIGH`` of every bundle ``broker`` owns."""
    path = f"/admin/v2/brokers/{cluster.cluster_name}/{cluster.broker_id(broker)}/ownedNamespaces"
    status, _, body = http_request(broker, "GET", path)
    assert status == 200, body
    return set(body)


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll ``check`` until true (a bounded wait on an observable event)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)  # polling interval of a bounded wait
    raise AssertionError(f"timed out waiting for {what}")


def quote(path: str) -> str:
    return urllib.parse.quote(path, safe="/")
