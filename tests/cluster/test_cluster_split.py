"""Bundle split on real cluster members: the admin split on either member, topics
served across it with nothing lost, automatic split over a threshold, and the load
manager's choice by message rate."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from quasar.cli.main import main
from quasar.resources.bundles import (
    RANGE_EQUALLY_DIVIDE,
    BundleRange,
    BundlesData,
    bundle_of,
    split_boundary,
)
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore
from quasar.testing.cluster import ClusterProcess
from quasar.testing.process import BrokerProcess
from quasar.testing.zookeeper import ZooKeeperProcess

from .conftest import (
    create_namespace,
    http_request,
    make_client,
    owned_bundles,
    wait_for,
)

FULL = "0x00000000_0xffffffff"
# Auto split cluster: a bundle with more than this many loaded topics is split.
MAX_TOPICS = 2


def bundles_seen_by(broker: BrokerProcess, namespace: str) -> BundlesData:
    status, _, policies = http_request(broker, "GET", f"/admin/v2/namespaces/{namespace}")
    assert status == 200, policies
    return BundlesData.from_json(policies["bundles"])


def owners(cluster: ClusterProcess, namespace: str) -> dict[str, BrokerProcess]:
    """Bundle name -> the member owning it, for the namespace's owned bundles."""
    out: dict[str, BrokerProcess] = {}
    for broker in cluster.brokers:
        for key in owned_bundles(cluster, broker):
            if key.startswith(namespace + "/"):
                assert key.rsplit("/", 1)[1] not in out, f"{key} owned twice"
                out[key.rsplit("/", 1)[1]] = broker
    return out


def topics_on_both_sides(namespace: str, boundary: int, per_side: int) -> list[str]:
    below, above = [], []
    for i in range(1000):
        topic = f"persistent://{namespace}/t-{i}"
        half = bundle_of(BundlesData((0, boundary, 0xFFFFFFFF)), topic)
        side = below if half.high == boundary else above
        if len(side) < per_side:
            side.append(topic)
        if len(below) == per_side and len(above) == per_side:
            return below + above
    raise AssertionError("no topic names on both sides")


class Traffic:
    """Producers and consumers on a set of topics, checking nothing is lost."""

    def __init__(self, client: Any, topics: list[str]) -> None:
        self.consumers = {t: client.subscribe(t, "sub") for t in topics}
        self.producers = {t: client.create_producer(t, batching_enabled=False) for t in topics}
        self.unseen: dict[str, set[bytes]] = {t: set() for t in topics}
        self.seen: dict[str, set[bytes]] = {t: set() for t in topics}

    def send_round(self, label: str) -> None:
        for topic, producer in self.producers.items():
            body = f"{label}-{topic.rsplit('/', 1)[1]}".encode()
            producer.send(body)
            self.unseen[topic].add(body)

    def check_received(self) -> None:
        """Every message sent is received; one received before may come again (an
        acknowledgement in flight when its topic was unloaded), nothing else."""
        for topic, consumer in self.consumers.items():
            unseen, seen = self.unseen[topic], self.seen[topic]
            while unseen:
                msg = consumer.receive(20_000)
                body = msg.data()
                assert body in unseen or body in seen, (topic, body)
                unseen.discard(body)
                seen.add(body)
                consumer.acknowledge(msg)


def test_split_on_either_member_keeps_topics_served(cluster: ClusterProcess) -> None:
    import pulsar

    namespace = create_namespace(cluster, "split", bundles=1)
    middle = split_boundary(BundleRange(0, 0xFFFFFFFF), RANGE_EQUALLY_DIVIDE, [])
    topics = topics_on_both_sides(namespace, middle, per_side=2)
    client = make_client(pulsar, cluster.brokers[1].url)
    try:
        traffic = Traffic(client, topics)
        traffic.send_round("before")
        owner = owners(cluster, namespace)[FULL]
        other = next(b for b in cluster.brokers if b is not owner)

        # An unknown algorithm is refused by any member, as Pulsar does (412).
        path = f"/admin/v2/namespaces/{namespace}/{FULL}/split"
        status, _, answer = http_request(other, "PUT", path + "?splitAlgorithmName=nope")
        assert status == 412 and "Unsupported namespace bundle split" in answer["reason"]
        # Another member sends the split to the owner.
        status, headers, _ = http_request(other, "PUT", path + "?unload=false")
        assert status == 307
        assert headers["Location"] == f"{owner.admin_url}{path}?unload=false&authoritative=true"
        status, _, answer = http_request(owner, "PUT", path + "?unload=false")
        assert status == 204, answer

        lower = BundleRange(0, middle).name
        upper = BundleRange(middle, 0xFFFFFFFF).name
        # Every member sees the new boundaries; the owner serves both halves.
        for broker in cluster.brokers:
            assert bundles_seen_by(broker, namespace).ranges() == [
                BundleRange(0, middle), BundleRange(middle, 0xFFFFFFFF),
            ]
        assert owners(cluster, namespace) == {lower: owner, upper: owner}
        # The parent is gone: splitting it again is a 404 on either member.
        status, _, _ = http_request(owner, "PUT", path)
        assert status == 404
        # The producers and consumers never noticed: no reconnection needed.
        traffic.send_round("after-split")
        traffic.check_received()

        # The quasar CLI, asked of the other member, splits the lower half and
        # unloads both of its halves; the clients look their topics up again.
        assert main([
            "--log-level", "WARNING", "admin", "--admin-url", other.admin_url,
            "namespaces", "split-bundle", namespace, "--bundle", lower, "--unload",
            "--split-algorithm-name", "topic_count_equally_divide",
        ]) == 0
        after = bundles_seen_by(other, namespace)
        assert after.num_bundles == 3 and not after.contains(BundleRange(0, middle))
        below = [t for t in topics if bundle_of(after, t).high <= middle]
        assert {bundle_of(after, t) for t in below} == set(after.ranges()[:2])
        traffic.send_round("after-unload")
        traffic.check_received()
        # Every bundle holding one of the topics is owned by exactly one member.
        owned = owners(cluster, namespace)
        assert {bundle_of(after, t).name for t in topics} <= set(owned)
    finally:
        client.close()


def test_split_is_refused_beyond_the_namespace_maximum(cluster: ClusterProcess) -> None:
    # loadBalancerNamespaceMaximumBundles is 128 (Pulsar's default).
    namespace = create_namespace(cluster, "full", bundles=128)
    bundle = BundlesData.even(128).ranges()[5].name
    # Nobody owns the bundle: the member asked takes it, then refuses the split.
    status, _, answer = http_request(
        cluster.brokers[0], "PUT", f"/admin/v2/namespaces/{namespace}/{bundle}/split"
    )
    assert status == 412, answer
    assert "loadBalancerNamespaceMaximumBundles" in answer["reason"]
    assert bundles_seen_by(cluster.brokers[1], namespace).num_bundles == 128


# -- automatic split and the choice by load ---------------------------------------------
@pytest.fixture(scope="module")
def busy_cluster(
    zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcess]:
    settings = {
        "loadBalancerNamespaceBundleMaxTopics": str(MAX_TOPICS),
        "loadBalancerReportUpdateMinIntervalMillis": "500",
        # Rates measured every second, so the load reports show traffic at once.
        "statsUpdateFrequencyInSecs": "1",
    }
    with ClusterProcess(
        tmp_path_factory.mktemp("busy"), zookeeper, brokers=2, settings=settings
    ) as c:
        yield c


def splits_needed(topics: list[str]) -> int:
    """How many range halvings leave at most MAX_TOPICS of ``topics`` per bundle."""
    bundles = BundlesData.even(1)
    for count in range(64):
        crowded = [
            r for r in bundles.ranges()
            if sum(bundle_of(bundles, t) == r for t in topics) > MAX_TOPICS
        ]
        if not crowded:
            return count
        r = crowded[0]
        bundles = bundles.split(r, split_boundary(r, RANGE_EQUALLY_DIVIDE, []))
    return 64


def test_a_bundle_over_max_topics_is_split_by_its_owner(busy_cluster: ClusterProcess) -> None:
    import pulsar

    namespace = create_namespace(busy_cluster, "auto", bundles=1)
    # Five topics that two or three halvings separate, so the test stays short.
    topics = []
    for i in range(1000):
        candidate = [*topics, f"persistent://{namespace}/a-{i}"]
        if splits_needed(candidate) <= 3:
            topics = candidate
        if len(topics) == 5:
            break
    client = make_client(pulsar, busy_cluster.brokers[0].url)
    try:
        traffic = Traffic(client, topics)
        traffic.send_round("before")

        def spread() -> bool:
            bundles = bundles_seen_by(busy_cluster.brokers[1], namespace)
            return all(
                sum(bundle_of(bundles, t) == r for t in topics) <= MAX_TOPICS
                for r in bundles.ranges()
            )

        wait_for("the owner to split the crowded bundle", spread, timeout_s=60)
        assert bundles_seen_by(busy_cluster.brokers[0], namespace).num_bundles >= 2
        # The halves were unloaded (loadBalancerAutoUnloadSplitBundlesEnabled): the
        # clients found their topics again, and nothing was lost.
        traffic.send_round("after")
        traffic.check_received()
    finally:
        client.close()


def load_reports(cluster: ClusterProcess) -> dict[str, dict[str, Any]]:
    store = ZooKeeperMetadataStore(cluster.metadata_store_url, operation_timeout_s=10)
    try:
        out = {}
        for broker_id in store.children("/loadbalance/brokers"):
            found = store.get(f"/loadbalance/brokers/{broker_id}")
            if found is not None:
                out[broker_id] = json.loads(found.value)
        return out
    finally:
        store.close()


def non_rate_load(report: dict[str, Any]) -> float:
    return 100.0 * len(report["bundles"]) + 10.0 * report["numTopics"]


@contextmanager
def steady_traffic(
    pulsar: Any,
    producers: list[Any],
    consumers: list[Any],
    per_tick: int,
    payload: bytes,
    receive_ms: int,
) -> Iterator[None]:
    """Every 10 ms publish ``per_tick`` messages of ``payload`` with each producer, and
    receive and acknowledge on each consumer, on two threads until the block ends."""
    stop = threading.Event()

    def publish() -> None:
        while not stop.wait(0.01):
            for producer in producers:
                for _ in range(per_tick):
                    producer.send_async(payload, lambda result, msg_id: None)

    def drain() -> None:
        while not stop.is_set():
            for consumer in consumers:
                try:
                    consumer.acknowledge(consumer.receive(receive_ms))
                except pulsar.Timeout:
                    continue

    threads = [threading.Thread(target=publish), threading.Thread(target=drain)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)


def test_new_bundles_go_to_the_member_without_traffic(busy_cluster: ClusterProcess) -> None:
    import pulsar

    b0, b1 = busy_cluster.brokers
    id0, id1 = busy_cluster.broker_id(b0), busy_cluster.broker_id(b1)
    # One busy topic, owned by b0 (an authoritative HTTP lookup there acquires it).
    hot_ns = create_namespace(busy_cluster, "hot", bundles=1)
    hot = f"persistent://{hot_ns}/hot"
    status, _, answer = http_request(
        b0, "GET", f"/lookup/v2/topic/persistent/{hot_ns}/hot?authoritative=true"
    )
    assert status == 200 and answer["brokerUrl"] == b0.url, answer
    client = make_client(pulsar, b0.url)
    try:
        consumer = client.subscribe(hot, "sub")
        producer = client.create_producer(hot, batching_enabled=True, block_if_queue_full=True)
        # Paced at about 5000 msg/s: enough to dwarf the bundle and topic terms,
        # little enough to leave the shared machine's brokers responsive.
        with steady_traffic(pulsar, [producer], [consumer], 50, b"x" * 16, 500):
            lookups = 4
            fresh_ns = create_namespace(busy_cluster, "fresh", bundles=lookups)

            def b0_much_busier() -> bool:
                reports = load_reports(busy_cluster)
                r0, r1 = reports[id0], reports[id1]
                rate0 = r0["msgRateIn"] + r0["msgRateOut"]
                rate1 = r1["msgRateIn"] + r1["msgRateOut"]
                # Even after b1 takes every new bundle (pending choices count 100
                # msg/s each), b0 stays the busier one, with room for rates to move.
                return rate0 + non_rate_load(r0) > (
                    rate1 + non_rate_load(r1) + 100.0 * lookups + 500.0
                )

            wait_for("b0's load report to show its traffic", b0_much_busier, timeout_s=60)
            bundles = BundlesData.even(lookups)
            chosen = []
            for r in bundles.ranges():
                topic = next(
                    f"t-{i}" for i in range(10_000)
                    if bundle_of(bundles, f"persistent://{fresh_ns}/t-{i}") == r
                )
                status, headers, answer = http_request(
                    b0, "GET", f"/lookup/v2/topic/persistent/{fresh_ns}/{topic}"
                )
                assert status in (200, 307), answer
                chosen.append(b1 if status == 307 and b1.admin_url in headers["Location"] else b0)
            assert chosen == [b1] * lookups
    finally:
        client.close()


# -- load shedding ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def shedding_cluster(
    zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcess]:
    settings = {
        # Any traffic is enough to move, and a bundle just acquired may move: the
        # test's member acquires both busy bundles right before.
        "loadBalancerBundleUnloadMinThroughputThreshold": "0",
        "loadBalancerSheddingGracePeriodMinutes": "0",
        "loadBalancerReportUpdateMinIntervalMillis": "500",
        "statsUpdateFrequencyInSecs": "1",
    }
    with ClusterProcess(
        tmp_path_factory.mktemp("shedding"), zookeeper, brokers=2, settings=settings
    ) as c:
        yield c


def test_the_most_loaded_member_sheds_a_bundle(shedding_cluster: ClusterProcess) -> None:
    import pulsar

    b0, b1 = shedding_cluster.brokers
    namespace = create_namespace(shedding_cluster, "shed", bundles=2)
    bundles = BundlesData.even(2)
    topics = [
        next(
            f"persistent://{namespace}/hot-{i}" for i in range(1000)
            if bundle_of(bundles, f"persistent://{namespace}/hot-{i}") == r
        )
        for r in bundles.ranges()
    ]
    for topic in topics:  # both bundles on b0
        local = topic.rsplit("/", 1)[1]
        status, _, answer = http_request(
            b0, "GET", f"/lookup/v2/topic/persistent/{namespace}/{local}?authoritative=true"
        )
        assert status == 200 and answer["brokerUrl"] == b0.url, answer
    assert len(owners(shedding_cluster, namespace)) == 2
    client = make_client(pulsar, b0.url)
    try:
        producers = [client.create_producer(t, block_if_queue_full=True) for t in topics]
        consumers = [client.subscribe(t, "sub") for t in topics]
        # About 2 x 1000 msg/s of 1 KiB.
        with steady_traffic(pulsar, producers, consumers, 10, b"x" * 1024, 100):
            # b0 carries all the traffic: at its next shedding pass (every minute) it
            # unloads one bundle, and the clients' lookups place it on b1, the least
            # loaded; then each member has one bundle and nothing moves again.
            wait_for(
                "b0 to shed a bundle to b1",
                lambda: set(owners(shedding_cluster, namespace).values()) == {b0, b1},
                timeout_s=150,
            )
            for producer in producers:
                producer.send(b"after the move")
    finally:
        client.close()
