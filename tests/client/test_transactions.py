"""Client transactions against the in-process fake broker and its fake coordinator.

Everything here is about the client's side of the protocol: discovery and the TC
handshake, round-robin and routing by ``txnid_most_bits``, registration once per
partition / subscription, the txn ids in SEND, metadata and ACK, commit waiting for
in-flight operations, a failed operation turning commit into abort, END_TXN retried
after a lost answer until a definite one, the client-side timeout, and error mapping.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from quasar.client import aio
from quasar.client.exceptions import (
    InvalidConfiguration,
    TransactionHasOperationFailed,
    TransactionOutcomeUnknown,
    TransactionsNotEnabled,
)
from quasar.client.message_id import MessageId
from quasar.client.txn_state import (
    TransactionState,
    TxnID,
    can_transition,
    check_transition,
)
from quasar.errors import (
    AlreadyClosed,
    InvalidTxnStatus,
    NotAllowedError,
    Timeout,
    TransactionConflict,
    TransactionNotFound,
)
from quasar.protocol import parse_batch, parse_entry, pb
from quasar.protocol.ack_set import bits_to_words

from ..fakes.broker import TC_ASSIGN, FakeBroker

T = pb.BaseCommand
S = TransactionState
TOPIC = "persistent://public/default/fake"


async def wait_for(predicate: Callable[[], Any], timeout_s: float = 5.0) -> None:
    """Await a condition the event loop will make true, within a bound."""
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.005)


def make_client(url: str, **kwargs: Any) -> aio.Client:
    c = aio.Client(url, operation_timeout_seconds=5, enable_transaction=True, **kwargs)
    # Fast retries keep the tests short; the backoff schedule is unit-tested elsewhere.
    c.config.initial_backoff_ms = 5
    c.config.max_backoff_ms = 50
    return c


@pytest.fixture
async def fake() -> AsyncIterator[FakeBroker]:
    broker = FakeBroker()
    broker.enable_transactions(1)
    await broker.start()
    yield broker
    await broker.stop()


@pytest.fixture
async def client(fake: FakeBroker) -> AsyncIterator[aio.Client]:
    c = make_client(fake.url)
    yield c
    await c.close()


def txn_of(fake: FakeBroker, txn: aio.Transaction) -> Any:
    return fake.coordinator.txns[(txn.id.most_bits, txn.id.least_bits)]


def entry_metadata(fake: FakeBroker, topic: str = TOPIC) -> list[Any]:
    return [parse_entry(e).metadata for e in fake.topic(topic).entries]


# --- ids -----------------------------------------------------------------------------


def test_txn_id_is_a_tuple_and_callable() -> None:
    tid = TxnID(3, 17)
    assert tid() is tid
    most, least = tid
    assert (most, least) == (3, 17) == tid()
    assert str(tid) == "(3,17)"


# The expected table, written out independently of the implementation's.
ALLOWED = {
    (S.OPEN, S.COMMITTING),
    (S.OPEN, S.ABORTING),
    (S.OPEN, S.TIME_OUT),
    (S.COMMITTING, S.COMMITTED),
    (S.COMMITTING, S.ABORTING),
    (S.COMMITTING, S.ERROR),
    (S.ABORTING, S.ABORTED),
    (S.ABORTING, S.ERROR),
}


@pytest.mark.parametrize("current", list(S))
@pytest.mark.parametrize("new", list(S))
def test_every_state_transition(current: S, new: S) -> None:
    allowed = (current, new) in ALLOWED
    assert can_transition(current, new) is allowed
    if allowed:
        check_transition(TxnID(0, 0), current, new)
    else:
        with pytest.raises(InvalidTxnStatus):
            check_transition(TxnID(0, 0), current, new)


def test_final_states() -> None:
    assert {s for s in S if s.is_final} == {S.COMMITTED, S.ABORTED, S.ERROR, S.TIME_OUT}


# --- discovery and the coordinator handshake -----------------------------------------


async def test_discovery_connects_every_coordinator(fake: FakeBroker) -> None:
    fake.enable_transactions(3)
    client = make_client(fake.url)
    try:
        txn = await client.new_transaction(timeout_ms=12_345)
        meta = [c.partitionMetadata.topic for c in fake.commands(T.PARTITIONED_METADATA)]
        assert meta == [TC_ASSIGN]
        looked_up = sorted(c.lookupTopic.topic for c in fake.commands(T.LOOKUP))
        assert looked_up == [f"{TC_ASSIGN}-partition-{i}" for i in range(3)]
        connects = fake.commands(T.TC_CLIENT_CONNECT_REQUEST)
        assert sorted(c.tcClientConnectRequest.tc_id for c in connects) == [0, 1, 2]
        (new,) = fake.commands(T.NEW_TXN)
        # Milliseconds in the field named seconds, as Pulsar's Java client sends.
        assert new.newTxn.txn_ttl_seconds == 12_345
        assert txn.id == (0, 0) and txn.state() is S.OPEN
        # Discovery happens once.
        await client.new_transaction()
        assert len(fake.commands(T.PARTITIONED_METADATA)) == 1
        assert len(fake.commands(T.TC_CLIENT_CONNECT_REQUEST)) == 3
    finally:
        await client.close()


async def test_unpartitioned_assign_topic_is_coordinator_zero(fake: FakeBroker) -> None:
    fake.enable_transactions(0)
    client = make_client(fake.url)
    try:
        txn = await client.new_transaction()
        assert [c.lookupTopic.topic for c in fake.commands(T.LOOKUP)] == [TC_ASSIGN]
        (connect,) = fake.commands(T.TC_CLIENT_CONNECT_REQUEST)
        assert connect.tcClientConnectRequest.tc_id == 0
        assert fake.commands(T.NEW_TXN)[0].newTxn.tc_id == 0
        assert txn.id.most_bits == 0
    finally:
        await client.close()


async def test_no_handshake_with_protocol_18(fake: FakeBroker, client: aio.Client) -> None:
    fake.protocol_version = 18
    await client.new_transaction()
    assert fake.commands(T.TC_CLIENT_CONNECT_REQUEST) == []
    assert len(fake.commands(T.NEW_TXN)) == 1


async def test_handshake_retries_coordinator_not_found(
    fake: FakeBroker, client: aio.Client
) -> None:
    fake.coordinator.errors[T.TC_CLIENT_CONNECT_REQUEST] = [
        pb.TransactionCoordinatorNotFound,
        pb.TransactionCoordinatorNotFound,
    ]
    txn = await client.new_transaction()
    assert len(fake.commands(T.TC_CLIENT_CONNECT_REQUEST)) == 3
    # Each failure makes the client look the coordinator up again.
    assert len(fake.commands(T.LOOKUP)) == 3
    assert txn.state() is S.OPEN


async def test_not_allowed_means_transactions_unavailable(
    fake: FakeBroker, client: aio.Client
) -> None:
    fake.coordinator.enabled = False
    with pytest.raises(NotAllowedError):
        await client.new_transaction()
    assert len(fake.commands(T.TC_CLIENT_CONNECT_REQUEST)) == 1  # not retried
    assert fake.commands(T.NEW_TXN) == []
    # A later call discovers again (the broker may have been reconfigured).
    fake.coordinator.enabled = True
    txn = await client.new_transaction()
    assert txn.state() is S.OPEN


async def test_new_transaction_needs_enable_transaction(fake: FakeBroker) -> None:
    client = aio.Client(fake.url)
    try:
        with pytest.raises(TransactionsNotEnabled) as info:
            await client.new_transaction()
        assert isinstance(info.value, InvalidConfiguration)
        assert "enable_transaction=True" in str(info.value)
    finally:
        await client.close()
    assert fake.received == []  # nothing was asked of the broker


@pytest.mark.parametrize("timeout_ms", [0, -5, 1.5, True, "100"])
async def test_new_transaction_validates_timeout(client: aio.Client, timeout_ms: Any) -> None:
    with pytest.raises(InvalidConfiguration):
        await client.new_transaction(timeout_ms=timeout_ms)


async def test_new_txn_error_is_typed(fake: FakeBroker, client: aio.Client) -> None:
    await client.new_transaction()  # connected
    fake.coordinator.errors[T.NEW_TXN] = [pb.NotAllowedError]
    with pytest.raises(NotAllowedError):
        await client.new_transaction()


async def test_new_txn_resent_on_coordinator_not_found(
    fake: FakeBroker, client: aio.Client
) -> None:
    fake.coordinator.errors[T.NEW_TXN] = [pb.TransactionCoordinatorNotFound]
    txn = await client.new_transaction()
    assert len(fake.commands(T.NEW_TXN)) == 2
    # Reconnected: looked up and greeted the coordinator again before resending.
    assert len(fake.commands(T.TC_CLIENT_CONNECT_REQUEST)) == 2
    assert txn.id == (0, 0)


# --- routing -------------------------------------------------------------------------


async def test_new_txn_round_robin(fake: FakeBroker) -> None:
    fake.enable_transactions(3)
    client = make_client(fake.url)
    try:
        txns = [await client.new_transaction() for _ in range(6)]
        assert [c.newTxn.tc_id for c in fake.commands(T.NEW_TXN)] == [0, 1, 2, 0, 1, 2]
        assert [t.id for t in txns] == [
            (0, 0),
            (1, 0),
            (2, 0),
            (0, 1),
            (1, 1),
            (2, 1),
        ]
    finally:
        await client.close()


async def test_requests_go_to_the_coordinator_of_most_bits(fake: FakeBroker) -> None:
    other = FakeBroker()
    await other.start()
    try:
        # Coordinator 0 lives on `fake`, coordinator 1 on `other`.
        fake.enable_transactions(2)
        fake.coordinator.hosted = {0}
        other.coordinator.hosted = {1}
        fake.owners[f"{TC_ASSIGN}-partition-1"] = other.url
        client = make_client(fake.url)
        try:
            producer = await client.create_producer("fake")
            t0 = await client.new_transaction()
            t1 = await client.new_transaction()
            assert (t0.id.most_bits, t1.id.most_bits) == (0, 1)
            await producer.send(b"a", txn=t1)
            await producer.send(b"b", txn=t0)
            await t1.commit()
            await t0.abort()
        finally:
            await client.close()
        for broker, tc in ((fake, 0), (other, 1)):
            for type_, field in (
                (T.ADD_PARTITION_TO_TXN, "addPartitionToTxn"),
                (T.END_TXN, "endTxn"),
            ):
                cmds = broker.commands(type_)
                assert len(cmds) == 1
                assert getattr(cmds[0], field).txnid_most_bits == tc
        assert other.commands(T.END_TXN)[0].endTxn.txn_action == pb.COMMIT
        assert fake.commands(T.END_TXN)[0].endTxn.txn_action == pb.ABORT
        # The data went to the topic's owner, not to the coordinator's broker.
        assert other.commands(T.SEND) == []
    finally:
        await other.stop()


async def test_end_txn_resent_after_coordinator_not_found(
    fake: FakeBroker, client: aio.Client
) -> None:
    txn = await client.new_transaction()
    lookups = len(fake.commands(T.LOOKUP))
    fake.coordinator.errors[T.END_TXN] = [pb.TransactionCoordinatorNotFound]
    await txn.commit()
    assert txn.state() is S.COMMITTED
    assert len(fake.commands(T.END_TXN)) == 2
    assert len(fake.commands(T.TC_CLIENT_CONNECT_REQUEST)) == 2
    assert len(fake.commands(T.LOOKUP)) == lookups + 1


# --- sends ---------------------------------------------------------------------------


async def test_producer_announces_transactions(fake: FakeBroker, client: aio.Client) -> None:
    await client.create_producer("fake")
    assert fake.commands(T.PRODUCER)[0].producer.txn_enabled is True
    plain = aio.Client(fake.url)
    try:
        await plain.create_producer("fake")
    finally:
        await plain.close()
    assert not fake.commands(T.PRODUCER)[1].producer.HasField("txn_enabled")


async def test_send_carries_txn_ids_and_registers_partitions_once(
    fake: FakeBroker, client: aio.Client
) -> None:
    fake.topic("persistent://public/default/pt").partitions = 2
    producer = await client.create_producer("pt")
    txn = await client.new_transaction()
    # Concurrent sends: one registration per partition, shared by all of them.
    ids = await asyncio.gather(*(producer.send(bytes([i]), txn=txn) for i in range(10)))
    assert {m.partition() for m in ids} == {0, 1}
    adds = fake.commands(T.ADD_PARTITION_TO_TXN)
    assert sorted(p for c in adds for p in c.addPartitionToTxn.partitions) == [
        "persistent://public/default/pt-partition-0",
        "persistent://public/default/pt-partition-1",
    ]
    for c in adds:
        assert (c.addPartitionToTxn.txnid_most_bits, c.addPartitionToTxn.txnid_least_bits) == txn.id
    sends = fake.commands(T.SEND)
    assert len(sends) == 10
    assert all((s.send.txnid_most_bits, s.send.txnid_least_bits) == txn.id for s in sends)
    for part in range(2):
        for md in entry_metadata(fake, f"persistent://public/default/pt-partition-{part}"):
            assert (md.txnid_most_bits, md.txnid_least_bits) == txn.id
    assert sorted(txn_of(fake, txn).partitions) == [
        "persistent://public/default/pt-partition-0",
        "persistent://public/default/pt-partition-1",
    ]
    # Another transaction registers for itself; a plain send registers nothing.
    other = await client.new_transaction()
    await producer.send(b"x", txn=other, partition_key="k")
    await producer.send(b"y")
    assert len(fake.commands(T.ADD_PARTITION_TO_TXN)) == 3
    last = fake.commands(T.SEND)[-1].send
    assert not last.HasField("txnid_most_bits") and not last.HasField("txnid_least_bits")


async def test_a_batch_belongs_to_one_transaction(fake: FakeBroker, client: aio.Client) -> None:
    producer = await client.create_producer(
        "fake", batching_enabled=True, batching_max_publish_delay_ms=60_000
    )
    t1 = await client.new_transaction()
    t2 = await client.new_transaction()
    plan = [("a", None), ("b", t1), ("c", t1), ("d", None), ("e", None), ("f", t2)]
    results: list[MessageId] = []
    for data, txn in plan:
        await producer.send_async(data.encode(), lambda e, m: results.append(m), txn=txn)
    await producer.flush()
    entries = fake.topic(TOPIC).entries
    groups = []
    for raw in entries:
        parsed = parse_entry(raw)
        md = parsed.metadata
        txn_id = (md.txnid_most_bits, md.txnid_least_bits) if md.HasField("txnid_most_bits") else None
        body = raw[parsed.payload_offset :]
        payloads = [p for _, p in parse_batch(body, md.num_messages_in_batch)]
        groups.append((txn_id, b"".join(payloads).decode()))
    # Order kept, and every switch of transaction started a new batch.
    assert groups == [(None, "a"), (t1.id, "bc"), (None, "de"), (t2.id, "f")]
    assert len(results) == 6


async def test_send_after_commit_began_is_rejected(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer("fake")
    txn = await client.new_transaction()
    await txn.commit()
    with pytest.raises(InvalidTxnStatus):
        await producer.send(b"late", txn=txn)
    assert fake.commands(T.SEND) == []


# --- acks ----------------------------------------------------------------------------


async def test_ack_in_transaction(fake: FakeBroker, client: aio.Client) -> None:
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer("fake")
    for i in range(3):
        await producer.send(bytes([i]))
    msgs = [await consumer.receive(2000) for _ in range(3)]
    txn = await client.new_transaction()
    await consumer.acknowledge(msgs[0], txn=txn)
    await consumer.acknowledge(msgs[1].message_id(), txn=txn)
    await consumer.acknowledge_cumulative(msgs[2], txn=txn)
    (add,) = fake.commands(T.ADD_SUBSCRIPTION_TO_TXN)
    sub = add.addSubscriptionToTxn.subscription[0]
    assert (sub.topic, sub.subscription) == (TOPIC, "sub")
    acks = [c.ack for c in fake.commands(T.ACK)]
    assert [a.ack_type for a in acks] == [
        pb.CommandAck.Individual,
        pb.CommandAck.Individual,
        pb.CommandAck.Cumulative,
    ]
    for a, m in zip(acks, msgs, strict=True):
        assert (a.txnid_most_bits, a.txnid_least_bits) == txn.id
        assert a.HasField("request_id")
        assert [x.entryId for x in a.message_id] == [m.message_id().entry_id()]
        assert not a.message_id[0].ack_set
    # Pending until the transaction commits: nothing applied to the subscription.
    assert fake.topic(TOPIC).acked == set()
    await txn.commit()
    assert txn_of(fake, txn).subscriptions == [(TOPIC, "sub")]


async def test_batch_member_ack_in_transaction_sends_ack_set(
    fake: FakeBroker, client: aio.Client
) -> None:
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer(
        "fake", batching_enabled=True, batching_max_publish_delay_ms=60_000
    )
    for i in range(4):
        await producer.send_async(bytes([i]), lambda e, m: None)
    await producer.flush()
    msgs = [await consumer.receive(2000) for _ in range(4)]
    assert [m.message_id().batch_index() for m in msgs] == [0, 1, 2, 3]
    txn = await client.new_transaction()
    await consumer.acknowledge(msgs[1], txn=txn)
    await consumer.acknowledge_cumulative(msgs[2], txn=txn)
    individual, cumulative = (c.ack.message_id[0] for c in fake.commands(T.ACK))
    # Set bits = members this ack leaves unacknowledged.
    assert list(individual.ack_set) == bits_to_words(0b1101)
    assert individual.batch_size == 4
    assert list(cumulative.ack_set) == bits_to_words(0b1000)
    assert cumulative.batch_size == 4


async def test_ack_errors_are_typed_and_fail_the_commit(
    fake: FakeBroker, client: aio.Client
) -> None:
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer("fake")
    await producer.send(b"m")
    msg = await consumer.receive(2000)
    txn = await client.new_transaction()
    await producer.send(b"out", txn=txn)
    fake.ack_errors = [pb.TransactionConflict]
    with pytest.raises(TransactionConflict):
        await consumer.acknowledge(msg, txn=txn)
    with pytest.raises(TransactionHasOperationFailed) as info:
        await txn.commit()
    assert isinstance(info.value.failures[0], TransactionConflict)
    # Committing the rest would publish half a transaction: it was aborted instead.
    assert [c.endTxn.txn_action for c in fake.commands(T.END_TXN)] == [pb.ABORT]
    assert txn.state() is S.ABORTED
    assert txn_of(fake, txn).status == "ABORTED"
    await txn.abort()  # the same outcome again: fine
    with pytest.raises(InvalidTxnStatus):
        await txn.commit()


async def test_cumulative_ack_in_transaction_on_shared_is_refused(
    fake: FakeBroker, client: aio.Client
) -> None:
    from quasar.client.enums import ConsumerType
    from quasar.client.exceptions import CumulativeAcknowledgementNotAllowedError

    consumer = await client.subscribe("fake", "sub", consumer_type=ConsumerType.Shared)
    txn = await client.new_transaction()
    with pytest.raises(CumulativeAcknowledgementNotAllowedError):
        await consumer.acknowledge_cumulative(MessageId(-1, 1, 0), txn=txn)
    await txn.commit()  # a refused call is not an operation of the transaction


async def test_abort_after_cumulative_ack_asks_for_redelivery(
    fake: FakeBroker, client: aio.Client
) -> None:
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer("fake")
    for i in range(2):
        await producer.send(bytes([i]))
    msgs = [await consumer.receive(2000) for _ in range(2)]
    txn = await client.new_transaction()
    await consumer.acknowledge_cumulative(msgs[1], txn=txn)
    assert fake.commands(T.REDELIVER_UNACKNOWLEDGED_MESSAGES) == []
    await txn.abort()
    await wait_for(lambda: len(fake.commands(T.REDELIVER_UNACKNOWLEDGED_MESSAGES)) == 1)
    again = [await consumer.receive(2000) for _ in range(2)]
    assert [m.data() for m in again] == [b"\x00", b"\x01"]


# --- commit and in-flight operations --------------------------------------------------


async def _sends_held(
    fake: FakeBroker, client: aio.Client, count: int
) -> tuple[aio.Transaction, list[Any]]:
    """A transaction with ``count`` sends whose receipts the broker holds back, and
    the list their callbacks append their errors to."""
    producer = await client.create_producer("fake")
    txn = await client.new_transaction()
    fake.hold_receipts = True
    done: list[Any] = []
    for i in range(count):
        await producer.send_async(bytes([i]), lambda e, m: done.append(e), txn=txn)
    await wait_for(lambda: len(fake.commands(T.SEND)) == count)
    return txn, done


async def test_commit_waits_for_in_flight_sends(fake: FakeBroker, client: aio.Client) -> None:
    txn, done = await _sends_held(fake, client, 3)
    commit = asyncio.ensure_future(txn.commit())
    await asyncio.sleep(0.1)  # nothing to await: END_TXN must NOT be sent yet
    assert fake.commands(T.END_TXN) == []
    assert txn.state() is S.COMMITTING and not commit.done()
    fake.hold_receipts = False
    fake.release_held()
    await asyncio.wait_for(commit, 5)
    assert done == [None, None, None]
    assert txn.state() is S.COMMITTED
    kinds = [c.type for c in fake.received if c.type in (T.SEND, T.END_TXN)]
    assert kinds == [T.SEND, T.SEND, T.SEND, T.END_TXN]


async def test_commit_waits_for_an_open_batch(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer(
        "fake", batching_enabled=True, batching_max_publish_delay_ms=60_000
    )
    txn = await client.new_transaction()
    done: list[Any] = []
    for i in range(3):
        await producer.send_async(bytes([i]), lambda e, m: done.append(e), txn=txn)
    commit = asyncio.ensure_future(txn.commit())
    await asyncio.sleep(0.05)
    assert fake.commands(T.END_TXN) == [] and not commit.done()
    # A send joining the open batch after the commit began is refused all the same.
    with pytest.raises(InvalidTxnStatus):
        await producer.send_async(b"late", lambda e, m: done.append(e), txn=txn)
    await producer.flush()
    await asyncio.wait_for(commit, 5)
    assert done == [None, None, None]
    assert len(fake.commands(T.SEND)) == 1
    assert txn.state() is S.COMMITTED


async def test_a_failed_batch_fails_the_commit_and_every_callback(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer(
        "fake",
        batching_enabled=True,
        batching_max_publish_delay_ms=1,
        send_timeout_millis=100,
    )
    txn = await client.new_transaction()
    fake.drop_sends = True
    errors: list[Any] = []
    for i in range(3):
        await producer.send_async(bytes([i]), lambda e, m: errors.append(e), txn=txn)
    with pytest.raises(TransactionHasOperationFailed) as info:
        await txn.commit()
    assert isinstance(info.value.failures[0], Timeout)
    assert len(errors) == 3 and all(isinstance(e, Timeout) for e in errors)
    assert [c.endTxn.txn_action for c in fake.commands(T.END_TXN)] == [pb.ABORT]


async def test_commit_waits_for_in_flight_acks(fake: FakeBroker, client: aio.Client) -> None:
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer("fake")
    await producer.send(b"m")
    msg = await consumer.receive(2000)
    txn = await client.new_transaction()
    fake.hold_ack_responses = True
    ack = asyncio.ensure_future(consumer.acknowledge(msg, txn=txn))
    await wait_for(lambda: len(fake.commands(T.ACK)) == 1)
    commit = asyncio.ensure_future(txn.commit())
    await asyncio.sleep(0.1)  # nothing to await: END_TXN must NOT be sent yet
    assert fake.commands(T.END_TXN) == []
    fake.release_held()
    await asyncio.wait_for(asyncio.gather(ack, commit), 5)
    assert txn.state() is S.COMMITTED


async def test_a_commit_given_up_by_its_caller_still_waits_then_ends_once(
    fake: FakeBroker, client: aio.Client
) -> None:
    txn, done = await _sends_held(fake, client, 2)
    first = asyncio.ensure_future(txn.commit())
    await asyncio.sleep(0.05)
    first.cancel()  # the caller gives up; the commit goes on waiting for the sends
    second = asyncio.ensure_future(txn.commit())  # joins it
    await asyncio.sleep(0.05)
    assert fake.commands(T.END_TXN) == [] and done == []
    fake.hold_receipts = False
    fake.release_held()
    await asyncio.wait_for(second, 5)
    assert done == [None, None]  # each send's own callback ran
    assert txn.state() is S.COMMITTED
    assert len(fake.commands(T.END_TXN)) == 1


async def test_failed_registration_fails_send_and_commit(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer("fake")
    txn = await client.new_transaction()
    fake.coordinator.errors[T.ADD_PARTITION_TO_TXN] = [pb.TransactionNotFound]
    with pytest.raises(TransactionNotFound):
        await producer.send(b"a", txn=txn)
    # The failed registration is kept: later sends to the partition fail the same way.
    with pytest.raises(TransactionNotFound):
        await producer.send(b"b", txn=txn)
    assert fake.commands(T.SEND) == []
    assert len(fake.commands(T.ADD_PARTITION_TO_TXN)) == 1
    with pytest.raises(TransactionHasOperationFailed):
        await txn.commit()
    assert txn.state() is S.ABORTED


async def test_send_timeout_fails_commit(fake: FakeBroker, client: aio.Client) -> None:
    producer = await client.create_producer("fake", send_timeout_millis=100)
    txn = await client.new_transaction()
    fake.drop_sends = True
    errors: list[Any] = []
    await producer.send_async(b"lost", lambda e, m: errors.append(e), txn=txn)
    with pytest.raises(TransactionHasOperationFailed) as info:
        await txn.commit()
    assert isinstance(info.value.failures[0], Timeout)
    assert len(errors) == 1 and isinstance(errors[0], Timeout)
    assert [c.endTxn.txn_action for c in fake.commands(T.END_TXN)] == [pb.ABORT]


async def test_send_refused_with_not_allowed_fails_fast(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer("fake")
    txn = await client.new_transaction()
    # What a broker answers to a transactional send it cannot take.
    fake.send_errors = [pb.NotAllowedError]
    with pytest.raises(NotAllowedError):
        await producer.send(b"refused", txn=txn)
    with pytest.raises(TransactionHasOperationFailed):
        await txn.commit()
    assert txn.state() is S.ABORTED
    # The connection was kept (no reconnect, no resend) and the producer still works.
    assert len(fake.commands(T.PRODUCER)) == 1
    assert len(fake.commands(T.SEND)) == 1
    assert (await producer.send(b"plain")).entry_id() == 0


# --- END_TXN: lost answers and definite answers ----------------------------------------


@pytest.mark.parametrize("applied", [True, False])
async def test_commit_retried_after_dropped_connection(
    fake: FakeBroker, client: aio.Client, applied: bool
) -> None:
    producer = await client.create_producer("fake")
    txn = await client.new_transaction()
    await producer.send(b"a", txn=txn)
    fake.drop_on[T.END_TXN] = 1
    fake.apply_before_drop = applied  # the first END_TXN took effect, or never arrived
    await txn.commit()
    assert txn.state() is S.COMMITTED
    assert txn_of(fake, txn).status == "COMMITTED"
    assert len(fake.commands(T.END_TXN)) == 2
    # The data was not sent again: only END_TXN is retried.
    assert len(fake.commands(T.SEND)) == 1


async def test_abort_retried_after_dropped_connection(
    fake: FakeBroker, client: aio.Client
) -> None:
    txn = await client.new_transaction()
    fake.drop_on[T.END_TXN] = 2
    fake.apply_before_drop = True
    await txn.abort()
    assert txn.state() is S.ABORTED
    assert len(fake.commands(T.END_TXN)) == 3


async def test_lost_answer_then_not_found_is_an_unknown_outcome(
    fake: FakeBroker, client: aio.Client
) -> None:
    # A coordinator that forgets ended transactions (Pulsar today) cannot confirm.
    fake.coordinator.forget_ended = True
    txn = await client.new_transaction()
    fake.drop_on[T.END_TXN] = 1
    fake.apply_before_drop = True
    with pytest.raises(TransactionOutcomeUnknown):
        await txn.commit()
    assert txn.state() is S.ERROR


async def test_end_retry_bound_then_resume(fake: FakeBroker) -> None:
    client = make_client(fake.url, transaction_end_retry_timeout_ms=300)
    try:
        txn = await client.new_transaction()
        fake.drop_on[T.END_TXN] = 1_000_000  # the coordinator never answers
        with pytest.raises(TransactionOutcomeUnknown):
            await txn.commit()
        assert txn.state() is S.COMMITTING
        with pytest.raises(InvalidTxnStatus):
            await txn.abort()  # a commit may have happened: abort is not allowed
        fake.drop_on.clear()
        await txn.commit()  # keeps asking, and learns the outcome
        assert txn.state() is S.COMMITTED
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (pb.InvalidTxnStatus, InvalidTxnStatus),
        (pb.TransactionNotFound, TransactionNotFound),
        (pb.NotAllowedError, NotAllowedError),
    ],
)
async def test_definite_end_errors(
    fake: FakeBroker, client: aio.Client, code: int, error: type[Exception]
) -> None:
    txn = await client.new_transaction()
    fake.coordinator.errors[T.END_TXN] = [code]
    with pytest.raises(error):
        await txn.commit()
    assert txn.state() is S.ERROR
    assert len(fake.commands(T.END_TXN)) == 1  # definite: not retried
    with pytest.raises(InvalidTxnStatus):
        await txn.commit()


async def test_ending_twice(fake: FakeBroker, client: aio.Client) -> None:
    committed = await client.new_transaction()
    await asyncio.gather(committed.commit(), committed.commit())  # joined
    await committed.commit()  # done already
    assert len(fake.commands(T.END_TXN)) == 1
    with pytest.raises(InvalidTxnStatus):
        await committed.abort()
    aborted = await client.new_transaction()
    await aborted.abort()
    await aborted.abort()
    with pytest.raises(InvalidTxnStatus):
        await aborted.commit()
    assert len(fake.commands(T.END_TXN)) == 2


async def test_coordinator_refuses_the_opposite_end(
    fake: FakeBroker, client: aio.Client
) -> None:
    txn = await client.new_transaction()
    # The coordinator aborted it (e.g. its own timeout) before our commit arrived.
    txn_of(fake, txn).status = "ABORTED"
    with pytest.raises(InvalidTxnStatus):
        await txn.commit()
    assert txn.state() is S.ERROR


# --- timeout -------------------------------------------------------------------------


async def test_client_side_timeout(fake: FakeBroker, client: aio.Client) -> None:
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer("fake")
    await producer.send(b"m")
    msg = await consumer.receive(2000)
    txn = await client.new_transaction(timeout_ms=100)
    await wait_for(lambda: txn.state() is S.TIME_OUT)
    with pytest.raises(InvalidTxnStatus, match="timed out"):
        await producer.send(b"x", txn=txn)
    with pytest.raises(InvalidTxnStatus, match="timed out"):
        await consumer.acknowledge(msg, txn=txn)
    with pytest.raises(InvalidTxnStatus):
        await txn.commit()
    await txn.abort()  # the coordinator aborts it anyway: nothing to do
    assert txn.state() is S.TIME_OUT
    assert fake.commands(T.END_TXN) == []
    assert fake.commands(T.ADD_PARTITION_TO_TXN) == []
    assert fake.commands(T.ADD_SUBSCRIPTION_TO_TXN) == []


async def test_commit_stops_the_timer(fake: FakeBroker, client: aio.Client) -> None:
    txn = await client.new_transaction(timeout_ms=100)
    await txn.commit()
    await asyncio.sleep(0.2)  # past the timeout: nothing to await, state must stay
    assert txn.state() is S.COMMITTED


# --- client close --------------------------------------------------------------------


async def test_close_stops_a_commit_that_waits_for_an_answer(fake: FakeBroker) -> None:
    client = make_client(fake.url)
    txn = await client.new_transaction()
    fake.drop_on[T.END_TXN] = 1_000_000
    commit = asyncio.ensure_future(txn.commit())
    await wait_for(lambda: len(fake.commands(T.END_TXN)) >= 2)
    await client.close()
    with pytest.raises(AlreadyClosed):
        await asyncio.wait_for(commit, 5)
    assert txn.state() is S.COMMITTING  # the outcome is not known
