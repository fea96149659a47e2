"""Transactions across the brokers of a cluster: participants on three members commit
atomically and abort cleanly; a coordinator is served only by its bundle's owner and
moves with an unload; and a coordinator whose owner is killed between the commit
decision and the participants' markers moves to a survivor, which completes the
transaction with its one outcome. Each runs with the transaction logs plain and
batched. quasar's client only: the ``pulsar`` package
has no transaction API.

One cluster of three members and two coordinators. The tests place each bundle by
an authoritative LOOKUP to the member that is to own it (such a lookup acquires an
unowned bundle): coordinator 0 on member 1, coordinator 1 on member 0, and the topic
of participant ``i`` on member ``i``. Member 0 is armed to kill itself once its
coordinator has written a commit decision (``tc.after_preserver_append``), so the
test that kills it runs last.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client
from quasar.protocol import pb
from quasar.resources.bundles import BundlesData, bundle_of
from quasar.testing.cluster import ClusterProcess
from quasar.testing.raw import RawCoordinator
from quasar.testing.zookeeper import ZooKeeperProcess

from .conftest import (
    ASSIGN,
    create_namespace,
    http_request,
    place,
    wait_for,
    with_coordinators_on,
)

pytestmark = pytest.mark.usefixtures("close_raw")

SESSION_TIMEOUT_MS = 4000
NAMESPACE_BUNDLES = 8


# The same scenarios with the coordinators' and pending acks' logs batched (PIP-160):
# a moved coordinator recovers from batched entries, and participants on other
# members batch their own pending-ack records.
BATCHED_LOGS = {
    "transactionLogBatchedWriteEnabled": "true",
    "transactionPendingAckBatchedWriteEnabled": "true",
}


@pytest.fixture(scope="module", params=["plain-logs", "batched-logs"])
def cluster(
    request: pytest.FixtureRequest,
    zookeeper: ZooKeeperProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ClusterProcess]:
    batched = BATCHED_LOGS if request.param == "batched-logs" else {}
    c = ClusterProcess(
        Path(tmp_path_factory.mktemp("txn-cluster")), zookeeper, brokers=3,
        session_timeout_ms=SESSION_TIMEOUT_MS, transaction_coordinators=2,
        settings={"transactionEndRetryIntervalMs": "200", **batched},
    )
    c.brokers[0].extra_env["QUASAR_CRASH_POINT"] = "tc.after_preserver_append"
    yield from with_coordinators_on(c, [1, 0])


def placed_topics(cluster: ClusterProcess, prefix: str) -> list[str]:
    """One topic per member, each in a bundle of its own owned by that member."""
    namespace = create_namespace(cluster, prefix, bundles=NAMESPACE_BUNDLES)
    bundles = BundlesData.even(NAMESPACE_BUNDLES)
    topics: list[str] = []
    seen = set()
    for i in range(1000):
        topic = f"persistent://{namespace}/t-{i}"
        bundle = bundle_of(bundles, topic)
        if bundle not in seen:
            seen.add(bundle)
            topics.append(topic)
        if len(topics) == len(cluster.brokers):
            break
    for broker, topic in zip(cluster.brokers, topics, strict=True):
        place(broker, topic)
    return topics


def client_of(cluster: ClusterProcess) -> Any:
    # A client of its own per transaction: NEW_TXN goes round-robin over the
    # coordinators, starting with coordinator 0.
    return quasar.client.Client(
        cluster.service_url, enable_transaction=True, operation_timeout_seconds=30
    )


def nothing_delivered(consumers: list[Any]) -> bool:
    for consumer in consumers:
        with pytest.raises(quasar.client.Timeout):
            consumer.receive(200)
    return True


def test_a_transaction_over_three_brokers_commits_and_another_aborts(
    cluster: ClusterProcess,
) -> None:
    topics = placed_topics(cluster, "txn")
    observer = client_of(cluster)
    try:
        consumers = [observer.subscribe(t, "sub") for t in topics]
        observer.create_producer(topics[2]).send(b"seed")
        consumers[2].acknowledge(consumers[2].receive(10_000))  # "sub" has it too

        def run(end: str) -> Any:
            """A transaction (on coordinator 0) that sends to all three topics and
            acknowledges the seed on the third; ``end`` ends it. Returns what its
            own subscription of the third topic is given afterwards."""
            client = client_of(cluster)
            try:
                producers = [client.create_producer(t, batching_enabled=False)
                             for t in topics]
                acker = client.subscribe(
                    topics[2], "acker", initial_position=quasar.client.InitialPosition.Earliest
                )
                seed = acker.receive(10_000)
                assert seed.data() == b"seed"
                txn = client.new_transaction()
                assert txn.id()[0] == 0
                for i, producer in enumerate(producers):
                    producer.send(f"{end}-{i}".encode(), txn=txn)
                acker.acknowledge(seed, txn=txn)
                assert nothing_delivered(consumers)  # nothing before the end
                getattr(txn, end)()
                acker.redeliver_unacknowledged_messages()
                given = []
                while True:
                    try:
                        given.append(acker.receive(1_000).data())
                    except quasar.client.Timeout:
                        return given
            finally:
                client.close()

        # Aborted: its messages are never delivered, and its ack (on the third
        # member) is dropped, so the seed comes again.
        assert run("abort") == [b"seed"]
        # Committed: all of it at once, and the ack holds.
        assert run("commit") == [b"commit-2"]
        got = [c.receive(10_000).data() for c in consumers]
        assert got == [f"commit-{i}".encode() for i in range(3)]
        assert nothing_delivered(consumers)  # the aborted messages never come
    finally:
        observer.close()


def test_a_coordinator_is_served_by_the_owner_of_its_bundle_and_moves_with_it(
    cluster: ClusterProcess,
) -> None:
    # Coordinator 0 is member 1's: member 2 refuses it the way Pulsar does, so the
    # client looks partition 0 up again.
    elsewhere = RawCoordinator(cluster.brokers[2].port)
    try:
        refused = elsewhere.connect(0)
        assert refused.error == pb.ServiceNotReady, refused
        assert elsewhere.new_txn(0).error == pb.TransactionCoordinatorNotFound
    finally:
        elsewhere.raw.close()
    owner = RawCoordinator(cluster.brokers[1].port)
    try:
        assert not owner.connect(0).HasField("error")
        opened = owner.new_txn(0)
        assert not opened.HasField("error") and opened.txnid_most_bits == 0
        # Unloading the coordinator's bundle moves it: the old owner answers no more,
        # and the next owner recovers the open transaction from the log.
        bundle = bundle_of(BundlesData.even(4), f"{ASSIGN}-partition-0").name
        path = f"/admin/v2/namespaces/pulsar/system/{bundle}/unload"
        status, _, answer = http_request(cluster.brokers[1], "PUT", path)
        assert status == 204, answer
        gone = owner.end(0, opened.txnid_least_bits, pb.COMMIT)
        assert gone.error == pb.TransactionCoordinatorNotFound
    finally:
        owner.raw.close()
    place(cluster.brokers[2], f"{ASSIGN}-partition-0")
    # The next owner loads the coordinator as it acquires the bundle, as Pulsar's do.
    log_path = cluster.brokers[2].log_path
    assert log_path is not None
    wait_for("coordinator 0 to load on member 2",
             lambda: "tc 0 ready: 1 live transactions" in log_path.read_text(), 15)
    moved = RawCoordinator(cluster.brokers[2].port)
    try:
        assert not moved.connect(0).HasField("error")
        assert not moved.end(0, opened.txnid_least_bits, pb.COMMIT).HasField("error")
    finally:
        moved.raw.close()


def test_a_coordinator_killed_after_its_commit_decision_completes_on_a_survivor(
    cluster: ClusterProcess,
) -> None:
    victim = cluster.brokers[0]
    topics = placed_topics(cluster, "txnkill")
    client = client_of(cluster)
    observer = client_of(cluster)
    try:
        consumers = [observer.subscribe(t, "sub") for t in topics]
        producers = [
            client.create_producer(t, batching_enabled=False, send_timeout_millis=60_000)
            for t in topics
        ]
        first = client.new_transaction()  # coordinator 0: the next one is 1's
        assert first.id()[0] == 0
        first.abort()
        txn = client.new_transaction()
        assert txn.id()[0] == 1
        for i, producer in enumerate(producers):
            producer.send(f"moved-{i}".encode(), txn=txn)
        # The victim writes COMMITTING and dies before any participant hears of it;
        # the client asks again until a survivor has recovered coordinator 1 from its
        # log and ended the transaction on every participant.
        txn.commit()
        assert victim.proc is not None
        wait_for("the victim to be dead", lambda: victim.proc.poll() is not None, 5)
        got = sorted(c.receive(30_000).data() for c in consumers)
        assert got == [f"moved-{i}".encode() for i in range(3)]
        # Asked again under the same client name, the coordinator answers from the
        # outcome it preserved: committed, not TransactionNotFound.
        client.resume_transaction(txn.id()).commit()
        assert nothing_delivered(consumers)
    finally:
        client.close()
        observer.close()
