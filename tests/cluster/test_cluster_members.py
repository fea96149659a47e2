"""Cluster members on real ZooKeeper: lookups redirect to a bundle's owner and both
clients follow them, partitions spread over the brokers, admin requests go to the
owner, bundles unload."""

from __future__ import annotations

from typing import Any

import pytest

from quasar.protocol import pb
from quasar.resources.bundles import BundlesData
from quasar.testing.cluster import ClusterProcess
from quasar.testing.raw import Raw

from .conftest import (
    bundle_key,
    create_namespace,
    http_request,
    make_client,
    owned_bundles,
    owner_and_other,
    spread_topic,
)

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand


def test_partitions_spread_over_brokers_and_clients_follow_redirects(
    cluster: ClusterProcess, pulsar_mod: Any
) -> None:
    b0, b1 = cluster.brokers
    namespace = create_namespace(cluster, "spread", bundles=8)
    bundles = BundlesData.even(8)
    topic = spread_topic(namespace, bundles, partitions=6, at_least=4)
    local = topic.rsplit("/", 1)[1]
    status, _, answer = http_request(
        b1, "PUT", f"/admin/v2/persistent/{namespace}/{local}/partitions", 6
    )
    assert status == 204, answer
    # Lookups for the consumer start at one broker, for the producer at the other:
    # each client is redirected to the owners of the partitions it does not serve.
    consumers = make_client(pulsar_mod, b1.url)
    producers = make_client(pulsar_mod, b0.url)
    try:
        consumer = consumers.subscribe(topic, "sub")
        producer = producers.create_producer(topic, batching_enabled=False)
        sent = {f"m-{i}".encode() for i in range(12)}
        for body in sorted(sent):
            producer.send(body)
        received = set()
        for _ in sent:
            msg = consumer.receive(15_000)
            received.add(msg.data())
            consumer.acknowledge(msg)
        assert received == sent
    finally:
        producers.close()
        consumers.close()
    mine = {b: {k for k in owned_bundles(cluster, b) if k.startswith(namespace + "/")}
            for b in (b0, b1)}
    assert mine[b0] and mine[b1], mine
    assert not mine[b0] & mine[b1]


def test_requests_on_a_topic_go_to_its_owner(cluster: ClusterProcess) -> None:
    import pulsar

    namespace = create_namespace(cluster, "owner")
    topic = f"persistent://{namespace}/t"
    client = make_client(pulsar, cluster.brokers[0].url)
    try:
        client.create_producer(topic).send(b"x")
    finally:
        client.close()
    owner, other = owner_and_other(cluster, bundle_key(topic, BundlesData.even(4)))

    # Admin: 307 to the owner, same path, authoritative=true (Pulsar's redirect).
    path = f"/admin/v2/persistent/{namespace}/t/stats"
    status, headers, _ = http_request(other, "GET", path)
    assert status == 307
    assert headers["Location"] == f"{owner.admin_url}{path}?authoritative=true"
    status, _, stats = http_request(owner, "GET", path)
    assert status == 200 and stats["msgInCounter"] == 1
    # Namespace-wide routes are served by any broker.
    status, _, listed = http_request(other, "GET", f"/admin/v2/persistent/{namespace}")
    assert status == 200 and listed == [topic]
    status, _, _ = http_request(other, "GET", f"/admin/v2/persistent/{namespace}/partitioned")
    assert status == 200

    # HTTP lookup: 307 from the other broker, the owner's URLs from the owner.
    lookup = f"/lookup/v2/topic/persistent/{namespace}/t"
    status, headers, _ = http_request(other, "GET", lookup)
    assert status == 307 and headers["Location"].startswith(owner.admin_url + lookup)
    status, _, data = http_request(owner, "GET", lookup)
    assert status == 200 and data["brokerUrl"] == owner.url

    # Binary: LOOKUP redirects authoritatively; PRODUCER is refused off the owner.
    raw = Raw(other.port)
    raw.connect()
    cmd = T(type=T.LOOKUP)
    cmd.lookupTopic.topic = topic
    cmd.lookupTopic.request_id = 7
    answer = raw.request(cmd, T.LOOKUP_RESPONSE).lookupTopicResponse
    assert answer.response == pb.CommandLookupTopicResponse.Redirect
    assert answer.brokerServiceUrl == owner.url and answer.authoritative
    refused = raw.producer(topic, request_id=8)
    assert refused.type == T.ERROR and refused.error.error == pb.ServiceNotReady
    refused = raw.producer(topic.replace("persistent://", "non-persistent://"), 2, 10)
    assert refused.type == T.ERROR and refused.error.error == pb.ServiceNotReady

    # Partitioned metadata is answered by any broker.
    cmd = T(type=T.PARTITIONED_METADATA)
    cmd.partitionMetadata.topic = topic
    cmd.partitionMetadata.request_id = 9
    meta = raw.request(cmd, T.PARTITIONED_METADATA_RESPONSE).partitionMetadataResponse
    assert meta.response == pb.CommandPartitionedTopicMetadataResponse.Success


def test_unload_gives_the_bundle_up_and_the_next_lookup_assigns_it(
    cluster: ClusterProcess,
) -> None:
    import pulsar

    namespace = create_namespace(cluster, "unload")
    topic = f"persistent://{namespace}/t"
    key = bundle_key(topic, BundlesData.even(4))
    bundle = key.rsplit("/", 1)[1]
    client = make_client(pulsar, cluster.service_url)
    try:
        client.create_producer(topic).send(b"before")
        owner, other = owner_and_other(cluster, key)
        path = f"/admin/v2/namespaces/{namespace}/{bundle}/unload"
        status, headers, _ = http_request(other, "PUT", path)
        assert status == 307
        assert headers["Location"] == f"{owner.admin_url}{path}?authoritative=true"
        status, _, answer = http_request(owner, "PUT", path)
        assert status == 204, answer
        # The producer's client was told its topic closed and looks it up again, so
        # the bundle may be owned again already: exactly one broker owns it once a
        # reader is back, and the data written before is there.
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert reader.read_next(15_000).data() == b"before"
        owner_and_other(cluster, key)
    finally:
        client.close()
    # With no client left to look it up again, a namespace unload asked of any
    # broker reaches the bundle's owner and leaves it unowned.
    status, _, answer = http_request(other, "PUT", f"/admin/v2/namespaces/{namespace}/unload")
    assert status == 204, answer
    assert all(key not in owned_bundles(cluster, b) for b in cluster.brokers)


def test_http_lookups_follow_redirects(cluster: ClusterProcess, pulsar_mod: Any) -> None:
    namespace = create_namespace(cluster, "http")
    topics = [f"persistent://{namespace}/t-{i}" for i in range(4)]
    for service_url in (cluster.brokers[0].admin_url, cluster.brokers[1].admin_url):
        client = make_client(pulsar_mod, service_url)
        try:
            for topic in topics:
                client.create_producer(topic).send(service_url.encode())
        finally:
            client.close()
    owned = set().union(*(owned_bundles(cluster, b) for b in cluster.brokers))
    assert {bundle_key(t, BundlesData.even(4)) for t in topics} <= owned
