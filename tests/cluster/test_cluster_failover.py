"""A member that dies or stops: its bundles move to the survivor once its ZooKeeper
session expires, clients carry on, and a paused member refuses to serve when it
resumes. Each test has a cluster of its own (they kill brokers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from quasar.protocol import pb
from quasar.resources.bundles import BundlesData
from quasar.testing.cluster import ClusterProcess
from quasar.testing.raw import Raw
from quasar.testing.zookeeper import ZooKeeperProcess

from .conftest import (
    bundle_key,
    create_namespace,
    http_request,
    lookup,
    make_client,
    owned_bundles,
    owner_and_other,
    spread_topic,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
SESSION_TIMEOUT_MS = 4000


@pytest.fixture
def cluster(zookeeper: ZooKeeperProcess, tmp_path: Path) -> Iterator[ClusterProcess]:
    with ClusterProcess(
        tmp_path, zookeeper, brokers=2, session_timeout_ms=SESSION_TIMEOUT_MS
    ) as c:
        yield c


def test_a_killed_brokers_bundles_move_to_the_survivor(cluster: ClusterProcess) -> None:
    import pulsar

    namespace = create_namespace(cluster, "kill", bundles=8)
    topic = spread_topic(namespace, BundlesData.even(8), partitions=6, at_least=4)
    local = topic.rsplit("/", 1)[1]
    status, _, answer = http_request(
        cluster.brokers[0], "PUT", f"/admin/v2/persistent/{namespace}/{local}/partitions", 6
    )
    assert status == 204, answer
    client = make_client(pulsar, cluster.service_url)
    try:
        consumer = client.subscribe(topic, "sub")
        producer = client.create_producer(
            topic, batching_enabled=False, send_timeout_millis=60_000
        )
        victim, survivor = cluster.brokers
        assert owned_bundles(cluster, victim) and owned_bundles(cluster, survivor)
        sent = [f"before-{i}".encode() for i in range(6)]
        for body in sent:
            producer.send(body)
        victim.kill()
        # Sends to the victim's partitions wait for its session to expire and the
        # survivor to take the bundles; each one returns once it is acknowledged.
        after = [f"after-{i}".encode() for i in range(6)]
        for body in after:
            producer.send(body)
        received = set()
        while received != set(sent + after):
            msg = consumer.receive(30_000)
            received.add(msg.data())
            consumer.acknowledge(msg)
        mine = {k for k in owned_bundles(cluster, survivor) if k.startswith(namespace + "/")}
        hit = {bundle_key(f"{topic}-partition-{p}", BundlesData.even(8)) for p in range(6)}
        assert hit <= mine
        # The survivor fenced the ledgers the killed broker had open before reading
        # their length (docs/cluster.md, "Fencing a previous owner").
        assert "fenced and recovered ledger" in survivor.read_log()
    finally:
        client.close()


def test_a_paused_broker_whose_session_expired_refuses_to_serve(
    cluster: ClusterProcess,
) -> None:
    import pulsar

    namespace = create_namespace(cluster, "pause")
    topic = f"persistent://{namespace}/t"
    client = make_client(pulsar, cluster.brokers[0].url)
    try:
        client.create_producer(topic).send(b"x")
    finally:
        client.close()
    paused, survivor = owner_and_other(cluster, bundle_key(topic, BundlesData.even(4)))
    cluster.pause(paused)
    try:
        # Once the paused broker's session expired, the survivor takes the bundle
        # on the next lookup.
        wait_for(
            "the survivor to own the bundle",
            lambda: lookup(survivor, topic).response
            == pb.CommandLookupTopicResponse.Connect,
        )
    finally:
        cluster.resume(paused)
    # The first request after the pause is refused: the broker no longer owns it.
    raw = Raw(paused.port)
    raw.connect()
    refused = raw.producer(topic)
    assert refused.type == T.ERROR and refused.error.error == pb.ServiceNotReady
    # Once it has a new session it redirects to the new owner.
    wait_for(
        "the resumed broker to redirect to the new owner",
        lambda: lookup(paused, topic).brokerServiceUrl == survivor.url,
    )
    assert not any(k.startswith(namespace + "/") for k in owned_bundles(cluster, paused))


# The restart below must come before the killed run's session expires, however slowly
# a loaded machine starts a broker: this test's members keep their sessions this long.
RESTART_SESSION_TIMEOUT_MS = 12_000


def test_a_broker_restarted_at_once_waits_for_its_previous_session(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    with ClusterProcess(
        tmp_path, zookeeper, brokers=2, session_timeout_ms=RESTART_SESSION_TIMEOUT_MS
    ) as cluster:
        _restart_at_once(cluster)


def _restart_at_once(cluster: ClusterProcess) -> None:
    import pulsar

    namespace = create_namespace(cluster, "restart")
    topic = f"persistent://{namespace}/t"
    client = make_client(pulsar, cluster.brokers[0].url)
    try:
        client.create_producer(topic).send(b"before")
    finally:
        client.close()
    owner, _ = owner_and_other(cluster, bundle_key(topic, BundlesData.even(4)))
    owner.kill()
    # Its registration and bundle nodes live until the old session expires: the new
    # run waits for them rather than failing or adopting the old bundles.
    owner.start()
    assert "registered already" in owner.log_path.read_text(errors="replace")
    client = make_client(pulsar, owner.url)
    try:
        client.create_producer(topic).send(b"after")
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert [reader.read_next(15_000).data() for _ in range(2)] == [b"before", b"after"]
    finally:
        client.close()
