"""A standalone broker whose metadata is in ZooKeeper survives kill -9, and a
ZooKeeper outage.

The cluster is initialized with ``quasar initialize-cluster-metadata``, the broker
starts with ``metadataStoreUrl`` on a real ZooKeeper server, and the official client
produces to a partitioned topic and acknowledges part of it. After ``kill -9`` and a
restart on the same ZooKeeper and data directory: the partitioned topic, every
acknowledged message and the subscription's cursor are there, and the metadata is in
ZooKeeper, not in the data directory.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pulsar
import pytest

from quasar.cli.main import main
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore
from quasar.testing.process import BrokerProcess
from quasar.testing.zookeeper import ZooKeeperProcess
from tests.conftest import require_zookeeper

pytestmark = [pytest.mark.crash, pytest.mark.usefixtures("restore_logging")]

TOPIC = "persistent://public/default/zk-orders"
PARTITIONS = 3
MESSAGES = 30
ACKED = 10


def _admin(broker: BrokerProcess, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(broker.admin_url + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read()
        return json.loads(text) if text else None


def _backlog(broker: BrokerProcess, subscription: str) -> int:
    stats = _admin(broker, "GET", "/admin/v2/persistent/public/default/zk-orders/partitioned-stats")
    return int(stats["subscriptions"][subscription]["msgBacklog"])


def _wait_until(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)  # polling interval of a bounded wait


def _receive_all(consumer: Any, expected: int) -> list[bytes]:
    got = []
    for _ in range(expected):
        msg = consumer.receive(15_000)
        got.append(msg.data())
        consumer.acknowledge(msg)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)  # and nothing more
    return got


def test_broker_on_zookeeper_keeps_everything_across_kill9(
    zk_url: str, tmp_path: Path
) -> None:
    assert main(["initialize-cluster-metadata", "--log-level", "WARNING",
                 "--cluster", "standalone", "--metadata-store", zk_url,
                 "--initial-num-transaction-coordinators", "2"]) == 0
    broker = BrokerProcess(tmp_path / "data", settings={
        "metadataStoreUrl": zk_url,
        "metadataStoreOperationTimeoutSeconds": "10",
        # Persist a cursor on every acknowledgement, so what the broker has taken
        # is exactly what survives the kill.
        "managedLedgerDefaultMarkDeleteRateLimit": "0",
    }).start()
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.ERROR)
    try:
        _admin(broker, "PUT", "/admin/v2/persistent/public/default/zk-orders/partitions",
               PARTITIONS)
        client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=logger)
        consumer = client.subscribe(TOPIC, "orders", consumer_type=pulsar.ConsumerType.Shared,
                                    initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(TOPIC, batching_enabled=False)
        sent = [f"order-{i}".encode() for i in range(MESSAGES)]
        for payload in sent:
            producer.send(payload)  # returns once the broker acknowledged it
        taken = []
        for _ in range(ACKED):
            msg = consumer.receive(15_000)
            taken.append(msg.data())
            consumer.acknowledge(msg)
        _wait_until(lambda: _backlog(broker, "orders") == MESSAGES - ACKED, 30,
                    "the broker to take the acknowledgements")
        client.close()

        broker.kill()
        assert not (tmp_path / "data" / "metadata.db").exists()
        broker.start()
        assert "metadata in ZooKeeper zk:" in broker.read_log()

        assert _admin(broker, "GET",
                      "/admin/v2/persistent/public/default/zk-orders/partitions") == {
            "partitions": PARTITIONS
        }
        client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=logger)
        consumer = client.subscribe(TOPIC, "orders", consumer_type=pulsar.ConsumerType.Shared)
        rest = _receive_all(consumer, MESSAGES - ACKED)
        assert sorted(rest + taken) == sorted(sent), "cursor kept: the rest, exactly"
        audit = client.subscribe(TOPIC, "audit",
                                 initial_position=pulsar.InitialPosition.Earliest)
        assert sorted(_receive_all(audit, MESSAGES)) == sorted(sent)
        client.close()
    finally:
        broker.stop()

    store = ZooKeeperMetadataStore(zk_url, operation_timeout_s=10)
    try:
        assert store.get(
            "/admin/partitioned-topics/public/default/persistent/zk-orders"
        ) is not None
        assert store.children("/managed-ledgers") != []
        # The coordinators the cluster was initialized with, not the broker default.
        assert json.loads(store.get(
            "/admin/partitioned-topics/pulsar/system/persistent/"
            "transaction_coordinator_assign"
        ).value) == {"partitions": 2}
    finally:
        store.close()


def test_zookeeper_outage_fails_admin_within_the_timeout_and_topics_keep_serving(
    tmp_path: Path,
) -> None:
    """ZooKeeper killed under a running broker: an admin request that needs metadata
    answers 500 within metadataStoreOperationTimeoutSeconds, a loaded topic keeps
    taking and delivering messages, and all is well once ZooKeeper is back."""
    require_zookeeper()
    with ZooKeeperProcess(tmp_path / "zk") as server:
        broker = BrokerProcess(tmp_path / "data", settings={
            "metadataStoreUrl": server.url("/outage"),
            "metadataStoreOperationTimeoutSeconds": "1",
        }).start()
        logger = logging.getLogger("pulsar-client")
        logger.setLevel(logging.ERROR)
        try:
            client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=logger)
            topic = "persistent://public/default/zk-outage"
            consumer = client.subscribe(topic, "s")
            producer = client.create_producer(topic, batching_enabled=False)
            producer.send(b"before")
            assert consumer.receive(15_000).data() == b"before"

            server.kill()
            producer.send(b"during")
            assert consumer.receive(15_000).data() == b"during"
            started = time.monotonic()
            with pytest.raises(urllib.error.HTTPError) as refused:
                _admin(broker, "GET", "/admin/v2/tenants")
            assert refused.value.code == 500
            refused.value.close()
            assert time.monotonic() - started < 10.0  # bounded by the 1 s timeout

            server.start()
            _wait_until(lambda: _tenants_or_none(broker) == ["public", "pulsar"], 30,
                        "admin to answer again")
            producer.send(b"after")
            assert consumer.receive(15_000).data() == b"after"
            client.close()
        finally:
            broker.stop()


def _tenants_or_none(broker: BrokerProcess) -> Any:
    try:
        return _admin(broker, "GET", "/admin/v2/tenants")
    except urllib.error.HTTPError as exc:
        exc.close()
        return None


def test_a_broker_whose_zookeeper_does_not_answer_does_not_start(tmp_path: Path) -> None:
    from quasar.testing.process import free_port

    broker = BrokerProcess(tmp_path / "data", settings={
        "metadataStoreUrl": f"zk:127.0.0.1:{free_port()}/nobody",
        "metadataStoreOperationTimeoutSeconds": "1",
    })
    with pytest.raises(RuntimeError, match="broker exited with 1") as failed:
        broker.start()
    assert "error: cannot open the metadata store: ZooKeeper" in str(failed.value)
    assert "did not answer within 1s" in str(failed.value)
