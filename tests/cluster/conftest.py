"""Fixtures for cluster tests: real ZooKeeper (the session's shared server, one
chroot per cluster) and real ``quasar broker`` processes sharing one data dir."""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from quasar.protocol import pb
from quasar.resources.bundles import BundlesData, bundle_of
from quasar.testing.cluster import ClusterProcess
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw
from quasar.testing.zookeeper import ZooKeeperProcess

CLIENT_IMPLS = ["pulsar", "quasar"]
ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"


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


def spread_topic(namespace: str, bundles: BundlesData, partitions: int, at_least: int) -> str:
    """A partitioned topic name whose partitions hash to ``at_least`` bundles."""
    for i in range(1000):
        topic = f"persistent://{namespace}/spread-{i}"
        hit = {bundle_of(bundles, f"{topic}-partition-{p}") for p in range(partitions)}
        if len(hit) >= at_least:
            return topic
    raise AssertionError("no topic name spreads that far")


def bundle_key(topic: str, bundles: BundlesData) -> str:
    namespace = topic.split("://", 1)[1].rsplit("/", 1)[0]
    return f"{namespace}/{bundle_of(bundles, topic).name}"


def owner_and_other(
    cluster: ClusterProcess, key: str
) -> tuple[BrokerProcess, BrokerProcess]:
    b0, b1 = cluster.brokers
    owners = [b for b in (b0, b1) if key in owned_bundles(cluster, b)]
    assert len(owners) == 1, f"{key} owned by {owners}"
    return (b0, b1) if owners[0] is b0 else (b1, b0)


def create_namespace(cluster: ClusterProcess, prefix: str, bundles: int | None = None) -> str:
    """A new namespace ``public/<prefix>-<random>`` (with ``bundles`` bundles when
    given, else the broker's default)."""
    namespace = f"public/{prefix}-{uuid.uuid4().hex[:8]}"
    body = None if bundles is None else {"bundles": {"numBundles": bundles}}
    status, _, answer = http_request(
        cluster.brokers[0], "PUT", f"/admin/v2/namespaces/{namespace}", body
    )
    assert status == 204, answer
    return namespace


def lookup(
    broker: BrokerProcess,
    topic: str,
    *,
    authoritative: bool = False,
    tls: ssl.SSLContext | None = None,
    auth_method_name: str | None = None,
    auth_data: bytes | None = None,
) -> pb.CommandLookupTopicResponse:
    """One LOOKUP of ``topic`` on a connection of its own to ``broker``. With ``tls``
    it goes to the TLS port; ``auth_method_name`` and ``auth_data`` go in the
    CONNECT."""
    if tls is None:
        raw = Raw(broker.port)
    else:
        assert broker.tls_port is not None
        raw = Raw(broker.tls_port, tls)
    try:
        raw.connect(auth_method_name, auth_data)
        cmd = pb.BaseCommand(type=pb.BaseCommand.LOOKUP)
        cmd.lookupTopic.topic, cmd.lookupTopic.request_id = topic, 1
        cmd.lookupTopic.authoritative = authoritative
        return raw.request(cmd, pb.BaseCommand.LOOKUP_RESPONSE).lookupTopicResponse
    finally:
        raw.close()


def place(
    broker: BrokerProcess,
    topic: str,
    *,
    tls: ssl.SSLContext | None = None,
    auth_method_name: str | None = None,
    auth_data: bytes | None = None,
) -> None:
    """Make ``broker`` own ``topic``'s bundle: an authoritative LOOKUP acquires it."""
    answer = lookup(
        broker, topic, authoritative=True, tls=tls,
        auth_method_name=auth_method_name, auth_data=auth_data,
    )
    assert answer.response == pb.CommandLookupTopicResponse.Connect, answer


def with_coordinators_on(cluster: ClusterProcess, owners: list[int]) -> Iterator[ClusterProcess]:
    """Start ``cluster`` with coordinator ``i`` on member ``owners[i]``, yield it and
    stop it afterwards (the body of a module-scoped cluster fixture)."""
    with cluster:
        for i, member in enumerate(owners):
            place(cluster.brokers[member], f"{ASSIGN}-partition-{i}")
        yield cluster
