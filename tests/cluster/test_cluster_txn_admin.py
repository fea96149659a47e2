"""The transaction admin API of a cluster: a route about one coordinator, one
transaction or one topic is answered by its owner (another member answers 307 to
it), and a route over every coordinator gathers the whole cluster's answer from
each coordinator's owner, through whichever member is asked.

One cluster of two members and two coordinators: coordinator ``i`` and topic ``i``
on member ``i`` (placed by an authoritative LOOKUP, which acquires the bundle). The
last test kills member 1.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import quasar.client
from quasar.client.admin import call_admin
from quasar.errors import ResourceNotFoundError
from quasar.resources.bundles import BundlesData, bundle_of
from quasar.testing.cluster import ClusterProcess
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import RawCoordinator
from quasar.testing.zookeeper import ZooKeeperProcess

from .conftest import (
    create_namespace,
    http_request,
    place,
    wait_for,
    with_coordinators_on,
)

pytestmark = pytest.mark.usefixtures("close_raw")

TXN = "/admin/v3/transactions"
# Long enough that a killed member still owns its coordinator while the last test
# asks for it, however loaded the machine.
SESSION_TIMEOUT_MS = 20_000
NAMESPACE_BUNDLES = 4


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcess]:
    c = ClusterProcess(
        Path(tmp_path_factory.mktemp("txn-admin")), zookeeper, brokers=2,
        session_timeout_ms=SESSION_TIMEOUT_MS, transaction_coordinators=2,
    )
    yield from with_coordinators_on(c, [0, 1])


@pytest.fixture(scope="module")
def topics(cluster: ClusterProcess) -> list[str]:
    """Topic ``i`` in a bundle of its own, owned by member ``i``, with subscription
    ``sub``."""
    namespace = create_namespace(cluster, "txnadmin", bundles=NAMESPACE_BUNDLES)
    bundles = BundlesData.even(NAMESPACE_BUNDLES)
    found: dict[Any, str] = {}
    for i in range(1000):
        topic = f"persistent://{namespace}/t-{i}"
        found.setdefault(bundle_of(bundles, topic), topic)
        if len(found) == len(cluster.brokers):
            break
    out = list(found.values())
    for broker, topic in zip(cluster.brokers, out, strict=True):
        place(broker, topic)
    client = quasar.client.Client(cluster.service_url, operation_timeout_seconds=30)
    try:
        for topic in out:
            client.subscribe(topic, "sub").close()
    finally:
        client.close()
    return out


def admin(broker: BrokerProcess, method: str, path: str) -> Any:
    """One request through quasar's admin client, which follows redirects."""
    return call_admin(broker.admin_url, lambda a: a.request(method, path))


def open_txn(broker: BrokerProcess, tc_id: int, client_name: str | None = None) -> int:
    """A transaction opened on coordinator ``tc_id`` (served by ``broker``); its
    least significant bits."""
    tc = RawCoordinator(broker.port)
    try:
        assert not tc.connect(tc_id).HasField("error")
        opened = tc.new_txn(tc_id, ttl_ms=600_000, client_name=client_name)
        assert not opened.HasField("error"), opened
        assert opened.txnid_most_bits == tc_id
        return int(opened.txnid_least_bits)
    finally:
        tc.raw.close()


def assert_redirect(asked: BrokerProcess, owner: BrokerProcess, method: str, path: str) -> None:
    status, headers, body = http_request(asked, method, path)
    assert status == 307, (status, body)
    location = urlsplit(headers["Location"])
    assert f"{location.scheme}://{location.netloc}" == owner.admin_url
    assert location.path == urlsplit(path).path
    assert "authoritative=true" in location.query
    asked_query = {q for q in urlsplit(path).query.split("&") if q}
    assert asked_query <= set(location.query.split("&"))


def test_one_coordinators_routes_are_answered_by_its_owner(cluster: ClusterProcess) -> None:
    m0, m1 = cluster.brokers
    for path in (
        f"{TXN}/coordinatorStats?coordinatorId=1",
        f"{TXN}/coordinatorInternalStats/1?metadata=true",
        f"{TXN}/slowTransactions/0?coordinatorId=1",
        f"{TXN}/clientTransactions/etl?coordinatorId=1",
    ):
        assert_redirect(m0, m1, "GET", path)
    assert_redirect(m1, m0, "GET", f"{TXN}/coordinatorStats?coordinatorId=0")
    assert_redirect(m0, m1, "POST", f"{TXN}/coordinators/1/skipCorruptRecord?position=1:1")
    # The owner answers for itself; either member's answer, redirect followed, is the
    # owner's (not NotLoaded).
    status, _, own = http_request(m1, "GET", f"{TXN}/coordinatorStats?coordinatorId=1")
    assert status == 200 and own["state"] == "Ready", own
    for asked in (m0, m1):
        stats = admin(asked, "GET", f"{TXN}/coordinatorStats?coordinatorId=1")
        assert stats["state"] == "Ready", stats
        internal = admin(asked, "GET", f"{TXN}/coordinatorInternalStats/1")
        name = internal["transactionLogStats"]["managedLedgerName"]
        assert name.endswith("__transaction_log_1"), name
    # An id no coordinator has is the handler's 404 on any member, not a redirect.
    status, _, body = http_request(m0, "GET", f"{TXN}/coordinatorStats?coordinatorId=7")
    assert status == 404, body
    status, _, body = http_request(m0, "GET", f"{TXN}/coordinatorStats?coordinatorId=x")
    assert status == 400, body


def test_a_transaction_on_the_other_member_is_read_and_aborted_through_either(
    cluster: ClusterProcess,
) -> None:
    m0, m1 = cluster.brokers
    least = open_txn(m1, 1, client_name="etl-abort")
    path = f"{TXN}/transactionMetadata/1/{least}"
    assert_redirect(m0, m1, "GET", path)
    meta = admin(m0, "GET", path)
    assert meta["txnId"] == f"(1,{least})" and meta["status"] == "OPEN", meta
    assert_redirect(m0, m1, "POST", f"{TXN}/abortTransaction/1/{least}")
    # The CLI follows the 307 of a POST, credentials and all, to the owner.
    done = subprocess.run(
        [sys.executable, "-m", "quasar.cli.main", "--log-level", "WARNING", "admin",
         "--admin-url", m0.admin_url, "transactions", "abort-transaction",
         "-m", "1", "-l", str(least)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr

    def ended() -> bool:
        try:
            admin(m0, "GET", path)
        except ResourceNotFoundError:
            return True
        return False

    wait_for("the aborted transaction to end", ended, 15)
    found = admin(m0, "GET", f"{TXN}/clientTransactions/etl-abort")
    assert [(t["txnId"], t["status"]) for t in found["terminated"]] == [
        (f"(1,{least})", "ABORTED")
    ], found
    assert found["open"] == [] and found["unavailableCoordinators"] == []


def test_routes_over_every_coordinator_answer_for_the_whole_cluster(
    cluster: ClusterProcess,
) -> None:
    m0, m1 = cluster.brokers
    opened = {tc_id: open_txn(broker, tc_id, client_name="etl-all")
              for tc_id, broker in enumerate(cluster.brokers)}
    wanted = {f"({tc_id},{least})" for tc_id, least in opened.items()}
    for asked in (m0, m1):
        stats = admin(asked, "GET", f"{TXN}/coordinatorStats")
        assert set(stats) == {"0", "1"}, stats
        for tc_id, least in opened.items():
            one = stats[str(tc_id)]
            assert one["state"] == "Ready" and one["ongoingTxnSize"] >= 1, stats
            assert one["leastSigBits"] >= least, stats
        assert admin(asked, "GET", f"{TXN}/coordinators") == [
            {"id": i, "brokerServiceUrl": b.url, "brokerServiceUrlTls": None}
            for i, b in enumerate(cluster.brokers)
        ]

        def slow(member: BrokerProcess = asked) -> bool:
            return wanted <= set(admin(member, "GET", f"{TXN}/slowTransactions/0"))

        wait_for("both coordinators' transactions among the slow ones", slow, 15)
        found = admin(asked, "GET", f"{TXN}/clientTransactions/etl-all")
        assert [t["txnId"] for t in found["open"]] == sorted(
            wanted, key=lambda t: tuple(int(x) for x in t.strip("()").split(","))
        ), found
        assert found["unavailableCoordinators"] == []


def test_topic_transaction_routes_go_to_the_topics_owner(
    cluster: ClusterProcess, topics: list[str]
) -> None:
    m0, m1 = cluster.brokers
    local = topics[1].removeprefix("persistent://")
    for method, path in (
        ("GET", f"{TXN}/transactionBufferStats/{local}?lowWaterMarks=true"),
        ("GET", f"{TXN}/pendingAckStats/{local}/sub"),
        ("GET", f"{TXN}/transactionInBufferStats/{local}/1/1"),
        ("POST", f"{TXN}/pendingAck/{local}/sub/skipCorruptRecord?position=1:1"),
    ):
        assert_redirect(m0, m1, method, path)
    # The owner's answer through either member (the other one has no such topic
    # loaded and would not serve it).
    answers = [
        (admin(asked, "GET", f"{TXN}/transactionBufferStats/{local}"),
         admin(asked, "GET", f"{TXN}/pendingAckStats/{local}/sub"))
        for asked in (m0, m1)
    ]
    assert answers[0] == answers[1], answers
    buffer, pending = answers[0]
    assert buffer["state"] in ("Ready", "NoSnapshot"), buffer
    assert pending["ongoingTxnSize"] == 0, pending


def test_an_owner_out_of_reach_fails_the_gathered_answer(cluster: ClusterProcess) -> None:
    m0, m1 = cluster.brokers
    least = open_txn(m0, 0, client_name="etl-kill")
    m1.kill()
    # Member 1's session (and so its ownership of coordinator 1) outlives it for
    # SESSION_TIMEOUT_MS: coordinator 1's owner cannot be reached meanwhile.
    status, _, body = http_request(m0, "GET", f"{TXN}/coordinatorStats")
    assert status == 503, body
    assert "coordinator 1" in body["reason"] and "cannot be reached" in body["reason"]
    status, _, body = http_request(m0, "GET", f"{TXN}/clientTransactions/etl-kill")
    assert status == 200, body
    assert body["unavailableCoordinators"] == [1], body
    assert [t["txnId"] for t in body["open"]] == [f"(0,{least})"], body
