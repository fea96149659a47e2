"""The blocking transaction API (``quasar.client.Client(..., enable_transaction=True)``)
against the fake broker running on its own event-loop thread."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import quasar.client as pulsar
from quasar.protocol import pb

from ..fakes.threaded import ThreadedFakeBroker

T = pb.BaseCommand


@pytest.fixture
def fake() -> Iterator[ThreadedFakeBroker]:
    f = ThreadedFakeBroker()
    f.broker.enable_transactions(2)
    yield f
    f.close()


@pytest.fixture
def client(fake: ThreadedFakeBroker) -> Iterator[pulsar.Client]:
    c = pulsar.Client(
        fake.broker.url, operation_timeout_seconds=5, enable_transaction=True
    )
    yield c
    c.close()


def wait_until(predicate: Callable[[], Any], timeout_s: float = 5.0) -> None:
    """Poll a condition another thread will make true, within a bound."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_blocking_send_ack_commit(fake: ThreadedFakeBroker, client: pulsar.Client) -> None:
    consumer = client.subscribe("fake", "sub")
    producer = client.create_producer("fake")
    producer.send(b"in")
    msg = consumer.receive(2000)
    txn = client.new_transaction(timeout_ms=30_000)
    assert isinstance(txn, pulsar.Transaction)
    assert txn.id == txn.id() == (0, 0)
    assert txn.state() is pulsar.TransactionState.OPEN
    assert producer.send(b"out", txn=txn).entry_id() == 1
    consumer.acknowledge(msg, txn=txn)
    txn.commit()
    assert txn.state() is pulsar.TransactionState.COMMITTED
    b = fake.broker
    assert (b.commands(T.SEND)[-1].send.txnid_most_bits, b.commands(T.SEND)[-1].send.txnid_least_bits) == (0, 0)
    assert b.commands(T.ACK)[-1].ack.txnid_most_bits == 0
    assert b.commands(T.END_TXN)[0].endTxn.txn_action == pb.COMMIT


def test_commit_right_after_send_async_includes_those_sends(
    fake: ThreadedFakeBroker, client: pulsar.Client
) -> None:
    producer = client.create_producer("fake")
    txn = client.new_transaction()
    results: list[pulsar.Result] = []
    for i in range(200):
        producer.send_async(bytes([i % 256]), lambda r, m: results.append(r), txn=txn)
    # No flush: commit itself must wait for every message handed to send_async.
    txn.commit()
    wait_until(lambda: len(results) == 200)
    assert set(results) == {pulsar.Result.Ok}
    kinds = [c.type for c in fake.broker.received if c.type in (T.SEND, T.END_TXN)]
    assert kinds == [T.SEND] * 200 + [T.END_TXN]


def test_send_async_on_an_ended_transaction_reports_through_callback(
    client: pulsar.Client,
) -> None:
    producer = client.create_producer("fake")
    txn = client.new_transaction()
    txn.abort()
    results: list[pulsar.Result] = []
    producer.send_async(b"x", lambda r, m: results.append(r), txn=txn)
    producer.flush()
    assert results == [pulsar.Result.InvalidTxnStatusError]
    with pytest.raises(pulsar.InvalidTxnStatusError):
        producer.send(b"y", txn=txn)


def test_commit_async_and_abort_async(fake: ThreadedFakeBroker, client: pulsar.Client) -> None:
    t1 = client.new_transaction()
    t2 = client.new_transaction()
    assert t2.id.most_bits == 1  # round-robin over the two coordinators
    f1, f2 = t1.commit_async(), t2.abort_async()
    assert f1.result(5) is None and f2.result(5) is None
    assert t1.state() is pulsar.TransactionState.COMMITTED
    assert t2.state() is pulsar.TransactionState.ABORTED
    fake.broker.coordinator.errors[T.END_TXN] = [pb.TransactionNotFound]
    t3 = client.new_transaction()
    with pytest.raises(pulsar.TransactionNotFound):
        t3.commit_async().result(5)
    assert t3.state() is pulsar.TransactionState.ERROR


def test_errors_are_the_pulsar_names(fake: ThreadedFakeBroker, client: pulsar.Client) -> None:
    consumer = client.subscribe("fake", "sub")
    producer = client.create_producer("fake")
    producer.send(b"m")
    msg = consumer.receive(2000)
    txn = client.new_transaction()
    fake.on_loop(lambda: fake.broker.ack_errors.append(pb.TransactionConflict))
    with pytest.raises(pulsar.TransactionConflict):
        consumer.acknowledge(msg, txn=txn)
    with pytest.raises(pulsar.TransactionHasOperationFailed):
        txn.commit()
    assert txn.state() is pulsar.TransactionState.ABORTED


def test_transactions_must_be_enabled(fake: ThreadedFakeBroker) -> None:
    c = pulsar.Client(fake.broker.url)
    try:
        with pytest.raises(pulsar.TransactionsNotEnabled):
            c.new_transaction()
    finally:
        c.close()


def test_broker_without_transactions(fake: ThreadedFakeBroker, client: pulsar.Client) -> None:
    fake.broker.coordinator.enabled = False
    with pytest.raises(pulsar.NotAllowedError):
        client.new_transaction()


def test_a_transaction_belongs_to_its_client(fake: ThreadedFakeBroker, client: pulsar.Client) -> None:
    other = pulsar.Client(fake.broker.url, enable_transaction=True)
    try:
        producer = other.create_producer("fake")
        txn = client.new_transaction()
        with pytest.raises(pulsar.InvalidConfiguration, match="another client"):
            producer.send(b"x", txn=txn)
        txn.commit()  # the refused send is not an operation of the transaction
    finally:
        other.close()


def test_a_transaction_refuses_another_clients_handles_on_every_path(
    fake: ThreadedFakeBroker, client: pulsar.Client
) -> None:
    """A send to a partition the transaction already registered takes the producer's
    fast path, and an ack the consumer's: both still refuse a transaction of another
    client, and neither counts as one of its operations."""
    other = pulsar.Client(fake.broker.url, enable_transaction=True)
    try:
        own = client.create_producer("fake")
        foreign = other.create_producer("fake")
        consumer = other.subscribe("fake", "sub")
        own.send(b"plain")
        msg = consumer.receive(2000)
        txn = client.new_transaction()
        own.send(b"in txn", txn=txn)  # registers the partition with txn
        with pytest.raises(pulsar.InvalidConfiguration, match="another client"):
            foreign.send(b"x", txn=txn)
        with pytest.raises(pulsar.InvalidConfiguration, match="another client"):
            consumer.acknowledge(msg, txn)
        txn.commit()
        assert txn.state() == pulsar.TransactionState.COMMITTED
    finally:
        other.close()
