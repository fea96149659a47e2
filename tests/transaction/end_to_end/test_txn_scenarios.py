"""Transaction scenarios end to end through quasar's client and a real
broker process: a timeout aborts and redelivers acked messages, and a Shared
subscription with batching and repeated consumer restarts never sees aborted data."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import quasar.client as qc
from quasar.testing.process import BrokerProcess

RECEIVE_MS = 10_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("txn-scen") / "data").start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[qc.Client]:
    c = qc.Client(broker.url, enable_transaction=True, operation_timeout_seconds=15)
    yield c
    c.close()


def _topic() -> str:
    return f"persistent://public/default/txn-{uuid.uuid4().hex[:10]}"


def test_timeout_aborts_and_redelivers_acked_messages(client: qc.Client) -> None:
    topic = _topic()
    consumer = client.subscribe(topic, "s", consumer_type=qc.ConsumerType.Shared,
                                initial_position=qc.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    msgs = [consumer.receive(RECEIVE_MS) for _ in range(3)]
    txn = client.new_transaction(timeout_ms=800)
    for m in msgs:
        consumer.acknowledge(m, txn=txn)
    # The coordinator aborts the transaction at its deadline; the pending acks are
    # dropped and the broker delivers the messages again (counted as redeliveries).
    again = sorted((consumer.receive(RECEIVE_MS) for _ in range(3)), key=lambda m: m.data())
    assert [m.data() for m in again] == [b"m0", b"m1", b"m2"]
    assert all(m.redelivery_count() >= 1 for m in again)
    for m in again:
        consumer.acknowledge(m)


def test_shared_batched_restarts_never_deliver_aborted(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = _topic()
    rng = random.Random(7)
    setup = qc.Client(broker.url, enable_transaction=True, operation_timeout_seconds=15)
    first = setup.subscribe(topic, "shared", consumer_type=qc.ConsumerType.Shared,
                            initial_position=qc.InitialPosition.Earliest)
    first.close()
    producer = setup.create_producer(topic, batching_enabled=True,
                                     batching_max_publish_delay_ms=5, block_if_queue_full=True)
    committed: set[bytes] = set()
    aborted: set[bytes] = set()
    for t in range(30):
        txn = setup.new_transaction()
        batch = [f"t{t}-m{i}".encode() for i in range(rng.randint(1, 8))]
        for payload in batch:
            producer.send_async(payload, lambda res, mid: None, txn=txn)
        if rng.random() < 0.4:
            txn.abort()
            aborted.update(batch)
        else:
            txn.commit()
            committed.update(batch)
        producer.send(f"plain-{t}".encode())
        committed.add(f"plain-{t}".encode())
    seen: set[bytes] = set()
    # Consumers come and go: each takes a few messages, acks some, and closes without
    # acking the rest, so they are redelivered to the next consumer.
    for _round in range(12):
        clients = [qc.Client(broker.url) for _ in range(2)]
        consumers = [
            c.subscribe(topic, "shared", consumer_type=qc.ConsumerType.Shared,
                        receiver_queue_size=10)
            for c in clients
        ]
        for consumer in consumers:
            for _ in range(rng.randint(3, 10)):
                try:
                    m = consumer.receive(1000)
                except qc.Timeout:
                    break
                assert m.data() not in aborted, f"aborted message delivered: {m.data()!r}"
                seen.add(m.data())
                if rng.random() < 0.7:
                    consumer.acknowledge(m)
        for c in clients:
            c.close()
    # Finally drain everything that is left.
    final = setup.subscribe(topic, "shared", consumer_type=qc.ConsumerType.Shared)
    while seen != committed:
        m = final.receive(RECEIVE_MS)
        assert m.data() not in aborted, f"aborted message delivered: {m.data()!r}"
        seen.add(m.data())
        final.acknowledge(m)
    assert seen == committed
    setup.close()
