"""Hostile partition counts against a real broker: a count no Java int holds or above
``maxNumPartitionsPerPartitionedTopic`` is refused without stalling anyone; a topic
at the bound costs one metadata record until its partitions are used, is listed,
served and deleted, also after a restart; a never-used one is deleted too."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pulsar
import pytest

from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
BOUND = 10_000  # quasar's default maxNumPartitionsPerPartitionedTopic
# Every HTTP request and client operation must be answered within this: a broker
# busy registering partitions one by one, or building a listing of billions of
# names, would not be.
ANSWER_WITHIN_S = 15
NS_PATH = "/admin/v2/persistent/public/default"


def http(
    broker: BrokerProcess, method: str, path: str, body: Any = None, raw: bytes | None = None
) -> tuple[int, Any]:
    """One admin request; (status, parsed JSON body or None)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        broker.admin_url + path, data=data, method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=ANSWER_WITHIN_S) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as err:
        text = err.read()
        return err.code, json.loads(text) if text else None


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def still_serving(broker: BrokerProcess) -> None:
    """A PING round trip, then a produce/consume on an unrelated topic."""
    raw = Raw(broker.port)
    raw.connect()
    raw.send(T(type=T.PING))
    raw.recv_type(T.PONG)
    client = pulsar.Client(broker.url, operation_timeout_seconds=ANSWER_WITHIN_S)
    try:
        topic = f"persistent://public/default/{unique('bystander')}"
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"still served")
        assert consumer.receive(ANSWER_WITHIN_S * 1000).data() == b"still served"
    finally:
        client.close()


def topics_of_namespace(broker: BrokerProcess) -> list[str]:
    raw = Raw(broker.port)
    raw.connect()
    cmd = T(type=T.GET_TOPICS_OF_NAMESPACE)
    cmd.getTopicsOfNamespace.namespace, cmd.getTopicsOfNamespace.request_id = "public/default", 1
    answer = raw.request(cmd, T.GET_TOPICS_OF_NAMESPACE_RESPONSE)
    return list(answer.getTopicsOfNamespaceResponse.topics)


@pytest.mark.parametrize(
    "body,status,reason",
    [
        (b"2147483648", 400, "32-bit integer"),
        (b"-2147483649", 400, "32-bit integer"),
        (str(BOUND + 1).encode(), 406, f"less than or equal to {BOUND}"),
        (b"100000000", 406, f"less than or equal to {BOUND}"),
    ],
)
def test_hostile_counts_are_refused_and_the_broker_keeps_serving(
    broker: BrokerProcess, body: bytes, status: int, reason: str
) -> None:
    name = unique("huge")
    for method in ("PUT", "POST"):
        answer = http(broker, method, f"{NS_PATH}/{name}/partitions", raw=body)
        assert answer[0] == status, answer
        assert reason in answer[1]["reason"]
    assert http(broker, "GET", f"{NS_PATH}/{name}/partitions") == (200, {"partitions": 0})
    still_serving(broker)


def test_auto_topic_creation_with_a_huge_default_is_refused(broker: BrokerProcess) -> None:
    path = "/admin/v2/namespaces/public/default/autoTopicCreation"
    override = {
        "allowAutoTopicCreation": True,
        "topicType": "partitioned",
        "defaultNumPartitions": 100_000_000,
    }
    status, body = http(broker, "POST", path, override)
    assert status == 406
    assert body["reason"] == f"Number of partitions should be less than or equal to {BOUND}"
    assert http(broker, "GET", path)[0] == 204  # no override was stored
    still_serving(broker)


def test_a_never_used_partitioned_topic_is_deleted(broker: BrokerProcess) -> None:
    name = unique("unused")
    full = f"persistent://public/default/{name}"
    assert http(broker, "PUT", f"{NS_PATH}/{name}/partitions", 4)[0] == 204
    assert f"{full}-partition-3" in http(broker, "GET", NS_PATH)[1]
    assert f"{full}-partition-3" in topics_of_namespace(broker)
    assert http(broker, "DELETE", f"{NS_PATH}/{name}/partitions") == (204, None)
    assert http(broker, "GET", f"{NS_PATH}/{name}/partitions") == (200, {"partitions": 0})
    assert not any(t.startswith(full) for t in http(broker, "GET", NS_PATH)[1])
    assert http(broker, "GET", f"{NS_PATH}/partitioned")[1].count(full) == 0


def produce_and_read(
    broker: BrokerProcess, full: str, partitions: list[int], routed: bool = False
) -> None:
    """Produce one message to each of ``partitions`` and read each back; with
    ``routed`` also produce through the partitioned topic's own name (the client then
    opens a producer on every partition)."""
    client = pulsar.Client(broker.url, operation_timeout_seconds=ANSWER_WITHIN_S)
    try:
        for i in partitions:
            topic = f"{full}-partition-{i}"
            consumer = client.subscribe(
                topic, "s", initial_position=pulsar.InitialPosition.Earliest
            )
            client.create_producer(topic).send(f"to {i}".encode())
            assert consumer.receive(ANSWER_WITHIN_S * 1000).data() == f"to {i}".encode()
        if routed:
            client.create_producer(full).send(b"routed")
    finally:
        client.close()


def test_a_topic_at_the_bound_is_created_listed_served_and_deleted(
    broker: BrokerProcess,
) -> None:
    name = unique("wide")
    full = f"persistent://public/default/{name}"
    # One metadata record: answered within the bound although no partition exists.
    assert http(broker, "PUT", f"{NS_PATH}/{name}/partitions", BOUND)[0] == 204
    listed = http(broker, "GET", NS_PATH)[1]
    mine = [t for t in listed if t.startswith(full + "-")]
    assert len(mine) == BOUND
    assert mine == sorted(mine)
    assert len([t for t in topics_of_namespace(broker) if t.startswith(full + "-")]) == BOUND
    produce_and_read(broker, full, [0, 17, BOUND - 1])
    still_serving(broker)
    assert http(broker, "DELETE", f"{NS_PATH}/{name}/partitions") == (204, None)
    assert http(broker, "GET", f"{NS_PATH}/{name}/partitions") == (200, {"partitions": 0})
    assert not any(t.startswith(full) for t in http(broker, "GET", NS_PATH)[1])


def test_partitioned_topics_are_deleted_after_a_restart(tmp_path: Path) -> None:
    # Pulsar's "unlimited" bound; a Java int still bounds a count.
    broker = BrokerProcess(
        tmp_path / "data", settings={"maxNumPartitionsPerPartitionedTopic": "0"}
    ).start()
    try:
        assert http(broker, "PUT", f"{NS_PATH}/big/partitions", raw=b"2147483648")[0] == 400
        assert http(broker, "PUT", f"{NS_PATH}/used/partitions", 64)[0] == 204
        assert http(broker, "PUT", f"{NS_PATH}/unused/partitions", 64)[0] == 204
        produce_and_read(broker, "persistent://public/default/used", [1, 63], routed=True)
        broker.restart(hard=True)
        for name in ("used", "unused"):
            assert http(broker, "DELETE", f"{NS_PATH}/{name}/partitions") == (204, None)
        assert http(broker, "GET", NS_PATH) == (200, [])
        assert http(broker, "GET", f"{NS_PATH}/partitioned") == (200, [])
        still_serving(broker)
    finally:
        assert broker.stop() == 0, broker.read_log()
