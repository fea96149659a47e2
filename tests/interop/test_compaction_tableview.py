"""Topic compaction through a real broker: admin trigger, compacted readers, TableView,
and the compacted view surviving a broker crash (kill -9)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quasar.testing.process import BrokerProcess

from .conftest import Admin, make_client, topic_path

pytestmark = pytest.mark.interop

# (key, value) in publish order; b"" is a tombstone. Latest: k1=v1b, k4=v4, k3=v3b.
TABLE = [
    ("k1", b"v1"), ("k2", b"v2"), ("k1", b"v1b"), ("k3", b"v3"), ("k2", b""),
    ("k4", b"v4"), ("k3", b"v3b"),
]
LATEST = {"k1": b"v1b", "k3": b"v3b", "k4": b"v4"}
POLL_INTERVAL_S = 0.05  # polling interval of the bounded status loop


def _id(mid: Any) -> tuple[int, int, int]:
    return (mid.ledger_id(), mid.entry_id(), mid.batch_index())


def produce(client: Any, topic: str, items: list[tuple[str, bytes]],
            batching: bool = False) -> list[Any]:
    """Publish ``items`` in order; return their message ids."""
    p = client.create_producer(topic, batching_enabled=batching,
                               batching_max_publish_delay_ms=50, block_if_queue_full=True)
    ids: list[Any] = [None] * len(items)

    def sent(i: int) -> Any:
        def callback(res: Any, mid: Any) -> None:
            ids[i] = mid
        return callback

    for i, (key, value) in enumerate(items):
        if batching:
            p.send_async(value, sent(i), partition_key=key)
        else:
            ids[i] = p.send(value, partition_key=key)
    p.flush()
    p.close()
    assert all(mid is not None for mid in ids)
    return ids


def compact(admin: Admin, topic: str) -> None:
    """Trigger compaction over REST and wait (bounded) for it to succeed."""
    path = topic_path(topic) + "/compaction"
    assert admin.request("PUT", path)[0] == 204
    deadline = time.monotonic() + 30
    status = admin.ok("GET", path)
    while status["status"] == "RUNNING":
        assert time.monotonic() < deadline, status
        time.sleep(POLL_INTERVAL_S)
        status = admin.ok("GET", path)
    assert status == {"status": "SUCCESS", "lastError": ""}


def read_compacted(client: Any, mod: Any, topic: str) -> list[tuple[str, bytes, Any]]:
    r = client.create_reader(topic, mod.MessageId.earliest, is_read_compacted=True)
    got = []
    while r.has_message_available():
        m = r.read_next(10_000)
        got.append((m.partition_key(), m.data(), _id(m.message_id())))
    r.close()
    return got


def expected_view(ids: list[Any]) -> list[tuple[str, bytes, Any]]:
    """The latest value per key, in original-id order, with the original ids."""
    last = {key: i for i, (key, _) in enumerate(TABLE)}
    keep = sorted(i for key, i in last.items() if TABLE[i][1])
    return [(TABLE[i][0], TABLE[i][1], _id(ids[i])) for i in keep]


def table_of(tv: Any) -> dict[str, bytes]:
    content: dict[str, bytes] = {}
    tv.for_each(lambda k, v: content.__setitem__(k, v))
    return content


@pytest.mark.parametrize("batching", [False, True])
def test_compacted_reader_sees_latest_value_per_key(
    client: Any, pulsar_mod: Any, admin: Admin, topic: str, batching: bool
) -> None:
    ids = produce(client, topic, TABLE, batching)
    compact(admin, topic)
    after = produce(client, topic, [("k5", b"after")])
    assert read_compacted(client, pulsar_mod, topic) == [
        *expected_view(ids), ("k5", b"after", _id(after[0])),
    ]
    # A plain reader is not affected by compaction.
    r = client.create_reader(topic, pulsar_mod.MessageId.earliest)
    assert [r.read_next(10_000).data() for _ in range(len(TABLE) + 1)] == [
        v for _, v in TABLE] + [b"after"]


def test_compacted_reader_ends_when_the_last_message_is_a_tombstone(
    client: Any, pulsar_mod: Any, admin: Admin, topic: str
) -> None:
    """The last message id a compacted reader gets is the last *retained* one, or
    has_message_available would stay true with nothing left to read."""
    ids = produce(client, topic, [("a", b"1"), ("b", b"2"), ("b", b"")])
    compact(admin, topic)
    assert read_compacted(client, pulsar_mod, topic) == [("a", b"1", _id(ids[0]))]


def test_read_compacted_is_refused_on_shared_subscriptions(
    client: Any, pulsar_mod: Any, topic: str
) -> None:
    # The official client refuses this itself (InvalidConfiguration); a client that
    # asks anyway gets NotAllowed from the broker (tests/broker/test_compaction.py).
    with pytest.raises(Exception, match="(?i)InvalidConfiguration|not ?allowed|readCompacted"):
        client.subscribe(topic, "s", consumer_type=pulsar_mod.ConsumerType.Shared,
                         is_read_compacted=True)


def test_admin_compaction_errors(admin: Admin, topic: str) -> None:
    missing = topic_path(topic) + "/compaction"
    assert admin.request("GET", missing)[0] == 404
    assert admin.request("PUT", missing)[0] == 404


def test_table_view(client: Any, pulsar_mod: Any, admin: Admin, topic: str) -> None:
    produce(client, topic, TABLE, batching=True)
    compact(admin, topic)
    tv = client.create_table_view(topic)
    try:
        assert len(tv) == len(LATEST)
        assert table_of(tv) == LATEST
        assert tv.get("k1") == b"v1b" and tv.get("k2") is None
        # Updates published afterwards reach the view (TableView keeps reading).
        deleted = threading.Event()

        def listener(key: str, value: bytes) -> None:
            if key == "k1" and value == b"":
                deleted.set()

        tv.for_each_and_listen(listener)
        produce(client, topic, [("k6", b"v6"), ("k4", b"v4b"), ("k1", b"")])
        assert deleted.wait(10)  # the last update applied means all were
        assert table_of(tv) == {"k3": b"v3b", "k4": b"v4b", "k6": b"v6"}
        assert len(tv) == 3
    finally:
        tv.close()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of this test's own: it gets killed."""
    proc = BrokerProcess(tmp_path / "data")
    proc.start()
    yield proc
    proc.stop()


def test_compacted_view_survives_a_broker_crash(
    pulsar_mod: Any, own_broker: BrokerProcess, topic: str
) -> None:
    admin = Admin(own_broker.admin_url)
    client = make_client(pulsar_mod, own_broker.url)
    try:
        ids = produce(client, topic, TABLE)
        compact(admin, topic)
    finally:
        client.close()
    own_broker.kill()
    own_broker.start()
    assert admin.ok("GET", topic_path(topic) + "/compaction")["status"] == "NOT_RUN"
    client = make_client(pulsar_mod, own_broker.url)
    try:
        assert read_compacted(client, pulsar_mod, topic) == expected_view(ids)
        if hasattr(client, "create_table_view"):
            tv = client.create_table_view(topic)
            assert table_of(tv) == LATEST
            tv.close()
        # Compacting again builds on the recovered state (k4 is deleted now).
        produce(client, topic, [("k4", b"")])
        compact(admin, topic)
        view = [v for v in expected_view(ids) if v[0] != "k4"]
        assert read_compacted(client, pulsar_mod, topic) == view
    finally:
        client.close()
