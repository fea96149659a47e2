"""Network faults between real clients and a real broker, through the fault proxy.

The broker listens on 127.0.0.1:P and advertises 127.0.0.2; the proxy listens on
127.0.0.2:P. A client given the proxy's URL looks the topic up through it and is told
to connect to 127.0.0.2:P, the proxy again, so every connection it opens crosses the
proxy (no lookup code is involved: LOOKUP answers the advertised address and port).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import quasar.client
from quasar.protocol import pb
from quasar.testing.fault_proxy import Direction, FaultProxy, wait_until
from quasar.testing.process import BrokerProcess

pulsar = pytest.importorskip("pulsar")

PROXY_ADDRESS = "127.0.0.2"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("network_faults") / "data",
        advertised_address=PROXY_ADDRESS,
        settings={
            "brokerDeduplicationEnabled": "true",
            # The broker's keep-alive notices a silent connection within ~2 s.
            "keepAliveIntervalSeconds": "1",
        },
    ).start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture
def proxy(broker: BrokerProcess) -> Iterator[FaultProxy]:
    with FaultProxy(
        "127.0.0.1", broker.port, listen_host=PROXY_ADDRESS, listen_port=broker.port
    ) as p:
        yield p


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/net-{uuid.uuid4().hex[:8]}"


def _official(url: str) -> Any:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.CRITICAL)
    return pulsar.Client(url, operation_timeout_seconds=10, logger=logger)


def _quasar(url: str) -> Any:
    return quasar.client.Client(url, operation_timeout_seconds=10)


def _stored(broker: BrokerProcess, topic: str) -> list[bytes]:
    """Everything stored on ``topic``, read straight from the broker (no proxy)."""
    client = quasar.client.Client(broker.url, operation_timeout_seconds=10)
    try:
        reader = client.create_reader(topic, quasar.client.MessageId.earliest)
        out = []
        while reader.has_message_available():
            out.append(reader.read_next(timeout_millis=10_000).data())
        return out
    finally:
        client.close()


class _Sends:
    """Outcomes of async sends, by payload."""

    def __init__(self, ok: Any) -> None:
        self.ok = ok  # the client module's Result.Ok
        self.lock = threading.Lock()
        self.acked: list[bytes] = []
        self.failed: list[tuple[bytes, str]] = []

    def callback(self, payload: bytes) -> Any:
        def done(result: Any, _msg_id: Any) -> None:
            with self.lock:
                if result == self.ok:
                    self.acked.append(payload)
                else:
                    self.failed.append((payload, str(result)))

        return done

    def finished(self) -> int:
        with self.lock:
            return len(self.acked) + len(self.failed)


@pytest.mark.parametrize("impl", ["pulsar", "quasar"])
@pytest.mark.parametrize("direction", [Direction.TO_SERVER, Direction.TO_CLIENT])
def test_producer_cut_mid_frame_stores_each_acknowledged_message_once(
    broker: BrokerProcess, proxy: FaultProxy, topic: str, direction: Direction, impl: str
) -> None:
    client = _official(proxy.url) if impl == "pulsar" else _quasar(proxy.url)
    try:
        producer = client.create_producer(
            topic, batching_enabled=False, send_timeout_millis=20_000, producer_name="cut"
        )
        sends = _Sends((pulsar if impl == "pulsar" else quasar.client).Result.Ok)
        payloads = [b"m-%03d" % i for i in range(60)]
        for payload in payloads[:20]:
            producer.send_async(payload, sends.callback(payload))
        wait_until(lambda: sends.finished() >= 5, 10, "first receipts")
        accepted = proxy.accepted
        # A few bytes of the next chunk get through: the peer holds half a frame
        # (a SEND, or a SEND_RECEIPT whose message is stored) when the link drops.
        assert proxy.cut_all(direction, 7) >= 1
        for payload in payloads[20:]:
            producer.send_async(payload, sends.callback(payload))
        wait_until(lambda: sends.finished() == len(payloads), 30, "every send answered")
        assert proxy.accepted > accepted, "the producer reconnected"
        assert sends.failed == []
    finally:
        client.close()
    stored = _stored(broker, topic)
    assert sorted(stored) == sorted(set(stored)), "a message was stored twice"
    assert set(sends.acked) <= set(stored), "an acknowledged message was lost"
    assert stored == sorted(stored), "the producer's order was not kept"


@pytest.mark.parametrize("impl", ["pulsar", "quasar"])
def test_blackhole_then_reconnect_and_consumption_resumes(
    proxy: FaultProxy, topic: str, impl: str
) -> None:
    # Both clients' own keep-alive is 30 s (the blocking API does not set it); the
    # broker's (1 s here) notices the silence and drops the connection.
    client = _official(proxy.url) if impl == "pulsar" else _quasar(proxy.url)
    try:
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(3):
            producer.send(b"before-%d" % i)
        got = [consumer.receive(timeout_millis=10_000) for _ in range(3)]
        for msg in got:
            consumer.acknowledge(msg)
        accepted = proxy.accepted
        proxy.blackhole(3.0)
        # A keep-alive times out during the outage and the connection is dropped;
        # the client opens a new one, which gets through once the blackhole ends.
        wait_until(lambda: proxy.accepted > accepted, 15, "the client reconnected")
        for i in range(3):
            producer.send(b"after-%d" % i)
        # Acknowledgements still in flight when the link went silent are lost with
        # the connection, so "before" messages may come again (at least once).
        sent = {b"before-%d" % i for i in range(3)} | {b"after-%d" % i for i in range(3)}
        seen = set()
        while not {b"after-0", b"after-1", b"after-2"} <= seen:
            msg = consumer.receive(timeout_millis=15_000)
            consumer.acknowledge(msg)
            seen.add(msg.data())
        assert seen <= sent
    finally:
        client.close()


def _carries(command_type: int) -> Any:
    """A chunk predicate: one of its frames is a BaseCommand of ``command_type``."""

    def check(chunk: bytes) -> bool:
        offset = 0
        while offset + 10 <= len(chunk):
            # [u32 total size][u32 command size][BaseCommand: field 1, type, first]
            if chunk[offset + 8 : offset + 10] == bytes([0x08, command_type]):
                return True
            offset += 4 + int.from_bytes(chunk[offset : offset + 4], "big")
        return False

    return check


@pytest.mark.parametrize(
    ("direction", "command"),
    [(Direction.TO_SERVER, pb.BaseCommand.END_TXN),
     (Direction.TO_CLIENT, pb.BaseCommand.END_TXN_RESPONSE)],
    ids=["request-lost", "answer-lost"],
)
def test_reset_during_commit_has_one_definite_outcome(
    broker: BrokerProcess, proxy: FaultProxy, topic: str, direction: Direction,
    command: int,
) -> None:
    # The official client has no transaction API; quasar's client commits.
    client = quasar.client.Client(
        proxy.url, operation_timeout_seconds=10, enable_transaction=True
    )
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        txn = client.new_transaction(timeout_ms=60_000)
        for i in range(3):
            producer.send(b"txn-%d" % i, txn=txn)
        accepted = proxy.accepted
        # The connection is reset exactly when the END_TXN (or its answer) crosses.
        assert proxy.cut_all(direction, 0, rst=True, when=_carries(command)) >= 1
        first = _commit(txn)
        assert proxy.accepted > accepted, "the reset did not happen during the commit"
        # The client asked again on a new connection and got a definite answer:
        # committed (the coordinator remembers the outcome, PIP-255).
        assert first is None, repr(first)
        assert _commit(txn) is None  # asking again: the same outcome
    finally:
        client.close()
    assert _stored(broker, topic) == [b"txn-0", b"txn-1", b"txn-2"]


def _commit(txn: Any) -> BaseException | None:
    try:
        txn.commit()
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        return exc
    return None
