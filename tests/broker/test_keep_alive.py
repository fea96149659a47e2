"""Keep-alive (``keepAliveIntervalSeconds``) against a real broker process: a client that
stops answering is disconnected and its resources are freed; clients that answer the
broker's PINGs (a raw one, the official client, quasar's own) stay connected."""

from __future__ import annotations

from collections.abc import Iterator

import pulsar
import pytest

import quasar.client as qc
from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw, close_all

T = pb.BaseCommand
INTERVAL_S = 1
RECEIVE_MS = 10_000
_CLOSED_SILENT = "no answer to the keep-alive PING"

# A test's raw connections must not outlive it: left open and unanswered they would be
# closed by keep-alive during a later test.
pytestmark = pytest.mark.usefixtures("close_raw")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    env = {"QUASAR_keepAliveIntervalSeconds": str(INTERVAL_S)}
    proc = BrokerProcess(tmp_path_factory.mktemp("keepalive") / "data", extra_env=env)
    proc.start()
    yield proc
    close_all()
    assert proc.stop() == 0, proc.read_log()


def _subscribe(raw: Raw, topic: str, sub: str) -> pb.BaseCommand:
    cmd = pb.BaseCommand(type=T.SUBSCRIBE)
    s = cmd.subscribe
    s.topic, s.subscription, s.subType, s.consumer_id, s.request_id = topic, sub, 0, 1, 11
    raw.send(cmd)
    while True:
        answer = raw.recv()
        if answer.type in (T.SUCCESS, T.ERROR):
            return answer


def test_a_connection_without_connect_is_closed(broker: BrokerProcess) -> None:
    raw = Raw(broker.port)
    raw.sock.settimeout(10 * INTERVAL_S)
    assert raw.is_closed_by_peer()


def test_a_silent_client_is_closed_and_its_consumer_freed(broker: BrokerProcess) -> None:
    topic = "persistent://public/default/keepalive-silent"
    silent = Raw(broker.port)
    silent.connect()
    assert _subscribe(silent, topic, "only-one").type == T.SUCCESS
    silent.sock.settimeout(10 * INTERVAL_S)
    assert silent.recv_type(T.PING) is not None  # asked, never answered
    assert silent.is_closed_by_peer()

    # The exclusive subscription is free again for someone else.
    other = Raw(broker.port)
    other.connect()
    assert _subscribe(other, topic, "only-one").type == T.SUCCESS
    assert _CLOSED_SILENT in broker.read_log()


def test_a_client_answering_pings_stays_connected(broker: BrokerProcess) -> None:
    raw = Raw(broker.port)
    raw.connect()
    for _ in range(3):  # three ticks, each answered
        raw.recv_type(T.PING)
        raw.send(pb.BaseCommand(type=T.PONG, pong=pb.CommandPong()))
    answer = raw.producer("persistent://public/default/keepalive-raw")
    assert answer.type == T.PRODUCER_SUCCESS


@pytest.mark.parametrize("library", ["pulsar", "quasar"])
def test_idle_clients_keep_their_connection(broker: BrokerProcess, library: str) -> None:
    """Idle through several ticks, the clients answer PINGs: the broker never
    disconnects them, so nothing has to reconnect."""
    topic = f"persistent://public/default/keepalive-idle-{library}"
    closed_before = broker.read_log().count(_CLOSED_SILENT)
    module = pulsar if library == "pulsar" else qc
    client = module.Client(broker.url)
    try:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "s")
        raw = Raw(broker.port)  # a clock: three of the broker's ticks pass
        raw.connect()
        for _ in range(3):
            raw.recv_type(T.PING)
            raw.send(pb.BaseCommand(type=T.PONG, pong=pb.CommandPong()))
        producer.send(b"after idle")
        assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"after idle"
    finally:
        client.close()
    assert broker.read_log().count(_CLOSED_SILENT) == closed_before
