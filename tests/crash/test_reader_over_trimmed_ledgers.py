"""A reader draining a topic whose ledgers are trimmed under it, after a restart.

No subscription and no retention: the reader's own acknowledgement makes the broker
trim every ledger before the one holding the topic's last entry, and the reader moves
past what was deleted. The restart matters: it leaves a new, empty current ledger, and
the official client caches the last message id it was told (GET_LAST_MESSAGE_ID) and
does not ask again while it has not read that far. So the ledger with the last entry
must stay, or ``has_message_available()`` stays true while ``read_next()`` waits for
entries that no longer exist. The reader drains with the usual loop and must finish:
everything still stored read, then told it is caught up.

The official client's reader is the one that needs it: it acknowledges what it reads
(which schedules the trim) and caches the last message id. quasar's reader does
neither, so it never meets the trim it would cause, nor trusts a stale answer.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from quasar.testing.process import BrokerProcess

PER_LEDGER = 4
LEDGERS = 3
SETTINGS = {
    "managedLedgerMaxEntriesPerLedger": str(PER_LEDGER),
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
}


@pytest.fixture
def small_ledgers(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", settings=SETTINGS).start()
    yield broker
    broker.kill()


def _internal_stats(broker: BrokerProcess, topic: str) -> Any:
    path = topic.replace("persistent://", "/admin/v2/persistent/") + "/internalStats"
    with urllib.request.urlopen(broker.admin_url + path, timeout=10) as resp:
        return json.loads(resp.read())


def _client(url: str) -> pulsar.Client:
    logger = logging.getLogger("pulsar-official-client")
    logger.setLevel(logging.ERROR)
    return pulsar.Client(url, logger=logger, operation_timeout_seconds=10)


@pytest.mark.crash
@pytest.mark.timeout(120)
def test_reader_drains_to_the_end_after_restart_and_trim(small_ledgers: BrokerProcess) -> None:
    broker = small_ledgers
    topic = f"persistent://public/default/trimmed-{uuid.uuid4().hex[:8]}"
    client = _client(broker.url)
    producer = client.create_producer(topic)
    sent = [f"m{i}".encode() for i in range(PER_LEDGER * LEDGERS)]
    for payload in sent:
        producer.send(payload)
    client.close()
    broker.kill()
    broker.start()  # the topic reopens with a new, empty current ledger
    client = _client(broker.url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest, receiver_queue_size=1)
        got: list[bytes] = []
        trimmed = False
        deadline = time.monotonic() + 30
        while reader.has_message_available():
            assert time.monotonic() < deadline, f"reader did not finish: {got}"
            got.append(reader.read_next(timeout_millis=5_000).data())
            if not trimmed:
                # The reader's acknowledgement schedules a trim about a second later:
                # wait (bounded) until it ran before reading on.
                trimmed = True
                wait_until = time.monotonic() + 10
                while len(_internal_stats(broker, topic)["ledgers"]) > 2:
                    assert time.monotonic() < wait_until, "no trim"
                    time.sleep(0.05)  # polling interval of a bounded wait on the admin API
        stats = _internal_stats(broker, topic)
    finally:
        client.close()
    # Kept: the ledger with the last entries, and the empty current one.
    assert [(lg["entries"]) for lg in stats["ledgers"]] == [PER_LEDGER, 0]
    # Everything still stored was read, in order, once; the middle was skipped.
    assert got[-PER_LEDGER:] == sent[-PER_LEDGER:], got
    assert got == [m for m in sent if m in got], got
    assert sent[PER_LEDGER] not in got, got
