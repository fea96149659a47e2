"""A reader's seek by publish time and by message id, with both clients.

The broker answers SEEK on a reader's non-durable subscription by resetting its cursor
and closing the consumer; the client resubscribes. After a seek by time the official
client resubscribes with ``start_message_id = earliest`` and relies on the broker to
keep the reset cursor, so the reader must go on at the first message published at or
after the time, not at the topic's first message.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from .conftest import Admin, topic_path

pytestmark = pytest.mark.interop


def _clock_past(ms: int) -> None:
    """Wait until the wall clock is past ``ms`` (a bounded wait on the clock itself)."""
    deadline = time.monotonic() + 5.0
    while int(time.time() * 1000) <= ms:
        assert time.monotonic() < deadline, "the wall clock does not advance"
        time.sleep(0.001)


def _produce_around_cut(
    client: Any, topic: str, before: int, after: int
) -> tuple[int, list[Any]]:
    """``before`` messages, a cut time, ``after`` messages; returns (cut, all ids)."""
    p = client.create_producer(topic, batching_enabled=False)
    ids = [p.send(f"b-{i}".encode()) for i in range(before)]
    cut = int(time.time() * 1000) + 1
    _clock_past(cut)
    ids += [p.send(f"a-{i}".encode()) for i in range(after)]
    p.close()
    return cut, ids


def _read_until_empty(reader: Any) -> list[bytes]:
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(10_000).data())
    return got


def test_reader_seek_by_time_starts_at_first_message_at_or_after_it(
    client: Any, pulsar_mod: Any, topic: str, admin: Admin
) -> None:
    cut, _ = _produce_around_cut(client, topic, 4, 3)
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    assert r.read_next(10_000).data() == b"b-0"
    r.seek(cut)
    assert r.read_next(10_000).data() == b"a-0"
    assert _read_until_empty(r) == [b"a-1", b"a-2"]
    # The reader's subscription survived the seek for the resubscribe (one, not a
    # second one) and goes away with the reader.
    assert len(admin.ok("GET", topic_path(topic) + "/stats")["subscriptions"]) == 1
    r.close()
    assert admin.ok("GET", topic_path(topic) + "/stats")["subscriptions"] == {}


def test_reader_seek_by_time_before_reading_anything(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    cut, _ = _produce_around_cut(client, topic, 3, 2)
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    r.seek(cut)
    assert _read_until_empty(r) == [b"a-0", b"a-1"]
    r.close()


def test_reader_seek_by_time_from_latest_goes_back(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    cut, _ = _produce_around_cut(client, topic, 2, 2)
    r = client.create_reader(topic, pulsar_mod.MessageId.latest)
    assert not r.has_message_available()
    r.seek(cut)
    assert r.read_next(10_000).data() == b"a-0"
    assert r.read_next(10_000).data() == b"a-1"
    r.close()


def test_reader_seek_by_time_after_every_message_waits_for_new_ones(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    _produce_around_cut(client, topic, 3, 0)
    cut = int(time.time() * 1000) + 1
    _clock_past(cut)
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    r.seek(cut)
    assert not r.has_message_available()
    p = client.create_producer(topic, batching_enabled=False)
    p.send(b"new")
    assert r.read_next(10_000).data() == b"new"
    r.close()


def test_reader_seek_by_time_twice_and_back_by_id(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    cut, ids = _produce_around_cut(client, topic, 3, 3)
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    r.seek(cut)
    assert r.read_next(10_000).data() == b"a-0"
    r.seek(0)  # before every message: the topic's first one
    assert r.read_next(10_000).data() == b"b-0"
    r.seek(cut)
    assert r.read_next(10_000).data() == b"a-0"
    r.seek(ids[1])  # by id: exclusive (the clients' default)
    assert r.read_next(10_000).data() == b"b-2"
    r.close()


def test_reader_seek_by_id_still_works_after_reading_everything(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    _, ids = _produce_around_cut(client, topic, 5, 0)
    r = client.create_reader(
        topic, pulsar_mod.MessageId.earliest, start_message_id_inclusive=True
    )
    assert _read_until_empty(r) == [f"b-{i}".encode() for i in range(5)]
    r.seek(ids[2])
    assert _read_until_empty(r) == [b"b-2", b"b-3", b"b-4"]
    r.close()


def test_reader_seek_by_time_on_batched_topic(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    p = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_publish_delay_ms=50,
        block_if_queue_full=True,
    )
    for i in range(4):
        p.send_async(f"b-{i}".encode(), None)
    p.flush()
    cut = int(time.time() * 1000) + 1
    _clock_past(cut)
    for i in range(4):
        p.send_async(f"a-{i}".encode(), None)
    p.flush()
    p.close()
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    assert r.read_next(10_000).data() == b"b-0"
    r.seek(cut)
    assert _read_until_empty(r) == [f"a-{i}".encode() for i in range(4)]
    r.close()
