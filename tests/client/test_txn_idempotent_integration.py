"""Idempotent commit and abort against a real ``quasar standalone`` broker (PIP-255).

A transaction that ended is ended again through ``resume_transaction`` — by the same
client, by another client that names the first one's ``client_name``, and after the
broker was killed (-9) and restarted: the same action succeeds, the opposite one
fails with InvalidTxnStatus, and the messages are visible exactly once. The admin
endpoint lists a client name's open and terminated transactions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import quasar.client as pulsar

from .conftest import BrokerProcess

RECEIVE_MS = 5000
QUIET_MS = 500


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("idem-broker") / "data",
        {"transactionCoordinatorEnabled": "true", "transactionCoordinatorCount": "2"},
    )
    proc.start()
    yield proc
    proc.kill()


def new_client(broker: BrokerProcess, **kwargs: object) -> pulsar.Client:
    return pulsar.Client(
        broker.service_url,
        operation_timeout_seconds=15,
        enable_transaction=True,
        admin_url=f"http://127.0.0.1:{broker.http_port}",
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
def client(txn_broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = new_client(txn_broker, client_name=f"it-{uuid.uuid4().hex[:8]}")
    yield c
    c.close()


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/idem-{uuid.uuid4().hex[:12]}"


def read_all(consumer: pulsar.Consumer) -> list[bytes]:
    out = []
    while True:
        try:
            msg = consumer.receive(QUIET_MS)
        except pulsar.Timeout:
            return out
        consumer.acknowledge(msg)
        out.append(msg.data())


def test_commit_again_succeeds_abort_after_commit_fails(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    txn = client.new_transaction()
    producer.send(b"once", txn=txn)
    txn.commit()
    for _ in range(2):
        again = client.resume_transaction(txn.id)
        again.commit()
        assert again.state() is pulsar.TransactionState.COMMITTED
    opposite = client.resume_transaction(tuple(txn.id))
    with pytest.raises(pulsar.InvalidTxnStatusError, match="(?i)commit"):
        opposite.abort()
    assert opposite.state() is pulsar.TransactionState.ERROR
    assert read_all(consumer) == [b"once"]


def test_abort_again_succeeds_commit_after_abort_fails(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    txn = client.new_transaction()
    producer.send(b"never", txn=txn)
    txn.abort()
    client.resume_transaction(txn.id).abort()
    with pytest.raises(pulsar.InvalidTxnStatusError):
        client.resume_transaction(txn.id).commit()
    producer.send(b"after")
    assert read_all(consumer) == [b"after"]


def test_another_client_resumes_under_the_first_ones_name(
    client: pulsar.Client, txn_broker: BrokerProcess
) -> None:
    txn = client.new_transaction()
    txn.commit()
    other = new_client(txn_broker)  # another process: its own random name
    try:
        assert other.client_name != client.client_name
        named = other.resume_transaction(txn.id, client_name=client.client_name)
        named.commit()
        assert named.state() is pulsar.TransactionState.COMMITTED
        # Under its own name the coordinator has nothing preserved for it: the
        # handle cannot know whether it ended.
        with pytest.raises(pulsar.TransactionOutcomeUnknown) as info:
            other.resume_transaction(txn.id).commit()
        assert info.value.txn_id == txn.id
    finally:
        other.close()


def test_resume_commits_a_transaction_still_open(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic)
    txn = client.new_transaction(timeout_ms=60_000)
    producer.send(b"via-resume", txn=txn)
    resumed = client.resume_transaction(txn.id)
    resumed.commit()
    assert read_all(consumer) == [b"via-resume"]
    txn.commit()  # the original handle: the same action again succeeds
    assert txn.state() is pulsar.TransactionState.COMMITTED


def test_outcomes_survive_a_broker_kill(
    txn_broker: BrokerProcess, topic: str
) -> None:
    name = f"restart-{uuid.uuid4().hex[:8]}"
    c = new_client(txn_broker, client_name=name)
    try:
        producer = c.create_producer(topic)
        committed = c.new_transaction()
        producer.send(b"c", txn=committed)
        committed.commit()
        aborted = c.new_transaction()
        producer.send(b"a", txn=aborted)
        aborted.abort()
    finally:
        c.close()
    txn_broker.kill()
    txn_broker.start()
    c = new_client(txn_broker, client_name=name)
    try:
        c.resume_transaction(committed.id).commit()
        c.resume_transaction(aborted.id).abort()
        with pytest.raises(pulsar.InvalidTxnStatusError):
            c.resume_transaction(committed.id).abort()
        with pytest.raises(pulsar.InvalidTxnStatusError):
            c.resume_transaction(aborted.id).commit()
        consumer = c.subscribe(
            topic, "after", initial_position=pulsar.InitialPosition.Earliest
        )
        assert read_all(consumer) == [b"c"]
    finally:
        c.close()


def test_get_client_transactions(client: pulsar.Client) -> None:
    committed = client.new_transaction()
    committed.commit()
    aborted = client.new_transaction()
    aborted.abort()
    still_open = client.new_transaction(timeout_ms=60_000)
    try:
        mine = client.get_client_transactions()
        assert mine.client_name == client.client_name
        assert [t.txn_id for t in mine.open] == [still_open.id]
        assert mine.open[0].status == "OPEN"
        ended = {t.txn_id: t.status for t in mine.terminated}
        assert ended == {committed.id: "COMMITTED", aborted.id: "ABORTED"}
        assert all(t.end_time_ms for t in mine.terminated)
        assert mine.unavailable_coordinators == []
        nobody = client.get_client_transactions(f"nobody-{uuid.uuid4().hex}")
        assert nobody.open == [] and nobody.terminated == []
    finally:
        still_open.abort()
