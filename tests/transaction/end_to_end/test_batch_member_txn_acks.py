"""Acks of single members of a batch entry inside transactions, against a real broker.

The broker needs the entry's batch size to keep the members acked by a transaction
apart from the rest; it takes it from what it dispatched to the acking consumer, and
reads the entry only when it does not know. Getting it wrong would make one member's
ack cover the whole entry: the members acked later, or released by an abort, would
never come again.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

import quasar.client as qc
from quasar.testing.process import BrokerProcess

RECEIVE_MS = 10_000


def _sub_stats(proc: BrokerProcess, topic: str, sub: str) -> dict[str, Any]:
    """The subscription's part of the topic stats (admin REST)."""
    path = topic.replace("persistent://", "persistent/")
    with urllib.request.urlopen(f"{proc.admin_url}/admin/v2/{path}/stats", timeout=30) as r:
        stats: dict[str, Any] = json.load(r)["subscriptions"][sub]
        return stats


def _backlog(proc: BrokerProcess, topic: str, sub: str) -> int:
    return int(_sub_stats(proc, topic, sub)["msgBacklog"])


def _unacked(proc: BrokerProcess, topic: str, sub: str) -> int:
    """Unacknowledged messages over the subscription's consumers."""
    return sum(int(c["unackedMessages"]) for c in _sub_stats(proc, topic, sub)["consumers"])


def _consume_one_batch(
    client: qc.Client, topic: str, count: int
) -> tuple[qc.Consumer, dict[bytes, qc.Message]]:
    """A Shared consumer that has received every member of one batch entry of
    ``count`` messages ``m0``, ``m1``, ...: (consumer, data -> message)."""
    consumer = client.subscribe(
        topic, "s", consumer_type=qc.ConsumerType.Shared,
        initial_position=qc.InitialPosition.Earliest,
    )
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=count,
        batching_max_publish_delay_ms=60_000,
    )
    for i in range(count):
        producer.send_async(b"m%d" % i, lambda result, msg_id: None)
    producer.flush()
    producer.close()
    got = {}
    for _ in range(count):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        got[msg.data()] = msg
    return consumer, got


def _commit_acks(client: qc.Client, consumer: qc.Consumer, *msgs: qc.Message) -> None:
    """Acknowledge ``msgs`` in one new transaction and commit it."""
    txn = client.new_transaction()
    for msg in msgs:
        consumer.acknowledge(msg, txn=txn)
    txn.commit()


def test_members_acked_in_transactions_stay_apart(broker: BrokerProcess) -> None:
    topic = "persistent://public/default/batch-member-txn-acks"
    client = qc.Client(broker.url, enable_transaction=True)
    try:
        consumer, msgs = _consume_one_batch(client, topic, 4)
        assert {m.message_id().batch_index() for m in msgs.values()} == {0, 1, 2, 3}

        _commit_acks(client, consumer, msgs[b"m0"], msgs[b"m1"])
        assert _backlog(broker, topic, "s") == 1  # the entry: two members still open

        # Another transaction may not take a member the first one holds pending.
        holder = client.new_transaction()
        consumer.acknowledge(msgs[b"m2"], txn=holder)
        rival = client.new_transaction()
        with pytest.raises(qc.TransactionConflict):
            consumer.acknowledge(msgs[b"m2"], txn=rival)
        rival.abort()
        holder.abort()  # m2 is released and comes again, m0 and m1 do not

        again = consumer.receive(timeout_millis=RECEIVE_MS)
        assert again.data() in (b"m2", b"m3")
        _commit_acks(
            client, consumer, msgs[b"m3"], again if again.data() == b"m2" else msgs[b"m2"]
        )
        assert _backlog(broker, topic, "s") == 0
    finally:
        client.close()


def test_a_batch_whose_open_members_are_all_pending_is_not_redelivered(
    broker: BrokerProcess,
) -> None:
    # Three members acknowledged on the cursor, the fourth pending in an open
    # transaction: nothing of the entry is left to deliver. The broker once sent it
    # anyway with an empty ack set, which on the wire reads "every member", so a
    # committed member came again and again (found by the kill -9 CTP test).
    topic = "persistent://public/default/batch-all-pending"
    client = qc.Client(broker.url, enable_transaction=True)
    try:
        consumer, msgs = _consume_one_batch(client, topic, 4)
        _commit_acks(client, consumer, msgs[b"m0"], msgs[b"m1"], msgs[b"m2"])
        holder = client.new_transaction()
        consumer.acknowledge(msgs[b"m3"], txn=holder)

        consumer.redeliver_unacknowledged_messages()
        # Redelivered entries go before new ones, so the next message tells whether
        # the batch came again.
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"after")
        after = consumer.receive(timeout_millis=RECEIVE_MS)
        assert after.data() == b"after"

        holder.abort()  # m3 is released: it, and only it, comes again
        again = consumer.receive(timeout_millis=RECEIVE_MS)
        assert (again.data(), again.message_id().batch_index()) == (b"m3", 3)
        _commit_acks(client, consumer, again, after)
        producer.close()
        assert _backlog(broker, topic, "s") == 0
    finally:
        client.close()


def test_an_abort_redelivers_only_the_members_it_held(broker: BrokerProcess) -> None:
    # Scenario 27 / INV-EO: after an abort exactly the aborted transaction's messages
    # come again. The consumer still holds the batch's other members unacknowledged;
    # the broker once re-sent the whole entry, so they arrived a second time.
    topic = "persistent://public/default/batch-abort-members"
    client = qc.Client(broker.url, enable_transaction=True)
    try:
        consumer, msgs = _consume_one_batch(client, topic, 4)
        aborted = client.new_transaction()
        consumer.acknowledge(msgs[b"m1"], txn=aborted)
        aborted.abort()

        again = consumer.receive(timeout_millis=RECEIVE_MS)
        assert (again.data(), again.message_id().batch_index()) == (b"m1", 1)
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"after")
        # Redelivered entries go before new ones: m0, m2 or m3 here would be copies.
        after = consumer.receive(timeout_millis=RECEIVE_MS)
        assert after.data() == b"after"

        _commit_acks(client, consumer, msgs[b"m0"], again, msgs[b"m2"], msgs[b"m3"], after)
        producer.close()
        assert _backlog(broker, topic, "s") == 0
    finally:
        client.close()


def test_a_batch_deleted_by_commits_leaves_its_consumer(broker: BrokerProcess) -> None:
    # A batch acknowledged member by member in transactions is deleted by the last
    # commit; the entry must leave the consumer's unacked messages then (it once
    # stayed until the consumer left), and a redelivery request must not bring
    # anything back.
    topic = "persistent://public/default/batch-committed-leaves-consumer"
    client = qc.Client(broker.url, enable_transaction=True)
    try:
        consumer, msgs = _consume_one_batch(client, topic, 3)
        assert _unacked(broker, topic, "s") == 3
        _commit_acks(client, consumer, msgs[b"m0"])
        assert _unacked(broker, topic, "s") == 3  # the entry is still in flight
        _commit_acks(client, consumer, msgs[b"m1"], msgs[b"m2"])
        assert _backlog(broker, topic, "s") == 0
        assert _unacked(broker, topic, "s") == 0

        consumer.redeliver_unacknowledged_messages()
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"after")
        assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"after"
        producer.close()
    finally:
        client.close()
