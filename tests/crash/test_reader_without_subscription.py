"""What a reader of a topic without subscriptions can count on, across broker restarts.

Pulsar keeps a topic's data for its durable subscriptions and for its retention
policy, never for readers: a reader's cursor is non-durable and does not hold ledger
trimming back. With the default retention (0) and no durable subscription, every
ledger before the current one may be deleted at the next trim, and a reader that has
not reached it yet moves past it. The official client's reader acknowledges what it
reads, and an acknowledgement schedules a trim, so a reader that reads a topic
spanning several ledgers (a broker restart starts a new one) slowly enough skips the
ledgers between its position and the current one.

Tests that read a whole topic with a reader after restarts (the kill -9 loops)
therefore create a durable subscription before publishing: it holds every entry, so
the reader sees them all however slowly it reads. Both sides are checked here,
deterministically: the trim is waited for before the reader goes on.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
import uuid
from pathlib import Path

import pulsar
import pytest

import quasar.client as qc
from quasar.testing.process import BrokerProcess

LEDGERS = 3  # two restarts: each leaves a complete ledger behind
PER_LEDGER = 5


def _ledger_count(broker: BrokerProcess, topic: str) -> int:
    path = topic.replace("persistent://", "/admin/v2/persistent/") + "/internalStats"
    with urllib.request.urlopen(broker.admin_url + path, timeout=10) as resp:
        return len(json.loads(resp.read())["ledgers"])


def _publish_over_restarts(broker: BrokerProcess, topic: str) -> list[bytes]:
    sent: list[bytes] = []
    for ledger in range(LEDGERS):
        if ledger:
            broker.kill()
            broker.start()
        c = qc.Client(broker.url, operation_timeout_seconds=15)
        p = c.create_producer(topic)
        for k in range(PER_LEDGER):
            payload = f"{ledger}:{k}".encode()
            p.send(payload)
            sent.append(payload)
        c.close()
    return sent


def _read_after_trim(broker: BrokerProcess, topic: str) -> tuple[list[bytes], int]:
    """Read the first message, wait (bounded) for the trim it schedules, read the rest.

    Returns what was read and how many ledgers the topic had left after the trim.
    """
    logger = logging.getLogger("pulsar-official-client")
    logger.setLevel(logging.ERROR)
    client = pulsar.Client(broker.url, logger=logger)
    try:
        # A small receiver queue: what the client fetched ahead is read either way.
        reader = client.create_reader(
            topic, pulsar.MessageId.earliest, receiver_queue_size=1
        )
        got = [reader.read_next(timeout_millis=10_000).data()]
        # The reader's acknowledgement schedules a trim about a second later; wait
        # until it ran (or, when something holds the ledgers, until it had its chance).
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and _ledger_count(broker, topic) > 1:
            time.sleep(0.05)  # polling interval of a bounded wait on the admin API
        left = _ledger_count(broker, topic)
        while True:
            try:
                got.append(reader.read_next(timeout_millis=2_000).data())
            except pulsar.Timeout:
                return got, left
    finally:
        client.close()


@pytest.mark.crash
@pytest.mark.timeout(120)
def test_reader_alone_skips_ledgers_trimmed_under_it(tmp_path: Path) -> None:
    """Pulsar's semantics: no subscription, no retention: the reader's ledgers may go."""
    topic = f"persistent://public/default/no-sub-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        sent = _publish_over_restarts(broker, topic)
        got, left = _read_after_trim(broker, topic)
    finally:
        broker.kill()
    assert left == 1, f"{left} ledgers left: the reader's acknowledgement trimmed nothing"
    # Only what the client had fetched ahead of the trim is read from the deleted
    # ledgers: nothing of the middle one, and all of the current one.
    assert not [m for m in got if m.startswith(b"1:")], got
    assert got[-PER_LEDGER:] == sent[-PER_LEDGER:], got


@pytest.mark.crash
@pytest.mark.timeout(120)
def test_durable_subscription_keeps_every_ledger_for_a_reader(tmp_path: Path) -> None:
    """What the kill -9 loops rely on: a subscription made first holds everything."""
    topic = f"persistent://public/default/held-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        c = qc.Client(broker.url, operation_timeout_seconds=15)
        c.subscribe(topic, "holder", initial_position=qc.InitialPosition.Earliest).close()
        c.close()
        sent = _publish_over_restarts(broker, topic)
        got, left = _read_after_trim(broker, topic)
    finally:
        broker.kill()
    assert left == LEDGERS  # nothing trimmed
    assert got == sent
