"""quasar's client (sync facade) against a real ``quasar standalone`` broker process."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest

import quasar.client as pulsar
from quasar.client.routing import partition_for_key

from .conftest import BrokerProcess

RECEIVE_MS = 5000


@pytest.fixture
def client(service_url: str) -> Iterator[pulsar.Client]:
    c = pulsar.Client(service_url, operation_timeout_seconds=15)
    yield c
    c.close()


def drain(consumer: pulsar.Consumer, timeout_ms: int = 300) -> list[pulsar.Message]:
    """Everything that arrives until the consumer stays quiet for ``timeout_ms``."""
    out = []
    while True:
        try:
            out.append(consumer.receive(timeout_ms))
        except pulsar.Timeout:
            return out


def receive_n(consumer: pulsar.Consumer, n: int) -> list[pulsar.Message]:
    return [consumer.receive(RECEIVE_MS) for _ in range(n)]


@pytest.mark.parametrize("batching", [False, True])
def test_memory_limit_without_count_limit(
    service_url: str, topic: str, batching: bool
) -> None:
    """``max_pending_messages=0`` against the real broker: far more messages than the
    old default window are in flight at once, bounded by a 256 KiB memory limit the
    sends block on; every one arrives once, in order, and the memory comes back."""
    client = pulsar.Client(
        service_url, operation_timeout_seconds=15, memory_limit_bytes=256 * 1024
    )
    try:
        consumer = client.subscribe(topic, "sub", receiver_queue_size=5000)
        producer = client.create_producer(
            topic,
            max_pending_messages=0,
            block_if_queue_full=True,
            batching_enabled=batching,
        )
        memory = client._aio.config.memory
        results: list[pulsar.Result] = []
        in_use: list[int] = []

        def done(result: pulsar.Result, _mid: object) -> None:
            results.append(result)
            in_use.append(memory.used)

        payloads = [b"%05d" % i + b"x" * 1019 for i in range(3000)]  # 3 MiB in all
        for payload in payloads:
            producer.send_async(payload, done)
        producer.flush()
        assert results == [pulsar.Result.Ok] * len(payloads)
        assert max(in_use) <= 256 * 1024  # the sends did wait for memory
        assert memory.used == 0
        got = receive_n(consumer, len(payloads))
        assert [m.data() for m in got] == payloads
    finally:
        client.close()


@pytest.mark.parametrize("batching", [False, True])
def test_produce_consume(client: pulsar.Client, topic: str, batching: bool) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(
        topic, batching_enabled=batching, batching_max_publish_delay_ms=50
    )
    results: list[tuple[pulsar.Result, pulsar.MessageId]] = []
    for i in range(20):
        producer.send_async(f"m{i}".encode(), lambda r, m: results.append((r, m)))
    producer.flush()
    assert producer.send(b"last").entry_id() >= 0
    got = receive_n(consumer, 21)
    assert [m.data() for m in got] == [f"m{i}".encode() for i in range(20)] + [b"last"]
    assert {r for r, _ in results} == {pulsar.Result.Ok}
    if batching:
        assert any(m.message_id().batch_index() > 0 for m in got)
    for m in got:
        consumer.acknowledge(m)
    assert drain(consumer) == []


def test_send_async_callback_none_or_not_callable(
    client: pulsar.Client, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """None is fire-and-forget, as in ``pulsar``; a non-callable is refused at the call."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    with pytest.raises(TypeError, match="callable"):
        producer.send_async(b"refused", "not a function")  # type: ignore[arg-type]
    with caplog.at_level("WARNING"):
        producer.send_async(b"fire-and-forget", None)  # type: ignore[arg-type]
        producer.flush()
    assert [r.getMessage() for r in caplog.records if r.levelno >= 30] == []
    assert [m.data() for m in receive_n(consumer, 1)] == [b"fire-and-forget"]
    assert drain(consumer) == []  # the refused message was never queued


@pytest.mark.parametrize("codec", list(pulsar.CompressionType))
def test_compression(
    client: pulsar.Client, topic: str, codec: pulsar.CompressionType
) -> None:
    consumer = client.subscribe(topic, "sub")
    for batching in (False, True):
        producer = client.create_producer(
            topic, compression_type=codec, batching_enabled=batching
        )
        payloads = [(b"compress me %d " % i) * 50 for i in range(5)]
        for p in payloads:
            producer.send_async(p, lambda r, m: None)
        producer.flush()
        assert [m.data() for m in receive_n(consumer, 5)] == payloads
        producer.close()


def test_keys_properties_event_time(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    before = int(time.time() * 1000)
    mid = producer.send(
        b"x",
        properties={"a": "1", "b": "2"},
        partition_key="pk",
        ordering_key="ok",
        event_timestamp=1234,
    )
    msg = consumer.receive(RECEIVE_MS)
    assert msg.message_id() == mid
    assert msg.properties() == {"a": "1", "b": "2"}
    assert msg.partition_key() == "pk"
    assert msg.ordering_key() == "ok"
    assert msg.event_timestamp() == 1234
    assert msg.publish_timestamp() >= before
    assert msg.topic_name() == topic
    assert msg.redelivery_count() == 0


@pytest.fixture
def pclient(partitioned_broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = pulsar.Client(partitioned_broker.service_url, operation_timeout_seconds=15)
    yield c
    c.close()


def test_partitioned_round_robin_and_key_routing(
    pclient: pulsar.Client, topic: str
) -> None:
    client = pclient
    assert client.get_topic_partitions(topic) == [
        f"{topic}-partition-{i}" for i in range(3)
    ]
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    ids = [producer.send(b"rr") for _ in range(6)]
    assert sorted(m.partition() for m in ids) == [0, 0, 1, 1, 2, 2]
    for key in ("alpha", "beta", "gamma"):
        for _ in range(3):
            mid = producer.send(key.encode(), partition_key=key)
            assert mid.partition() == partition_for_key(key, 3)
    got = receive_n(consumer, 15)
    by_key: dict[bytes, set[int]] = {}
    for m in got:
        assert m.topic_name() == f"{topic}-partition-{m.message_id().partition()}"
        by_key.setdefault(m.data(), set()).add(m.message_id().partition())
        consumer.acknowledge(m)
    assert all(len(parts) == 1 for key, parts in by_key.items() if key != b"rr")
    assert drain(consumer) == []


def test_partitioned_batched_reader(pclient: pulsar.Client, topic: str) -> None:
    producer = pclient.create_producer(topic, batching_enabled=True)
    for i in range(12):
        producer.send_async(str(i).encode(), lambda r, m: None)
    producer.flush()
    reader = pclient.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.has_message_available()
    assert sorted(int(m.data()) for m in drain_reader(reader)) == list(range(12))
    assert not reader.has_message_available()


def test_custom_message_router(pclient: pulsar.Client, topic: str) -> None:
    producer = pclient.create_producer(topic, message_router=lambda msg, n: 2)
    assert {producer.send(b"x").partition() for _ in range(4)} == {2}


def test_admin_created_partitioned_topic(
    broker: BrokerProcess, client: pulsar.Client, topic: str
) -> None:
    broker.create_partitioned_topic(topic, 2)
    assert client.get_topic_partitions(topic) == [
        f"{topic}-partition-{i}" for i in range(2)
    ]


def test_exclusive_rejects_second_consumer(client: pulsar.Client, topic: str) -> None:
    client.subscribe(topic, "sub")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub")


def test_shared_delivers_each_message_once(client: pulsar.Client, topic: str) -> None:
    c1 = client.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=5
    )
    c2 = client.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=5
    )
    producer = client.create_producer(topic)
    for i in range(40):
        producer.send_async(str(i).encode(), lambda r, m: None)
    producer.flush()
    seen: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(seen) < 40 and time.monotonic() < deadline:
        for c in (c1, c2):
            for m in drain(c, 100):
                seen.append(m.data())
                c.acknowledge(m)
    assert sorted(seen, key=int) == [str(i).encode() for i in range(40)]


def test_key_shared_same_key_same_consumer(client: pulsar.Client, topic: str) -> None:
    consumers = [
        client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.KeyShared)
        for _ in range(2)
    ]
    producer = client.create_producer(topic)
    keys = [f"key-{i}" for i in range(8)]
    for round_ in range(5):
        for k in keys:
            producer.send_async(
                f"{k}:{round_}".encode(), lambda r, m: None, partition_key=k
            )
    producer.flush()
    owner: dict[str, int] = {}
    count = 0
    deadline = time.monotonic() + 20
    while count < 40 and time.monotonic() < deadline:
        for idx, c in enumerate(consumers):
            for m in drain(c, 100):
                count += 1
                assert owner.setdefault(m.partition_key(), idx) == idx
                c.acknowledge(m)
    assert count == 40


def test_failover_switches_when_active_closes(
    client: pulsar.Client, topic: str
) -> None:
    c1 = client.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name="a"
    )
    c2 = client.subscribe(
        topic, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name="b"
    )
    producer = client.create_producer(topic)
    for i in range(6):
        producer.send(str(i).encode())
    first = drain(c1, 500)
    second = drain(c2, 500)
    active, standby = (c1, c2) if first else (c2, c1)
    got = first or second
    assert [m.data() for m in got] == [str(i).encode() for i in range(6)]
    assert not (first and second)
    for m in got[:3]:
        active.acknowledge(m)
    active.close()
    rest = receive_n(standby, 3)
    assert [m.data() for m in rest] == [b"3", b"4", b"5"]


def test_individual_and_cumulative_acks(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(6):
        producer.send(str(i).encode())
    got = receive_n(consumer, 6)
    consumer.acknowledge_cumulative(got[2])  # 0, 1, 2
    consumer.acknowledge(got[4])
    consumer.close()
    consumer = client.subscribe(topic, "sub")
    assert [m.data() for m in drain(consumer, 500)] == [b"3", b"5"]


def test_cumulative_ack_not_allowed_on_shared(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    producer.send(b"x")
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        consumer.acknowledge_cumulative(consumer.receive(RECEIVE_MS))


def test_batch_member_acks(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=100
    )
    for i in range(4):
        producer.send_async(str(i).encode(), lambda r, m: None)
    producer.flush()
    got = receive_n(consumer, 4)
    assert {m.message_id().entry_id() for m in got} == {got[0].message_id().entry_id()}
    for m in got[:3]:
        consumer.acknowledge(m)
    consumer.close()
    # The entry was not fully acked, so the whole batch comes again.
    consumer = client.subscribe(topic, "sub")
    again = drain(consumer, 500)
    assert [m.data() for m in again] == [b"0", b"1", b"2", b"3"]
    for m in again:
        consumer.acknowledge(m)
    consumer.close()
    consumer = client.subscribe(topic, "sub")
    assert drain(consumer, 300) == []


@pytest.mark.parametrize(
    "sub_type", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.Exclusive]
)
def test_negative_ack_redelivery(
    client: pulsar.Client, topic: str, sub_type: pulsar.ConsumerType
) -> None:
    consumer = client.subscribe(
        topic, "sub", consumer_type=sub_type, negative_ack_redelivery_delay_ms=100
    )
    producer = client.create_producer(topic)
    producer.send(b"a")
    producer.send(b"b")
    a, b = receive_n(consumer, 2)
    consumer.acknowledge(b)
    consumer.negative_acknowledge(a)
    again = consumer.receive(RECEIVE_MS)
    assert again.data() == b"a"
    assert again.redelivery_count() >= 1
    consumer.acknowledge(again)
    assert drain(consumer, 300) == []


def test_redelivery_after_consumer_close(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(str(i).encode())
    assert len(receive_n(consumer, 3)) == 3
    consumer.close()
    other = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    assert sorted(m.data() for m in receive_n(other, 3)) == [b"0", b"1", b"2"]


def test_redeliver_unacknowledged_messages(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"x")
    consumer.receive(RECEIVE_MS)
    consumer.redeliver_unacknowledged_messages()
    assert consumer.receive(RECEIVE_MS).data() == b"x"


def test_initial_position_earliest(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    producer.send(b"old")
    latest = client.subscribe(topic, "late")
    earliest = client.subscribe(
        topic, "early", initial_position=pulsar.InitialPosition.Earliest
    )
    producer.send(b"new")
    assert [m.data() for m in drain(earliest)] == [b"old", b"new"]
    assert [m.data() for m in drain(latest)] == [b"new"]


@pytest.mark.parametrize("batching", [False, True])
def test_readers(client: pulsar.Client, topic: str, batching: bool) -> None:
    producer = client.create_producer(
        topic, batching_enabled=batching, batching_max_messages=3
    )
    ids = []
    for i in range(6):
        producer.send_async(str(i).encode(), lambda r, m: ids.append(m))
    producer.flush()
    assert len(ids) == 6
    r = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [m.data() for m in drain_reader(r)] == [str(i).encode() for i in range(6)]
    r = client.create_reader(topic, ids[2])
    assert [m.data() for m in drain_reader(r)] == [b"3", b"4", b"5"]
    r = client.create_reader(topic, ids[2], start_message_id_inclusive=True)
    assert [m.data() for m in drain_reader(r)] == [b"2", b"3", b"4", b"5"]
    r = client.create_reader(topic, pulsar.MessageId.latest)
    assert drain_reader(r) == []
    producer.send(b"6")
    assert r.read_next(RECEIVE_MS).data() == b"6"


def drain_reader(reader: pulsar.Reader, timeout_ms: int = 300) -> list[pulsar.Message]:
    out = []
    while True:
        try:
            out.append(reader.read_next(timeout_ms))
        except pulsar.Timeout:
            return out


def test_has_message_available_and_last_message_id(
    client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "sub")
    assert consumer.get_last_message_id().entry_id() == -1
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert not reader.has_message_available()
    producer = client.create_producer(topic)
    mids = [producer.send(str(i).encode()) for i in range(3)]
    assert consumer.get_last_message_id() == mids[-1]
    seen = []
    while reader.has_message_available():
        seen.append(reader.read_next(RECEIVE_MS).data())
    assert seen == [b"0", b"1", b"2"]
    latest = client.create_reader(topic, pulsar.MessageId.latest)
    assert not latest.has_message_available()
    producer.send(b"3")
    assert latest.has_message_available()


def test_seek_by_id_and_time(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    mids = [producer.send(str(i).encode()) for i in range(3)]
    # Publish times are in ms: let the clock pass a millisecond boundary on each side
    # of the cut (a bounded wait on the clock, not a guess).
    cut = int(time.time() * 1000) + 1
    while int(time.time() * 1000) <= cut:
        time.sleep(0.001)
    mids += [producer.send(str(i).encode()) for i in range(3, 5)]
    got = receive_n(consumer, 5)
    for m in got:
        consumer.acknowledge(m)
    # As with the official client, a seek id itself is skipped unless the consumer or
    # reader was created with start_message_id_inclusive=True.
    consumer.seek(mids[1])
    assert [m.data() for m in drain(consumer, 500)] == [b"2", b"3", b"4"]
    consumer.seek(cut)
    assert [m.data() for m in drain(consumer, 500)] == [b"3", b"4"]
    reader = client.create_reader(topic, pulsar.MessageId.latest)
    reader.seek(mids[3])
    assert [m.data() for m in drain_reader(reader, 500)] == [b"4"]
    inclusive = client.create_reader(
        topic, pulsar.MessageId.latest, start_message_id_inclusive=True
    )
    inclusive.seek(mids[3])
    assert [m.data() for m in drain_reader(inclusive, 500)] == [b"3", b"4"]


@dataclasses.dataclass
class Order:
    id: int
    item: str


def test_string_and_json_schemas(client: pulsar.Client, topic: str) -> None:
    consumer = client.subscribe(
        topic + "-s", "sub", schema=pulsar.schema.StringSchema()
    )
    producer = client.create_producer(topic + "-s", schema=pulsar.schema.StringSchema())
    producer.send("héllo")
    assert consumer.receive(RECEIVE_MS).value() == "héllo"
    jconsumer = client.subscribe(topic + "-j", "sub", schema=pulsar.JsonSchema(Order))
    jproducer = client.create_producer(topic + "-j", schema=pulsar.JsonSchema(Order))
    jproducer.send(Order(7, "book"))
    assert jconsumer.receive(RECEIVE_MS).value() == Order(7, "book")


def test_message_listener(client: pulsar.Client, topic: str) -> None:
    import threading

    got: list[bytes] = []
    done = threading.Event()

    def listener(consumer: pulsar.Consumer, msg: pulsar.Message) -> None:
        got.append(msg.data())
        consumer.acknowledge(msg)
        if len(got) == 3:
            done.set()

    client.subscribe(topic, "sub", message_listener=listener)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(str(i).encode())
    assert done.wait(RECEIVE_MS / 1000)
    assert got == [b"0", b"1", b"2"]


def test_regex_and_list_subscriptions(client: pulsar.Client, topic: str) -> None:
    import re

    names = [f"{topic}-r{i}" for i in range(2)]
    producers = [client.create_producer(n) for n in names]
    lst = client.subscribe(names, "list-sub")
    rx = client.subscribe(re.compile(re.escape(topic) + r"-r\d"), "rx-sub")
    for p in producers:
        p.send(p.topic().encode())
    for c in (lst, rx):
        got = receive_n(c, 2)
        assert sorted(m.data() for m in got) == sorted(n.encode() for n in names)
        for m in got:
            c.acknowledge(m)


def test_invalid_topic_and_closed_objects(client: pulsar.Client, topic: str) -> None:
    with pytest.raises(pulsar.InvalidTopicName):
        client.create_producer("a/b")
    producer = client.create_producer(topic)
    producer.close()
    with pytest.raises(pulsar.AlreadyClosed):
        producer.send(b"x")


def test_producer_resumes_after_broker_kill(
    own_broker: BrokerProcess, topic: str
) -> None:
    client = pulsar.Client(own_broker.service_url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(
            topic, producer_name="crash-producer", send_timeout_millis=60_000
        )
        results: dict[int, pulsar.Result] = {}
        for i in range(50):
            producer.send(str(i).encode())
            results[i] = pulsar.Result.Ok
        for i in range(50, 150):
            producer.send_async(
                str(i).encode(), lambda r, m, i=i: results.__setitem__(i, r)
            )
        own_broker.kill()  # SIGKILL while sends are in flight
        own_broker.start()
        producer.flush()  # reconnects, resends everything un-receipted, waits for receipts
        assert {i for i, r in results.items() if r == pulsar.Result.Ok} == set(
            range(150)
        )
        # The topic holds every acknowledged send exactly once (broker dedup on
        # producer name + sequence id absorbs resends of stored but unreceipted sends).
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        stored = [int(m.data()) for m in drain_reader(reader, 1000)]
        assert sorted(stored) == list(range(150))
        assert stored == list(range(150))  # and in order
    finally:
        client.close()
