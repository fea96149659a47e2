"""Client transactions against a real ``quasar standalone`` broker.

The scenarios follow Pulsar's ``TransactionEndToEndTest``: a commit makes messages on
several partitions visible together and exactly once, an abort hides them for good,
acks in a transaction take effect at commit and are undone by an abort, a message
pending in one transaction cannot be acked in another, and a consume-transform-produce
step is all-or-nothing.

"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import quasar.client as pulsar
from quasar.client import aio

from .conftest import BrokerProcess

RECEIVE_MS = 5000
QUIET_MS = 500
COORDINATORS = 4



@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("txn-broker") / "data",
        {
            "transactionCoordinatorEnabled": "true",
            "transactionCoordinatorCount": str(COORDINATORS),
        },
    )
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture
def client(txn_broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = pulsar.Client(
        txn_broker.service_url, operation_timeout_seconds=15, enable_transaction=True
    )
    yield c
    c.close()


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/txn-{uuid.uuid4().hex[:12]}"


def drain(consumer: pulsar.Consumer, timeout_ms: int = QUIET_MS) -> list[pulsar.Message]:
    """Everything that arrives until the consumer stays quiet for ``timeout_ms``."""
    out = []
    while True:
        try:
            out.append(consumer.receive(timeout_ms))
        except pulsar.Timeout:
            return out


def receive_n(consumer: pulsar.Consumer, n: int) -> list[pulsar.Message]:
    return [consumer.receive(RECEIVE_MS) for _ in range(n)]


def data(msgs: list[pulsar.Message]) -> list[bytes]:
    return [m.data() for m in msgs]


# --- coordinators only ---------------------------------------------------------------


def test_new_transactions_use_every_coordinator(client: pulsar.Client) -> None:
    txns = [client.new_transaction(timeout_ms=30_000) for _ in range(COORDINATORS * 2)]
    assert sorted(t.id.most_bits for t in txns) == sorted(
        list(range(COORDINATORS)) * 2
    )
    assert len({t.id() for t in txns}) == len(txns)
    for i, txn in enumerate(txns):
        if i % 2:
            txn.commit()
            txn.commit()  # the same end again succeeds
            assert txn.state() is pulsar.TransactionState.COMMITTED
            with pytest.raises(pulsar.InvalidTxnStatusError):
                txn.abort()
        else:
            txn.abort()
            assert txn.state() is pulsar.TransactionState.ABORTED
            with pytest.raises(pulsar.InvalidTxnStatusError):
                txn.commit()


def test_ending_a_committed_transaction_the_other_way_fails(
    client: pulsar.Client, txn_broker: BrokerProcess
) -> None:
    """An abort of a transaction the coordinator committed fails definitely: today
    with TransactionNotFound (ended transactions are forgotten), with InvalidTxnStatus
    once the coordinator remembers them. The client moves to ERROR either way."""
    txn = client.new_transaction()
    txn.commit()
    # Another client that only knows the id (as after a restart of the application).
    other = pulsar.Client(txn_broker.service_url, enable_transaction=True)
    try:
        stranger = other.new_transaction()
        stranger.abort()
        # As Pulsar's txnIndividualAckTest does: force a client object back to OPEN
        # on the id of an ended transaction and end it again.
        stranger._impl.txn_id = txn.id
        stranger._impl._state = pulsar.TransactionState.OPEN
        with pytest.raises((pulsar.TransactionNotFound, pulsar.InvalidTxnStatusError)):
            stranger.abort()
        assert stranger.state() is pulsar.TransactionState.ERROR
    finally:
        other.close()


# --- produce and consume in transactions ------------------------------------------------


def test_commit_is_atomic_across_partitions(
    client: pulsar.Client, txn_broker: BrokerProcess, topic: str
) -> None:
    txn_broker.create_partitioned_topic(topic, 3)
    consumer = client.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Shared
    )
    producer = client.create_producer(topic)
    txn = client.new_transaction()
    ids = [producer.send(f"m{i}".encode(), txn=txn) for i in range(30)]
    assert {m.partition() for m in ids} == {0, 1, 2}
    assert drain(consumer) == []  # nothing is visible before the commit
    txn.commit()
    got = receive_n(consumer, 30)
    assert sorted(data(got)) == sorted(f"m{i}".encode() for i in range(30))
    assert drain(consumer) == []  # exactly once
    for m in got:
        consumer.acknowledge(m)


@pytest.mark.parametrize("batching", [False, True])
def test_interleaved_transactions_commit(
    client: pulsar.Client, topic: str, batching: bool
) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(
        topic, batching_enabled=batching, batching_max_publish_delay_ms=20
    )
    t1 = client.new_transaction()
    t2 = client.new_transaction()
    results: list[pulsar.Result] = []
    for i in range(50):
        txn = t1 if i % 2 == 0 else t2
        producer.send_async(f"m{i}".encode(), lambda r, m: results.append(r), txn=txn)
    producer.flush()
    assert set(results) == {pulsar.Result.Ok}
    assert drain(consumer) == []
    t1.commit()
    t2.commit()
    got = receive_n(consumer, 50)
    assert sorted(data(got)) == sorted(f"m{i}".encode() for i in range(50))
    assert drain(consumer) == []


def test_aborted_messages_are_never_delivered(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    txn = client.new_transaction()
    for i in range(5):
        producer.send(f"aborted-{i}".encode(), txn=txn)
    txn.abort()
    producer.send(b"after")
    # The aborted entries are skipped and do not hold back what follows them.
    assert data(receive_n(consumer, 1)) == [b"after"]
    assert drain(consumer) == []
    # A new subscription from the start does not see them either.
    again = client.subscribe(
        topic, "from-start", initial_position=pulsar.InitialPosition.Earliest
    )
    assert data(drain(again, 1000)) == [b"after"]


def test_open_transaction_holds_back_later_messages(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    txn = client.new_transaction()
    producer.send(b"in-txn", txn=txn)
    producer.send(b"plain")
    # Order is kept: nothing after the open transaction's first message is dispatched.
    assert drain(consumer) == []
    txn.commit()
    assert data(receive_n(consumer, 2)) == [b"in-txn", b"plain"]


def test_transaction_timeout_aborts(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    txn = client.new_transaction(timeout_ms=1000)
    producer.send(b"too-late", txn=txn)
    # The client marks it TIME_OUT on its own timer; the coordinator aborts it.
    assert drain(consumer, 2000) == []
    assert txn.state() is pulsar.TransactionState.TIME_OUT
    with pytest.raises(pulsar.InvalidTxnStatusError):
        producer.send(b"x", txn=txn)
    with pytest.raises(pulsar.InvalidTxnStatusError):
        txn.commit()
    producer.send(b"after")
    assert data(receive_n(consumer, 1)) == [b"after"]


# --- acks in transactions --------------------------------------------------------------


def test_acks_take_effect_at_commit(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"m{i}".encode())
    got = receive_n(consumer, 10)
    txn = client.new_transaction()
    for m in got:
        consumer.acknowledge(m, txn=txn)
    txn.commit()
    consumer.close()
    again = client.subscribe(topic, "sub")
    assert drain(again, 1000) == []


def test_abort_makes_acked_messages_deliverable_again(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    expected = {f"m{i}".encode() for i in range(10)}
    for payload in sorted(expected):
        producer.send(payload)
    got = receive_n(consumer, 10)
    txn = client.new_transaction()
    for m in got:
        consumer.acknowledge(m, txn=txn)
    txn.abort()
    # Pulsar's broker redelivers the un-acked messages on abort; asking as well makes
    # the test independent of that (duplicates are folded by payload).
    consumer.redeliver_unacknowledged_messages()
    seen: dict[bytes, pulsar.Message] = {}
    while set(seen) != expected:
        m = consumer.receive(RECEIVE_MS)
        seen.setdefault(m.data(), m)
    txn2 = client.new_transaction()
    for m in seen.values():
        consumer.acknowledge(m, txn=txn2)
    txn2.commit()
    consumer.close()
    again = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    assert drain(again, 1000) == []


def test_cumulative_ack_in_transaction_abort_redelivers(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(5):
        producer.send(f"m{i}".encode())
    got = receive_n(consumer, 5)
    txn = client.new_transaction()
    consumer.acknowledge_cumulative(got[-1], txn=txn)
    txn.abort()
    again = receive_n(consumer, 5)
    assert data(again) == data(got)
    txn2 = client.new_transaction()
    consumer.acknowledge_cumulative(again[-1], txn=txn2)
    txn2.commit()
    consumer.close()
    assert drain(client.subscribe(topic, "sub"), 1000) == []


def test_ack_pending_in_another_transaction_conflicts(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    producer.send(b"m")
    msg = consumer.receive(RECEIVE_MS)
    t1 = client.new_transaction()
    t2 = client.new_transaction()
    consumer.acknowledge(msg, txn=t1)
    with pytest.raises(pulsar.TransactionConflict):
        consumer.acknowledge(msg, txn=t2)
    t1.commit()
    with pytest.raises(pulsar.TransactionHasOperationFailed):
        t2.commit()
    assert t2.state() is pulsar.TransactionState.ABORTED


async def test_consume_transform_produce_is_all_or_nothing(
    txn_broker: BrokerProcess, topic: str
) -> None:
    out_topic = topic + "-out"
    client = aio.Client(
        txn_broker.service_url, operation_timeout_seconds=15, enable_transaction=True
    )
    try:
        source = await client.subscribe(topic, "pipeline")
        sink = await client.subscribe(out_topic, "check")
        producer = await client.create_producer(topic)
        out = await client.create_producer(out_topic)
        for i in range(5):
            await producer.send(f"in{i}".encode())
        inputs = [await source.receive(RECEIVE_MS) for _ in range(5)]

        # First attempt fails half-way and is aborted: no output, inputs stay unacked.
        failed = await client.new_transaction()
        for m in inputs[:3]:
            await out.send(m.data().upper(), txn=failed)
            await source.acknowledge(m, txn=failed)
        await failed.abort()

        # Second attempt commits: every output once, every input acked.
        await source.redeliver_unacknowledged_messages()
        seen: dict[bytes, pulsar.Message] = {}
        while len(seen) < 5:
            m = await source.receive(RECEIVE_MS)
            seen.setdefault(m.data(), m)
        txn = await client.new_transaction()
        for m in seen.values():
            await out.send(m.data().upper(), txn=txn)
            await source.acknowledge(m, txn=txn)
        await txn.commit()

        outputs = sorted([(await sink.receive(RECEIVE_MS)).data() for _ in range(5)])
        assert outputs == sorted(f"IN{i}".encode() for i in range(5))
        with pytest.raises(pulsar.Timeout):
            await sink.receive(QUIET_MS)
        await source.close()
        again = await client.subscribe(topic, "pipeline")
        with pytest.raises(pulsar.Timeout):
            await again.receive(1000)
    finally:
        await client.close()
