"""Fencing a topic's previous owner on the shared data directory: a broker frozen
with a publish in flight (SIGSTOP at the stop point between its group's sync and
its fence check) loses the topic to the survivor, which fences its ledger; resumed,
the frozen broker never acknowledges that publish, and everything acknowledged is
read exactly once from the new owner. An unload closes the owner's ledger and the
next owner continues in a new ledger."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from quasar.protocol import encode_message, pb
from quasar.resources.bundles import BundlesData
from quasar.testing.cluster import ClusterProcess
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw
from quasar.testing.zookeeper import ZooKeeperProcess

from .conftest import (
    bundle_key,
    create_namespace,
    http_request,
    lookup,
    make_client,
    owner_and_other,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
STOP_POINT = "storage.before_fence_check"


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcess]:
    work = tmp_path_factory.mktemp("fencing")
    c = ClusterProcess(work, zookeeper, brokers=2, session_timeout_ms=4000)
    for i, broker in enumerate(c.brokers):
        broker.extra_env["QUASAR_STOP_POINT"] = f"{STOP_POINT}:{work / f'arm-{i}'}"
    with c:
        yield c


def _arm_file(cluster: ClusterProcess, broker: BrokerProcess) -> Path:
    return cluster.work_dir / f"arm-{cluster.brokers.index(broker)}"


def _stopped(broker: BrokerProcess) -> bool:
    assert broker.proc is not None
    stat = Path(f"/proc/{broker.proc.pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def _answers_until_settled(raw: Raw, deadline_s: float) -> list[int]:
    """The command types the broker sends on ``raw`` until it answers the publish
    (SEND_RECEIPT or SEND_ERROR), closes the connection, or ``deadline_s`` passes."""
    seen: list[int] = []
    raw.sock.settimeout(1.0)
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            cmd = raw.recv()
        except TimeoutError:
            continue
        except (ConnectionError, OSError):
            break
        seen.append(cmd.type)
        if cmd.type in (T.SEND_RECEIPT, T.SEND_ERROR):
            break
    return seen


def _read_all(url: str, topic: str) -> list[bytes]:
    import pulsar

    client = make_client(pulsar, url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        out = []
        while reader.has_message_available():
            out.append(reader.read_next(15_000).data())
        return out
    finally:
        client.close()


def test_a_paused_owner_never_acknowledges_a_publish_the_new_owner_fenced(
    cluster: ClusterProcess,
) -> None:
    import pulsar

    namespace = create_namespace(cluster, "fence")
    topic = f"persistent://{namespace}/t"
    client = make_client(pulsar, cluster.service_url)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        acked = [f"acked-{i}".encode() for i in range(3)]
        for body in acked:
            producer.send(body)
    finally:
        client.close()
    owner, survivor = owner_and_other(cluster, bundle_key(topic, BundlesData.even(4)))

    raw = Raw(owner.port)
    raw.connect()
    ready = raw.producer(topic)
    assert ready.type == T.PRODUCER_SUCCESS, ready
    _arm_file(cluster, owner).touch()
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = 1, 0
    md = pb.MessageMetadata(
        producer_name=ready.producer_success.producer_name, sequence_id=0, publish_time=1
    )
    raw.send_bytes(encode_message(cmd, md, b"in-flight"))
    # The owner's writer synced the publish and froze before its fence check.
    wait_for("the owner to stop at the stop point", lambda: _stopped(owner))
    try:
        # Its session expires; the survivor takes the bundle and, loading the topic,
        # fences the ledger the frozen owner was writing.
        wait_for(
            "the survivor to own the bundle",
            lambda: lookup(survivor, topic).response
            == pb.CommandLookupTopicResponse.Connect,
        )
        client = make_client(pulsar, survivor.url)
        try:
            client.create_producer(topic, batching_enabled=False).send(b"after")
        finally:
            client.close()
        assert "fenced and recovered ledger" in survivor.read_log()
    finally:
        cluster.resume(owner)

    answers = _answers_until_settled(raw, deadline_s=15)
    assert T.SEND_RECEIPT not in answers, answers
    wait_for(
        "the resumed owner to find its ledger fenced",
        lambda: "was fenced by another broker" in owner.read_log(),
    )
    # Everything acknowledged is there exactly once; the refused publish, synced
    # before the fence, may be there (never acknowledged: the client resends it).
    read = Counter(_read_all(survivor.url, topic))
    for body in [*acked, b"after"]:
        assert read[body] == 1, read
    assert read[b"in-flight"] <= 1, read
    # On a new session the resumed broker serves again (and redirects to the owner).
    wait_for(
        "the resumed broker to redirect to the new owner",
        lambda: lookup(owner, topic).brokerServiceUrl == survivor.url,
    )


def test_the_official_client_resends_a_fenced_publish_to_the_new_owner(
    cluster: ClusterProcess,
) -> None:
    import pulsar

    namespace = create_namespace(cluster, "resend")
    topic = f"persistent://{namespace}/t"
    client = make_client(pulsar, cluster.service_url)
    try:
        producer = client.create_producer(
            topic, batching_enabled=False, send_timeout_millis=60_000
        )
        first = producer.send(b"acked")
        owner, survivor = owner_and_other(cluster, bundle_key(topic, BundlesData.even(4)))
        _arm_file(cluster, owner).touch()
        results: list[tuple[object, object]] = []
        producer.send_async(b"in-flight", lambda res, mid: results.append((res, mid)))
        wait_for("the owner to stop at the stop point", lambda: _stopped(owner))
        try:
            wait_for(
                "the survivor to own the bundle",
                lambda: lookup(survivor, topic).response
                == pb.CommandLookupTopicResponse.Connect,
            )
            loader = make_client(pulsar, survivor.url)
            try:  # loading the topic fences the frozen owner's ledger
                loader.create_reader(topic, pulsar.MessageId.earliest).close()
            finally:
                loader.close()
        finally:
            cluster.resume(owner)
        wait_for("the in-flight publish to complete", lambda: bool(results), 60)
        result, message_id = results[0]
        assert result == pulsar.Result.Ok, result
        # Acknowledged by the new owner, in the ledger it opened after the fence.
        assert message_id.ledger_id() > first.ledger_id()  # type: ignore[attr-defined]
    finally:
        client.close()
    wait_for(
        "the resumed broker to redirect to the new owner",
        lambda: lookup(owner, topic).brokerServiceUrl == survivor.url,
    )


def test_an_unloaded_owner_closes_its_ledger_and_the_next_owner_opens_a_new_one(
    cluster: ClusterProcess,
) -> None:
    import pulsar

    namespace = create_namespace(cluster, "handover")
    topic = f"persistent://{namespace}/t"
    key = bundle_key(topic, BundlesData.even(4))
    client = make_client(pulsar, cluster.service_url)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(2):
            producer.send(f"m-{i}".encode())
    finally:
        client.close()
    owner, other = owner_and_other(cluster, key)
    stats_path = f"/admin/v2/persistent/{namespace}/t/internalStats"
    status, _, before = http_request(owner, "GET", stats_path)
    assert status == 200, before
    old_ledger = before["ledgers"][-1]["ledgerId"]

    status, _, answer = http_request(
        owner, "PUT", f"/admin/v2/namespaces/{key}/unload"
    )
    assert status == 204, answer
    # The other broker takes the bundle (an authoritative lookup acquires it).
    assert lookup(other, topic, authoritative=True).response == (
        pb.CommandLookupTopicResponse.Connect
    )
    client = make_client(pulsar, other.url)
    try:
        client.create_producer(topic, batching_enabled=False).send(b"m-2")
    finally:
        client.close()
    status, _, after = http_request(other, "GET", stats_path)
    assert status == 200, after
    ledgers = {li["ledgerId"]: li["entries"] for li in after["ledgers"]}
    assert ledgers[old_ledger] == 2  # closed by the old owner with its length
    assert max(ledgers) > old_ledger and after["currentLedgerEntries"] == 1
    # An orderly close leaves nothing to fence.
    assert f"fenced and recovered ledger {old_ledger} " not in other.read_log()
    assert _read_all(other.url, topic) == [b"m-0", b"m-1", b"m-2"]
