"""kill -9 with delayed messages not yet due: after the restart they arrive at their
time, not before, and a delayed message acknowledged before the crash does not come
back.

The delayed index lives in memory only; the restarted broker rebuilds it as the
subscription reads the topic again from its mark-delete position. An acknowledgement
is durable once the cursor is persisted (at most once per second), so the test waits
until the metadata store holds it before killing the broker.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from quasar.storage.api import Position
from quasar.testing.process import BrokerProcess

pytestmark = pytest.mark.crash

STRICT = {
    "isDelayedDeliveryDeliverAtTimeStrict": "true",
    "delayedDeliveryTickTimeMillis": "100",
}
SUB = "delayed-sub"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def client(broker: BrokerProcess) -> Any:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return pulsar.Client(broker.url, operation_timeout_seconds=10, logger=logger)


def persisted_cursor(data_dir: Path, sub: str) -> dict[str, Any] | None:
    """The subscription's cursor as the metadata store holds it (read-only)."""
    db = sqlite3.connect(f"file:{data_dir / 'metadata.db'}?mode=ro", uri=True, timeout=5)
    try:
        rows = db.execute(
            "SELECT value FROM kv WHERE path LIKE '/managed-ledgers/%/' || ?", (sub,)
        ).fetchall()
    finally:
        db.close()
    return json.loads(rows[0][0]) if rows else None


def is_persisted_ack(data_dir: Path, sub: str, position: Position) -> bool:
    cursor = persisted_cursor(data_dir, sub)
    if cursor is None:
        return False
    if Position(*cursor["md"]) >= position:
        return True
    return any(
        ledger == position.ledger_id and first <= position.entry_id <= last
        for ledger, first, last in cursor.get("ranges", [])
    )


@pytest.fixture
def broker_and_start(tmp_path: Path) -> Iterator[tuple[BrokerProcess, float]]:
    """The broker, and how long it took to start (seconds)."""
    proc = BrokerProcess(tmp_path / "data", settings=STRICT)
    started = time.monotonic()
    proc.start()
    yield proc, time.monotonic() - started
    proc.kill()


def position_of(msg: Any) -> Position:
    mid = msg.message_id()
    return Position(mid.ledger_id(), mid.entry_id())


def wait_persisted(broker: BrokerProcess, position: Position) -> None:
    deadline = time.monotonic() + 10
    while not is_persisted_ack(broker.data_dir, SUB, position):
        assert time.monotonic() < deadline, f"the ack of {position} was never persisted"
        time.sleep(0.05)  # polling interval of a bounded wait for the cursor write


def test_delayed_messages_survive_kill_9(
    broker_and_start: tuple[BrokerProcess, float],
) -> None:
    broker, start_s = broker_and_start
    topic = "persistent://public/default/delayed-crash"
    c = client(broker)
    consumer = c.subscribe(topic, SUB, consumer_type=pulsar.ConsumerType.Shared)
    producer = c.create_producer(topic)
    early_due = now_ms() + 1000
    producer.send(b"early", deliver_at=early_due)
    early = consumer.receive(10_000)
    assert early.data() == b"early" and now_ms() >= early_due
    consumer.acknowledge(early)
    wait_persisted(broker, position_of(early))

    # The restart must finish before the messages are due, or the run shows nothing
    # about the rebuilt index: the delay is twice what the first start took (at
    # least 3 s), and a round whose restart took longer still is tried again with
    # twice the delay.
    delay_ms = max(3000, int(2000 * start_s))
    for _round in range(3):
        due = now_ms() + delay_ms
        for i in range(2):
            producer.send(f"late-{i}".encode(), deliver_at=due)
        c.close()
        broker.kill()
        assert now_ms() < due, "the broker was killed after the messages were due"

        broker.start()
        c = client(broker)
        consumer = c.subscribe(topic, SUB, consumer_type=pulsar.ConsumerType.Shared)
        producer = c.create_producer(topic)
        subscribed = now_ms()
        got = []
        for _ in range(2):
            msg = consumer.receive(30_000)
            arrived = now_ms()
            assert arrived >= due, f"{msg.data()!r} arrived {due - arrived} ms early"
            got.append(msg)
            consumer.acknowledge(msg)
        assert sorted(m.data() for m in got) == [b"late-0", b"late-1"]
        # Acknowledged delayed messages (this round's, and the early one acknowledged
        # before the first crash) are not delivered again.
        with pytest.raises(pulsar.Timeout):
            consumer.receive(500)
        if subscribed < due:
            break
        for m in got:
            wait_persisted(broker, position_of(m))
        delay_ms *= 2
    else:
        c.close()
        pytest.skip("every restart took longer than the delay")
    c.close()
