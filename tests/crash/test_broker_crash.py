"""kill -9 the broker while the official client publishes; nothing acknowledged is lost.

Each round waits until a seeded number of new receipts has arrived (an event, not a
timer), kills the broker with SIGKILL, and restarts it on the same ports and data.
The client reconnects and resends what was not receipted. Deduplication is on for the
namespace, so a resend of something already stored is recognised. At the end every
message whose send was acknowledged must be readable exactly once, in order.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import urllib.request
from pathlib import Path

import pulsar
import pytest

from quasar.testing.process import BrokerProcess

pytestmark = pytest.mark.crash

ROUNDS = 4
MESSAGES = 6000


def _admin(broker: BrokerProcess, method: str, path: str, body: bytes | None) -> None:
    req = urllib.request.Request(broker.admin_url + path, data=body, method=method)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status < 300


def _wait_until(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.01)


def test_kill9_during_batched_publish_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        _admin(broker, "PUT", "/admin/v2/namespaces/public/crash", b"{}")
        _admin(broker, "POST", "/admin/v2/namespaces/public/crash/deduplication", b"true")
        topic = "persistent://public/crash/kill9"
        logger = logging.getLogger("pulsar-client")
        logger.setLevel(logging.ERROR)
        client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=logger)
        producer = client.create_producer(
            topic, producer_name="crash-producer", batching_enabled=True,
            batching_max_publish_delay_ms=2, block_if_queue_full=True,
            send_timeout_millis=120_000,
        )
        acked: dict[int, str] = {}
        failed: list[str] = []
        lock = threading.Lock()

        def on_sent(i: int):  # type: ignore[no-untyped-def]
            def cb(res, mid) -> None:  # type: ignore[no-untyped-def]
                with lock:
                    if str(res).endswith("Ok"):
                        acked[i] = str(mid)
                    else:
                        failed.append(f"{i}: {res}")
            return cb

        sender_done = threading.Event()

        def send_all() -> None:
            for i in range(MESSAGES):
                producer.send_async(f"{i}".encode(), on_sent(i))
            producer.flush()
            sender_done.set()

        sender = threading.Thread(target=send_all, daemon=True)
        sender.start()
        for _ in range(ROUNDS):
            with lock:
                target = len(acked) + rng.randint(200, MESSAGES // (ROUNDS + 1))
            _wait_until(
                lambda t=target: len(acked) >= t or sender_done.is_set(), 120, "receipts"
            )
            broker.kill()
            broker.start()
        sender.join(180)
        assert sender_done.is_set(), "sender did not finish"
        assert not failed, failed[:5]
        assert len(acked) == MESSAGES

        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        seen = []
        while reader.has_message_available():
            seen.append(int(reader.read_next(10_000).data()))
        assert seen == list(range(MESSAGES)), "every acknowledged message once, in order"
        client.close()
    finally:
        broker.stop()


def test_consumer_and_producer_resume_after_kill9(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        logger = logging.getLogger("pulsar-client")
        logger.setLevel(logging.ERROR)
        client = pulsar.Client(broker.url, operation_timeout_seconds=30, logger=logger)
        topic = "persistent://public/default/resume"
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(10):
            producer.send(f"before-{i}".encode())
        for i in range(10):
            m = consumer.receive(10_000)
            assert m.data() == f"before-{i}".encode()
            consumer.acknowledge(m)
        broker.kill()
        broker.start()
        producer.send(b"after")  # the producer reconnects on its own
        m = consumer.receive(30_000)
        # Acks not yet persisted when the broker died may come back (at most the
        # cursor persistence interval's worth); nothing acknowledged is skipped.
        data = [m.data()]
        while data[-1] != b"after":
            data.append(consumer.receive(30_000).data())
        assert data[-1] == b"after"
        assert all(d.startswith(b"before-") for d in data[:-1])
        client.close()
    finally:
        broker.stop()
