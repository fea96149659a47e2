"""Hostile clients against real broker processes: what one connection may make the
broker hold (memory for dispatch and for incomplete frames, producers, consumers,
connections) is bounded, a refusal is Pulsar's error on that request, everything a
connection holds is let go when it closes, and other clients are served meanwhile.

Memory is read as the broker's VmRSS (``/proc/<pid>/status``). Waits are for events
(a counter on ``/metrics``, the topic's stats, the peer closing), in bounded loops.
"""

from __future__ import annotations

import json
import re
import struct
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pulsar
import pytest

from quasar.errors import ServerError
from quasar.protocol import encode_command, encode_message, pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw

pytestmark = pytest.mark.usefixtures("close_raw")

T = pb.BaseCommand
MiB = 1024 * 1024
WAIT_S = 30.0  # the bound on every wait for the broker to get somewhere
FRAME_TIMEOUT_S = 4  # incompleteFrameTimeoutSeconds of the `limited` broker


# -- brokers ---------------------------------------------------------------------------
def _broker(tmp: Path, settings: dict[str, str]) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp / "data", settings=settings).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Default limits, but room for the 20,000 producers of one connection."""
    yield from _broker(tmp_path_factory.mktemp("roomy"), {"maxProducersPerConnection": "20000"})


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _broker(
        tmp_path_factory.mktemp("limited"),
        {
            "maxProducersPerTopic": "2",
            "maxConsumersPerTopic": "3",
            "maxConsumersPerSubscription": "2",
            "maxProducersPerConnection": "3",
            "maxConsumersPerConnection": "4",
            "incompleteFrameTimeoutSeconds": str(FRAME_TIMEOUT_S),
            "maxIncompleteFramesSizeInMB": "8",
        },
    )


@pytest.fixture(scope="module")
def per_ip(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _broker(tmp_path_factory.mktemp("per-ip"), {"brokerMaxConnectionsPerIp": "3"})


# -- what the tests read of a broker ---------------------------------------------------
def rss(broker: BrokerProcess) -> int:
    """The broker's resident memory in bytes."""
    return broker.rss_bytes()


def _get(broker: BrokerProcess, path: str) -> bytes:
    with urllib.request.urlopen(broker.admin_url + path, timeout=10) as r:
        body: bytes = r.read()
        return body


def metric(broker: BrokerProcess, sample: str) -> float:
    """The value of one sample on ``/metrics`` (``name{labels}``), 0 when absent."""
    for line in _get(broker, "/metrics").decode().splitlines():
        name, _, value = line.rpartition(" ")
        if name == sample:
            return float(value)
    return 0.0


def refusals(broker: BrokerProcess, limit: str) -> float:
    return metric(broker, f'quasar_limit_refusals_total{{limit="{limit}"}}')


def incomplete_bytes(broker: BrokerProcess) -> float:
    return metric(broker, "quasar_incomplete_frames_bytes")


def stats(broker: BrokerProcess, topic: str) -> dict[str, object]:
    path = "/admin/v2/" + topic.replace("://", "/") + "/stats"
    result: dict[str, object] = json.loads(_get(broker, path))
    return result


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.05)


def new_topic(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


# -- raw commands ----------------------------------------------------------------------
def connected(broker: BrokerProcess) -> Raw:
    raw = Raw(broker.port)
    raw.connect()
    return raw


def ping_round_trip(raw: Raw) -> float:
    """Seconds for a PING to be answered on ``raw``."""
    start = time.monotonic()
    raw.send(T(type=T.PING))
    raw.recv_type(T.PONG)
    return time.monotonic() - start


def subscribe_cmd(topic: str, sub: str, consumer_id: int, sub_type: int = pb.CommandSubscribe.Shared,
                  earliest: bool = False) -> pb.BaseCommand:
    cmd = T(type=T.SUBSCRIBE)
    s = cmd.subscribe
    s.topic, s.subscription, s.subType = topic, sub, sub_type
    s.consumer_id, s.request_id = consumer_id, consumer_id
    if earliest:
        s.initialPosition = pb.CommandSubscribe.Earliest
    return cmd


def subscribe(raw: Raw, topic: str, sub: str, consumer_id: int, **kw: object) -> pb.BaseCommand:
    """SUBSCRIBE and its answer (SUCCESS or ERROR)."""
    raw.send(subscribe_cmd(topic, sub, consumer_id, **kw))  # type: ignore[arg-type]
    while True:
        answer = raw.recv()
        if answer.type in (T.SUCCESS, T.ERROR):
            return answer


def flow_cmd(consumer_id: int, permits: int) -> pb.BaseCommand:
    cmd = T(type=T.FLOW)
    cmd.flow.consumer_id, cmd.flow.messagePermits = consumer_id, permits
    return cmd


def send_frame(producer_id: int, sequence_id: int, payload: bytes) -> bytes:
    cmd = T(type=T.SEND)
    cmd.send.producer_id, cmd.send.sequence_id = producer_id, sequence_id
    md = pb.MessageMetadata(producer_name=f"p{producer_id}", sequence_id=sequence_id,
                            publish_time=1)
    return encode_message(cmd, md, payload)


def frame_start(total_bytes: int, sent_bytes: int) -> bytes:
    """The first ``sent_bytes`` of a frame announcing ``total_bytes`` after its size."""
    return struct.pack(">I", total_bytes) + b"\0" * (sent_bytes - 4)


def assert_others_served(broker: BrokerProcess) -> None:
    """Another client is served: a PING is answered, and a message is produced and
    consumed on another topic, each within the bound of its timeout."""
    raw = connected(broker)
    ping_round_trip(raw)
    raw.close()
    client = pulsar.Client(broker.url, operation_timeout_seconds=10)
    try:
        topic = new_topic("bystander")
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"still served")
        assert consumer.receive(10_000).data() == b"still served"
    finally:
        client.close()


# -- dispatch back-pressure ------------------------------------------------------------
def test_a_consumer_that_grants_2_31_permits_and_never_reads_costs_one_write_buffer(
    roomy: BrokerProcess,
) -> None:
    topic, count, size = new_topic("hog"), 1000, 100 * 1024  # a 100 MB backlog
    hog = connected(roomy)
    assert subscribe(hog, topic, "hog", 1, sub_type=pb.CommandSubscribe.Exclusive,
                     earliest=True).type == T.SUCCESS
    client = pulsar.Client(roomy.url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(topic, batching_enabled=False,
                                          max_pending_messages=200, block_if_queue_full=True)
        for i in range(count):
            producer.send_async(bytes([i % 256]) * size, None)
        producer.flush()
    finally:
        client.close()
    baseline = rss(roomy)
    hog.send(flow_cmd(1, 2**31))

    def out() -> int:
        sub = stats(roomy, topic)["subscriptions"]["hog"]  # type: ignore[index]
        return int(sub["msgOutCounter"])

    # Dispatch goes on until the client's socket and the broker's write buffer are
    # full, then stops: the counter stays put.
    seen: list[int] = []

    def settled() -> bool:
        seen.append(out())
        return len(seen) >= 10 and seen[-1] > 0 and len(set(seen[-10:])) == 1

    wait_until(settled, "dispatch to the hog stopped")
    growth = rss(roomy) - baseline
    print(f"\nhog: {seen[-1]} of {count} messages dispatched, broker RSS +{growth / MiB:.1f} MiB")
    assert seen[-1] < count // 2  # held back: most of the backlog stayed in storage
    assert growth < 50 * MiB
    assert_others_served(roomy)
    # Once the client reads, dispatch resumes and everything arrives, in order.
    received = 0
    while received < count:
        message = hog.recv_type(T.MESSAGE).message
        assert message.message_id.entryId == received
        received += 1


# -- incomplete frames -----------------------------------------------------------------
def test_incomplete_frames_are_bounded_broker_wide_and_in_time(limited: BrokerProcess) -> None:
    """Budget 8 MiB, timeout 4 s: two connections holding 3 MiB each are let be until
    the timeout; a third that would pass the budget is closed at once."""
    before_budget = refusals(limited, "maxIncompleteFramesSizeInMB")
    before_timeout = refusals(limited, "incompleteFrameTimeoutSeconds")
    base = incomplete_bytes(limited)
    started: list[float] = []
    holders: list[Raw] = []
    for n in (1, 2):
        raw = connected(limited)
        started.append(time.monotonic())
        raw.send_bytes(frame_start(4 * MiB, 3 * MiB))
        holders.append(raw)
        wait_until(lambda n=n: incomplete_bytes(limited) >= base + n * 3 * MiB,  # type: ignore[misc]
                   "the broker holds the incomplete frame")
    third = connected(limited)
    try:
        third.send_bytes(frame_start(4 * MiB, 3 * MiB))
    except OSError:
        pass  # closed while sending: what the test waits for below
    assert third.is_closed_by_peer()
    assert refusals(limited, "maxIncompleteFramesSizeInMB") == before_budget + 1
    # The two within the budget are still held, and others are served meanwhile.
    assert incomplete_bytes(limited) >= base + 6 * MiB
    assert_others_served(limited)
    for raw, start in zip(holders, started, strict=True):
        assert raw.is_closed_by_peer()
        assert time.monotonic() - start >= FRAME_TIMEOUT_S - 0.1  # not before the timeout
    wait_until(lambda: incomplete_bytes(limited) == base, "the broker let the bytes go")
    assert refusals(limited, "incompleteFrameTimeoutSeconds") == before_timeout + 2
    assert "incompleteFrameTimeoutSeconds" in limited.read_log()


def test_a_frame_kept_alive_byte_by_byte_is_closed_at_the_timeout(
    limited: BrokerProcess,
) -> None:
    raw = connected(limited)
    start = time.monotonic()
    raw.send_bytes(frame_start(1 * MiB, 100 * 1024))
    raw.sock.settimeout(0.25)
    closed = False
    while not closed and time.monotonic() - start < FRAME_TIMEOUT_S + 10:
        try:
            raw.send_bytes(b"\0")  # a byte now and then: the connection is not idle
            closed = raw.sock.recv(65536) == b""
        except TimeoutError:
            continue
        except OSError:
            closed = True
    assert closed, "the dripping connection was not closed by the timeout"
    assert time.monotonic() - start >= FRAME_TIMEOUT_S - 0.1
    ping_round_trip(connected(limited))


def test_closed_half_sent_connections_release_their_memory_at_once(
    roomy: BrokerProcess,
) -> None:
    """40 connections each hold 4 MiB of a frame; once they close, the broker's RSS
    is back near where it was, without waiting for a garbage collection."""
    base_bytes = incomplete_bytes(roomy)
    baseline = rss(roomy)
    raws = [connected(roomy) for _ in range(40)]
    for raw in raws:
        raw.send_bytes(frame_start(4 * MiB + 16, 4 * MiB))
    wait_until(lambda: incomplete_bytes(roomy) >= base_bytes + 40 * 4 * MiB,
               "the broker holds every incomplete frame")
    held = rss(roomy) - baseline
    assert held > 120 * MiB  # the frames really are in the broker's memory
    for raw in raws:
        raw.close()
    wait_until(lambda: incomplete_bytes(roomy) == base_bytes, "the broker let the bytes go")
    left = rss(roomy) - baseline
    print(f"\nhalf-sent frames: RSS +{held / MiB:.0f} MiB held, +{left / MiB:.1f} MiB after close")
    assert left < 40 * MiB
    assert_others_served(roomy)


# -- registration cost -----------------------------------------------------------------
def test_20000_producers_on_one_connection_leave_other_clients_served(
    roomy: BrokerProcess,
) -> None:
    topic, count = new_topic("crowd"), 20_000
    crowd = connected(roomy)
    # The first producer loads the topic; the others are registered on it at once.
    assert crowd.producer(topic, 0, 0).type == T.PRODUCER_SUCCESS
    commands = bytearray()
    for i in range(1, count):
        cmd = T(type=T.PRODUCER)
        cmd.producer.topic, cmd.producer.producer_id, cmd.producer.request_id = topic, i, i
        commands += encode_command(cmd)
    pings: list[float] = []
    done = threading.Event()

    def ping_meanwhile() -> None:
        bystander = connected(roomy)
        while not done.is_set():
            pings.append(ping_round_trip(bystander))

    pinger = threading.Thread(target=ping_meanwhile)
    pinger.start()
    start = time.monotonic()
    try:
        crowd.send_bytes(bytes(commands))
        answers = [crowd.recv() for _ in range(count - 1)]
    finally:
        done.set()
        pinger.join(WAIT_S)
    took = time.monotonic() - start
    assert [a.type for a in answers] == [T.PRODUCER_SUCCESS] * (count - 1)
    print(f"\n{count} producers on one connection: {took:.2f} s; {len(pings)} PINGs of "
          f"another client meanwhile, slowest {max(pings) * 1000:.0f} ms")
    assert pings  # the other client was answered while the producers were added
    publishers = stats(roomy, topic)["publishers"]
    assert len(publishers) == count  # type: ignore[arg-type]
    # One more is over maxProducersPerConnection: refused on the request, and the
    # connection goes on.
    answer = crowd.producer(topic, producer_id=count, request_id=count)
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.ProducerBusy)
    assert answer.error.message == "Connection reached max producers limit"
    ping_round_trip(crowd)
    start = time.monotonic()
    crowd.close()
    wait_until(lambda: not stats(roomy, topic)["publishers"], "the producers are gone")
    print(f"closing the connection released them in {time.monotonic() - start:.2f} s")
    assert_others_served(roomy)


# -- Pulsar's limits -------------------------------------------------------------------
def test_producers_per_topic_and_per_connection(limited: BrokerProcess) -> None:
    busy = refusals(limited, "maxProducersPerTopic")
    topic = new_topic("two-producers")
    first, second = connected(limited), connected(limited)
    assert first.producer(topic, 1, 1).type == T.PRODUCER_SUCCESS
    assert second.producer(topic, 1, 1).type == T.PRODUCER_SUCCESS
    answer = second.producer(topic, 2, 2)
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.ProducerBusy)
    assert answer.error.message == "Topic reached max producers limit"
    assert refusals(limited, "maxProducersPerTopic") == busy + 1
    ping_round_trip(second)
    # The official client sees Pulsar's error.
    client = pulsar.Client(limited.url, operation_timeout_seconds=10)
    try:
        with pytest.raises(pulsar.ProducerBusy):
            client.create_producer(topic)
    finally:
        client.close()
    # Per connection: three producers, the fourth is refused until one closes.
    raw = connected(limited)
    for pid in (1, 2, 3):
        assert raw.producer(new_topic("own"), pid, pid).type == T.PRODUCER_SUCCESS
    answer = raw.producer(new_topic("own"), 4, 4)
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.ProducerBusy)
    assert answer.error.message == "Connection reached max producers limit"
    close = T(type=T.CLOSE_PRODUCER)
    close.close_producer.producer_id, close.close_producer.request_id = 1, 5
    raw.request(close, T.SUCCESS)
    assert raw.producer(new_topic("own"), 4, 6).type == T.PRODUCER_SUCCESS
    assert_others_served(limited)


def test_consumers_per_subscription_topic_and_connection(limited: BrokerProcess) -> None:
    topic = new_topic("few-consumers")
    a, b = connected(limited), connected(limited)
    assert subscribe(a, topic, "s", 1).type == T.SUCCESS
    assert subscribe(b, topic, "s", 1).type == T.SUCCESS
    answer = subscribe(b, topic, "s", 2)
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.ConsumerBusy)
    assert answer.error.message == "Subscription reached max consumers limit"
    assert subscribe(b, topic, "t", 3).type == T.SUCCESS  # three on the topic now
    answer = subscribe(a, topic, "u", 4)
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.ConsumerBusy)
    assert answer.error.message == "Topic reached max consumers limit"
    ping_round_trip(a)
    raw = connected(limited)
    for cid in (1, 2, 3, 4):
        assert subscribe(raw, new_topic("own"), "s", cid).type == T.SUCCESS
    answer = subscribe(raw, new_topic("own"), "s", 5)
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.ConsumerBusy)
    assert answer.error.message == "Connection reached max consumers limit"
    ping_round_trip(raw)
    assert refusals(limited, "maxConsumersPerSubscription") >= 1
    assert refusals(limited, "maxConsumersPerTopic") >= 1
    assert refusals(limited, "maxConsumersPerConnection") >= 1
    assert_others_served(limited)


def test_connections_over_the_per_ip_limit_are_refused_at_accept(per_ip: BrokerProcess) -> None:
    raws = [connected(per_ip) for _ in range(3)]
    refused = Raw(per_ip.port)  # the broker answers before any CONNECT
    answer = refused.recv()
    assert (answer.type, answer.error.error) == (T.ERROR, ServerError.NotAllowedError)
    assert answer.error.message == (
        "Reached the maximum number of connections on address 127.0.0.1"
    )
    assert refused.is_closed_by_peer()
    assert refusals(per_ip, "brokerMaxConnectionsPerIp") >= 1
    assert re.search(r"refusing connection from 127\.0\.0\.1:\d+", per_ip.read_log())
    ping_round_trip(raws[0])
    # A slot is free again once a connection closed.
    raws.pop().close()

    def admitted() -> bool:
        try:
            connected(per_ip).close()
        except (TimeoutError, ConnectionError):
            return False
        return True

    wait_until(admitted, "a new connection is admitted")
    for raw in raws:
        raw.close()
    assert_others_served(per_ip)


# -- release on close ------------------------------------------------------------------
def test_everything_a_connection_holds_is_released_when_it_closes(
    roomy: BrokerProcess,
) -> None:
    """Rounds of 20 connections, each with 10 producers, 10 consumers and sends in
    flight, closed at once: the topic's producers and consumers go back to none and
    the broker's memory does not grow from round to round."""
    topic = new_topic("churn")
    baseline = rss(roomy)
    growth: list[float] = []
    for _ in range(3):
        raws = [connected(roomy) for _ in range(20)]
        for raw in raws:
            data = bytearray()
            for i in range(10):
                cmd = T(type=T.PRODUCER)
                cmd.producer.topic, cmd.producer.producer_id = topic, i
                cmd.producer.request_id = i
                data += encode_command(cmd)
                data += encode_command(subscribe_cmd(topic, "s", 100 + i))
                data += encode_command(flow_cmd(100 + i, 1000))
            raw.send_bytes(bytes(data))
            answers = [raw.recv() for _ in range(20)]
            assert {a.type for a in answers} <= {T.PRODUCER_SUCCESS, T.SUCCESS}, answers
            raw.send_bytes(b"".join(send_frame(i, s, b"x" * 1000)
                                    for i in range(10) for s in range(20)))
        for raw in raws:
            raw.close()

        def released() -> bool:
            s = stats(roomy, topic)
            subs = s["subscriptions"]
            return not s["publishers"] and not subs["s"]["consumers"]  # type: ignore[index]

        wait_until(released, "the topic's producers and consumers are gone")
        growth.append((rss(roomy) - baseline) / MiB)
    print(f"\nRSS growth after each round of 20 connections: {growth} MiB")
    assert growth[-1] < 30
    assert_others_served(roomy)
