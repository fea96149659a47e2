"""The asyncio client against an in-process fake broker (protocol behaviour the real
broker cannot be made to show on demand: dropped connections, CLOSE_PRODUCER, ...)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from quasar.client import aio
from quasar.client import exceptions as pulsar_exceptions
from quasar.client.enums import CompressionType
from quasar.client.message_id import MessageId
from quasar.errors import Timeout
from quasar.protocol import pb

from ..fakes.broker import FakeBroker

T = pb.BaseCommand
TOPIC = "persistent://public/default/fake"


@pytest.fixture
async def client(fake: FakeBroker) -> AsyncIterator[aio.Client]:
    c = aio.Client(fake.url, operation_timeout_seconds=5)
    # Fast reconnects keep the tests short; the schedule itself is unit-tested.
    c.config.initial_backoff_ms = 10
    yield c
    await c.close()


async def wait_for(predicate, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    """Await a condition the event loop will make true, within a bound."""
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_connect_handshake_and_produce_consume(
    fake: FakeBroker, client: aio.Client
) -> None:
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer("fake", properties={"app": "x"})
    mid = await producer.send(
        b"one", properties={"k": "v"}, partition_key="key", event_timestamp=42
    )
    assert (mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()) == (
        1,
        0,
        -1,
        -1,
    )
    msg = await consumer.receive(2000)
    assert msg.data() == b"one"
    assert msg.properties() == {"k": "v"}
    assert msg.partition_key() == "key"
    assert msg.event_timestamp() == 42
    assert msg.topic_name() == TOPIC
    await consumer.acknowledge(msg)
    await wait_for(lambda: 0 in fake.topic(TOPIC).acked)
    connect = fake.commands(T.CONNECT)[0].connect
    assert connect.protocol_version == 20 and connect.client_version.startswith(
        "quasar-"
    )
    flows = fake.commands(T.FLOW)
    assert flows[0].flow.messagePermits == 1000
    prod = fake.commands(T.PRODUCER)[0].producer
    assert {kv.key: kv.value for kv in prod.metadata} == {"app": "x"}
    assert producer.producer_name() == "fake-0"


async def test_batches_with_compression_are_split(
    fake: FakeBroker, client: aio.Client
) -> None:
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer(
        "fake",
        batching_enabled=True,
        batching_max_publish_delay_ms=1000,
        batching_max_messages=5,
        compression_type=CompressionType.LZ4,
    )
    done: list[MessageId] = []
    for i in range(5):
        await producer.send_async(f"m{i}".encode(), lambda e, m: done.append(m))
    await producer.flush()
    assert [m.batch_index() for m in done] == [0, 1, 2, 3, 4]
    assert len(fake.topic(TOPIC).entries) == 1
    send = fake.commands(T.SEND)[0].send
    assert send.num_messages == 5 and send.sequence_id == 0
    got = [await consumer.receive(2000) for _ in range(5)]
    assert [m.data() for m in got] == [f"m{i}".encode() for i in range(5)]
    for m in got[:4]:
        await consumer.acknowledge(m)
    await asyncio.sleep(0.2)  # nothing to await: the entry must NOT be acked yet
    assert fake.topic(TOPIC).acked == set()
    await consumer.acknowledge(got[4])
    await wait_for(lambda: fake.topic(TOPIC).acked == {0})


async def test_send_async_refuses_a_callback_that_is_not_callable(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer("fake")
    with pytest.raises(TypeError, match="callable"):
        await producer.send_async(b"refused", 42)  # type: ignore[arg-type]
    await producer.send_async(b"fire-and-forget", None)  # type: ignore[arg-type]
    await producer.flush()
    assert [c.send.sequence_id for c in fake.commands(T.SEND)] == [0]
    assert fake.topic(TOPIC).entries and len(fake.topic(TOPIC).entries) == 1


async def test_producer_resends_pending_after_connection_loss(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer("fake")
    first = await producer.send(b"a")
    fake.drop_sends = True
    results: list[MessageId] = []
    for payload in (b"b", b"c"):
        await producer.send_async(payload, lambda e, m: results.append(m))
    await wait_for(lambda: len(fake.commands(T.SEND)) == 3)
    fake.drop_sends = False
    fake.drop_all_connections()
    await wait_for(lambda: len(results) == 2)
    assert [m.entry_id() for m in results] == [1, 2]
    assert first.entry_id() == 0
    prods = fake.commands(T.PRODUCER)
    assert len(prods) == 2
    assert prods[1].producer.producer_id == prods[0].producer.producer_id
    assert prods[1].producer.epoch == prods[0].producer.epoch + 1
    assert prods[1].producer.producer_name == "fake-0"
    sends = fake.commands(T.SEND)
    assert [s.send.sequence_id for s in sends[3:]] == [1, 2]  # resent in order


async def test_broker_close_producer_triggers_reconnect(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer("fake")
    await producer.send(b"a")
    conn = fake.connections[0]
    pid = next(iter(conn.producers))
    conn.send(
        pb.BaseCommand(
            type=T.CLOSE_PRODUCER,
            close_producer=pb.CommandCloseProducer(
                producer_id=pid, request_id=2**64 - 1
            ),
        )
    )
    await wait_for(lambda: len(fake.commands(T.PRODUCER)) == 2)
    assert (await producer.send(b"b")).entry_id() == 1


async def test_stale_and_out_of_range_receipts(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer("fake")
    await producer.send(b"a")
    conn = fake.connections[0]
    pid = next(iter(conn.producers))
    stale = pb.BaseCommand(
        type=T.SEND_RECEIPT,
        send_receipt=pb.CommandSendReceipt(producer_id=pid, sequence_id=0),
    )
    conn.send(stale)  # a duplicate receipt for an op already done: ignored
    fake.drop_sends = True
    task = asyncio.ensure_future(producer.send(b"b"))
    await wait_for(lambda: len(fake.commands(T.SEND)) == 2)
    # A receipt beyond the pending head makes the client drop the connection and resend.
    conn.send(
        pb.BaseCommand(
            type=T.SEND_RECEIPT,
            send_receipt=pb.CommandSendReceipt(producer_id=pid, sequence_id=7),
        )
    )
    await wait_for(lambda: len(fake.commands(T.PRODUCER)) == 2)
    fake.drop_sends = False
    fake.drop_all_connections()  # the resend happened while sends were dropped; go again
    assert (await asyncio.wait_for(task, 5)).entry_id() == 1


async def test_send_timeout(fake: FakeBroker, client: aio.Client) -> None:
    producer = await client.create_producer("fake", send_timeout_millis=100)
    fake.drop_sends = True
    with pytest.raises(Timeout):
        await producer.send(b"x")


async def test_consumer_resubscribes_and_gets_unacked_again(
    fake: FakeBroker, client: aio.Client
) -> None:
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer("fake")
    for i in range(3):
        await producer.send(bytes([i]))
    first = await consumer.receive(2000)
    await consumer.acknowledge(first)
    await wait_for(lambda: 0 in fake.topic(TOPIC).acked)
    fake.drop_all_connections()
    await wait_for(lambda: len(fake.commands(T.SUBSCRIBE)) == 2)
    subs = fake.commands(T.SUBSCRIBE)
    assert subs[0].subscribe.consumer_id == subs[1].subscribe.consumer_id
    got = [(await consumer.receive(2000)).data() for _ in range(2)]
    assert got == [b"\x01", b"\x02"]
    with pytest.raises(Timeout):
        await consumer.receive(100)  # no duplicates left in the queue


async def test_permits_refilled_at_half_queue(
    fake: FakeBroker, client: aio.Client
) -> None:
    consumer = await client.subscribe("fake", "sub", receiver_queue_size=4)
    producer = await client.create_producer("fake")
    for i in range(10):
        await producer.send(bytes([i]))
    got = [(await consumer.receive(2000)).data()[0] for _ in range(10)]
    assert got == list(range(10))
    permits = [c.flow.messagePermits for c in fake.commands(T.FLOW)]
    assert permits[0] == 4 and set(permits[1:]) == {2}


async def test_negative_ack_redelivers(fake: FakeBroker, client: aio.Client) -> None:
    consumer = await client.subscribe(
        "fake", "sub", negative_ack_redelivery_delay_ms=50
    )
    producer = await client.create_producer("fake")
    await producer.send(b"x")
    msg = await consumer.receive(2000)
    await consumer.negative_acknowledge(msg)
    again = await consumer.receive(2000)
    assert again.data() == b"x"
    assert fake.commands(T.REDELIVER_UNACKNOWLEDGED_MESSAGES)


async def test_reader_has_message_available(
    fake: FakeBroker, client: aio.Client
) -> None:
    producer = await client.create_producer("fake")
    for i in range(2):
        await producer.send(bytes([i]))
    reader = await client.create_reader("fake", MessageId.earliest)
    assert await reader.has_message_available()
    assert (await reader.read_next(2000)).data() == b"\x00"
    assert (await reader.read_next(2000)).data() == b"\x01"
    assert not await reader.has_message_available()
    sub = fake.commands(T.SUBSCRIBE)[0].subscribe
    assert (
        not sub.durable
        and sub.subscription.startswith("reader-")
        and len(sub.subscription) == 17
    )


async def test_keep_alive_detects_dead_peer(fake: FakeBroker) -> None:
    c = aio.Client(fake.url, keep_alive_interval_seconds=0.05)
    try:
        await c.create_producer("fake")
        conn = next(iter(c.pool._conns.values()))
        # Stop answering: swallow everything the client sends from now on.
        for fc in fake.connections:
            fc.handle = lambda cmd, payload: None  # type: ignore[method-assign]
        await wait_for(lambda: conn.is_closed, 2)
    finally:
        await c.close()


async def test_partitioned_topic_routing(fake: FakeBroker, client: aio.Client) -> None:
    fake.topic(TOPIC).partitions = 3
    assert await client.get_topic_partitions("fake") == [
        f"{TOPIC}-partition-{i}" for i in range(3)
    ]
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer("fake")
    ids = [await producer.send(b"rr") for _ in range(6)]
    assert sorted(m.partition() for m in ids) == [0, 0, 1, 1, 2, 2]
    keyed = [await producer.send(b"k", partition_key="user-1") for _ in range(3)]
    assert len({m.partition() for m in keyed}) == 1
    got = [await consumer.receive(2000) for _ in range(9)]
    for m in got:
        assert m.topic_name() == f"{TOPIC}-partition-{m.message_id().partition()}"
        await consumer.acknowledge(m)
    part = keyed[0].partition()
    await wait_for(lambda: len(fake.topic(f"{TOPIC}-partition-{part}").acked) == 5)
    subs = fake.commands(T.SUBSCRIBE)
    assert len({s.subscribe.consumer_id for s in subs}) == 3
    assert len({s.subscribe.consumer_name for s in subs}) == 1


async def test_unacked_message_timeout_redelivers(
    fake: FakeBroker, client: aio.Client
) -> None:
    consumer = await client.subscribe("fake", "sub", unacked_messages_timeout_ms=100)
    producer = await client.create_producer("fake")
    await producer.send(b"x")
    first = await consumer.receive(2000)
    again = await consumer.receive(2000)  # never acked: redelivered after the timeout
    assert again.data() == first.data() == b"x"
    await consumer.acknowledge(again)
    await wait_for(lambda: fake.topic(TOPIC).acked == {0})


async def test_cumulative_ack_of_partial_batch_acks_previous_entry(
    fake: FakeBroker, client: aio.Client
) -> None:
    consumer = await client.subscribe("fake", "sub")
    producer = await client.create_producer(
        "fake", batching_enabled=True, batching_max_messages=3
    )
    await producer.send(b"single")  # entry 0 (a batch of one)
    await producer.flush()
    for i in range(3):
        await producer.send_async(bytes([i]), lambda e, m: None)
    await producer.flush()  # entry 1: a batch of three
    got = [await consumer.receive(2000) for _ in range(4)]
    await consumer.acknowledge_cumulative(got[2])  # member 1 of entry 1
    await wait_for(lambda: len(fake.commands(T.ACK)) == 1)
    ack = fake.commands(T.ACK)[0].ack
    assert ack.ack_type == pb.CommandAck.Cumulative
    assert [(m.ledgerId, m.entryId) for m in ack.message_id] == [(1, 0)]
    await consumer.acknowledge_cumulative(got[3])  # the whole batch is now acked
    await wait_for(lambda: len(fake.commands(T.ACK)) == 2)
    assert fake.commands(T.ACK)[1].ack.message_id[0].entryId == 1


async def test_lookup_follows_redirects(fake: FakeBroker, client: aio.Client) -> None:
    fake.redirects = 2
    await client.create_producer("fake")
    lookups = [c.lookupTopic for c in fake.commands(T.LOOKUP)]
    assert [lk.authoritative for lk in lookups] == [False, True, True]


async def test_too_many_redirects_fail(fake: FakeBroker, client: aio.Client) -> None:
    fake.redirects = 100
    with pytest.raises(pulsar_exceptions.LookupError):
        await client.create_producer("fake")


async def test_an_unanswered_request_times_out_and_a_late_answer_is_ignored(
    fake: FakeBroker,
) -> None:
    c = aio.Client(fake.url, operation_timeout_seconds=0.3)
    try:
        partitions = await c.get_topic_partitions("fake")  # connected and answering
        for conn in fake.connections:
            conn.mute = True
        with pytest.raises(Timeout):
            await c.get_topic_partitions("fake")
        assert not any(conn._pending for conn in c.pool._conns.values())  # none kept
        for conn in fake.connections:
            conn.mute = False
        assert await c.get_topic_partitions("fake") == partitions
    finally:
        await c.close()
