"""Readers, seek, has_message_available and last message id through a real broker."""

from __future__ import annotations

import time
from typing import Any

import pytest

from .conftest import receive_all

pytestmark = pytest.mark.interop


def _produce_ids(client: Any, topic: str, n: int, batching: bool = False) -> list[Any]:
    p = client.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=5,
                               block_if_queue_full=True)
    ids: list[Any] = []
    for i in range(n):
        ids.append(p.send(f"m-{i}".encode()))
    p.close()
    return ids


def test_reader_from_earliest_and_has_message_available(client: Any, pulsar_mod: Any, topic: str) -> None:
    _produce_ids(client, topic, 5)
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    got = []
    while r.has_message_available():
        got.append(r.read_next(10_000).data())
    assert got == [f"m-{i}".encode() for i in range(5)]
    r.close()


def test_reader_on_empty_topic_has_nothing(client: Any, pulsar_mod: Any, topic: str) -> None:
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    assert not r.has_message_available()


def test_reader_from_latest_sees_only_new(client: Any, pulsar_mod: Any, topic: str) -> None:
    _produce_ids(client, topic, 3)
    r = client.create_reader(topic, pulsar_mod.MessageId.latest)
    assert not r.has_message_available()
    p = client.create_producer(topic)
    p.send(b"new")
    assert r.read_next(10_000).data() == b"new"


@pytest.mark.parametrize("inclusive", [False, True])
def test_reader_from_message_id(client: Any, pulsar_mod: Any, topic: str, inclusive: bool) -> None:
    ids = _produce_ids(client, topic, 6)
    r = client.create_reader(topic, ids[2], start_message_id_inclusive=inclusive)
    first = r.read_next(10_000).data()
    assert first == (b"m-2" if inclusive else b"m-3")


def test_reader_from_id_inside_batch(client: Any, pulsar_mod: Any, topic: str) -> None:
    p = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=100,
                               block_if_queue_full=True)
    ids: list[Any] = []
    for i in range(6):
        p.send_async(f"b-{i}".encode(), lambda res, mid: ids.append(mid))
    p.flush()
    ids.sort(key=lambda m: (m.ledger_id(), m.entry_id(), m.batch_index()))
    r = client.create_reader(topic, ids[3])
    assert r.read_next(10_000).data() == b"b-4"


@pytest.mark.parametrize("inclusive", [False, True])
def test_seek_by_message_id(client: Any, pulsar_mod: Any, topic: str, inclusive: bool) -> None:
    ids = _produce_ids(client, topic, 8)
    c = client.subscribe(topic, "s", initial_position=pulsar_mod.InitialPosition.Earliest,
                         start_message_id_inclusive=inclusive)
    for m in receive_all(c, 8):
        c.acknowledge(m)
    c.seek(ids[5])
    # The broker restarts delivery at the id itself; the client drops it unless the
    # consumer asked for an inclusive start (the official client's default: exclusive).
    expected = [b"m-5", b"m-6", b"m-7"] if inclusive else [b"m-6", b"m-7"]
    assert [m.data() for m in receive_all(c, len(expected))] == expected


def test_seek_by_time(client: Any, pulsar_mod: Any, topic: str) -> None:
    _produce_ids(client, topic, 3)
    cut = int(time.time() * 1000) + 1
    while int(time.time() * 1000) <= cut:  # make the next publish time strictly later
        time.sleep(0.001)
    p = client.create_producer(topic)
    p.send(b"after-cut")
    c = client.subscribe(topic, "s", initial_position=pulsar_mod.InitialPosition.Earliest)
    for m in receive_all(c, 4):
        c.acknowledge(m)
    c.seek(cut)
    assert c.receive(10_000).data() == b"after-cut"


def test_get_last_message_id(client: Any, pulsar_mod: Any, topic: str) -> None:
    ids = _produce_ids(client, topic, 4)
    c = client.subscribe(topic, "s")
    last = c.get_last_message_id()
    assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())


def test_last_message_id_of_batch_has_batch_index(client: Any, pulsar_mod: Any, topic: str) -> None:
    p = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=100,
                               block_if_queue_full=True)
    for i in range(4):
        p.send_async(f"b-{i}".encode(), None)
    p.flush()
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    seen = []
    while r.has_message_available():
        seen.append(r.read_next(10_000).data())
    assert seen == [f"b-{i}".encode() for i in range(4)]


@pytest.mark.parametrize("inclusive", [False, True])
def test_reader_seek(client: Any, pulsar_mod: Any, topic: str, inclusive: bool) -> None:
    ids = _produce_ids(client, topic, 5)
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest,
                             start_message_id_inclusive=inclusive)
    assert r.read_next(10_000).data() == b"m-0"
    r.seek(ids[3])
    first = r.read_next(10_000).data()
    assert first == (b"m-3" if inclusive else b"m-4")
