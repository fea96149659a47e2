"""Compacted reads as Pulsar serves them, through a real broker and both clients:
subscriptions that existed before compaction, redelivery and seek, null-value
tombstones (single and batched), transactions, and the view after a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client
from quasar.testing.process import BrokerProcess

from .conftest import Admin, make_client
from .test_compaction_tableview import compact, produce, table_of

pytestmark = pytest.mark.interop

RECEIVE_TIMEOUT_MS = 10_000


def receive_values(consumer: Any, n: int) -> list[tuple[str, bytes | None]]:
    """The next ``n`` messages as (key, value); a null value is ``None``."""
    got = []
    for _ in range(n):
        m = consumer.receive(RECEIVE_TIMEOUT_MS)
        got.append((m.partition_key(), None if m.has_null_value() else m.data()))
    return got


def read_all_compacted(client: Any, mod: Any, topic: str) -> list[tuple[str, bytes | None]]:
    """Everything a compacted reader from the earliest gets, as (key, value)."""
    r = client.create_reader(topic, mod.MessageId.earliest, is_read_compacted=True)
    got = []
    try:
        while r.has_message_available():
            m = r.read_next(RECEIVE_TIMEOUT_MS)
            got.append((m.partition_key(), None if m.has_null_value() else m.data()))
    finally:
        r.close()
    return got


def send(producer: Any, key: str, value: bytes | None) -> Any:
    """``value=None`` publishes a null-value message (a tombstone)."""
    return producer.send(value, partition_key=key)


def test_subscription_created_before_compaction_reads_the_latest_value(
    client: Any, admin: Admin, topic: str
) -> None:
    compacted_sub = client.subscribe(topic, "table", is_read_compacted=True)
    plain_sub = client.subscribe(topic, "log")
    compacted_sub.close()
    plain_sub.close()
    produce(client, topic, [("k", b"hello-0"), ("k", b"hello-1")])
    compact(admin, topic)
    produce(client, topic, [("after", b"x")])

    c = client.subscribe(topic, "table", is_read_compacted=True)
    # Delivery is in order: "after" right behind hello-1 means hello-0 never came.
    assert receive_values(c, 2) == [("k", b"hello-1"), ("after", b"x")]
    c.close()
    # A consumer that did not ask for compacted reads still gets every message.
    p = client.subscribe(topic, "log")
    assert receive_values(p, 3) == [("k", b"hello-0"), ("k", b"hello-1"), ("after", b"x")]
    p.close()


def test_redelivery_and_seek_after_compaction_read_the_compacted_view(
    client: Any, pulsar_mod: Any, admin: Admin, topic: str
) -> None:
    c = client.subscribe(topic, "table", is_read_compacted=True)
    produce(client, topic, [("k", b"hello-0"), ("k", b"hello-1")])
    # Both were delivered before compaction, from the topic.
    assert receive_values(c, 2) == [("k", b"hello-0"), ("k", b"hello-1")]
    compact(admin, topic)
    c.redeliver_unacknowledged_messages()
    assert receive_values(c, 1) == [("k", b"hello-1")]
    produce(client, topic, [("after", b"x")])
    assert receive_values(c, 1) == [("after", b"x")]
    c.seek(pulsar_mod.MessageId.earliest)
    assert receive_values(c, 2) == [("k", b"hello-1"), ("after", b"x")]
    c.close()


@pytest.mark.parametrize("batching", [False, True])
def test_null_value_tombstone_removes_its_key(
    client: Any, pulsar_mod: Any, admin: Admin, topic: str, batching: bool
) -> None:
    p = client.create_producer(topic, batching_enabled=batching,
                               batching_max_publish_delay_ms=50)
    items: list[tuple[str, bytes | None]] = [
        ("k1", b"v1"), ("k2", b"v2"), ("k1", None), ("k3", b"v3"), ("k2", b"v2b"),
    ]
    ids: list[Any] = []
    for key, value in items:
        if batching:
            p.send_async(value, lambda res, mid: ids.append(mid), partition_key=key)
        else:
            ids.append(send(p, key, value))
    p.flush()
    assert len(ids) == len(items)
    # With batching, members of one entry carry their own keys and null values.
    assert any(mid.batch_index() > 0 for mid in ids) == batching
    compact(admin, topic)
    assert read_all_compacted(client, pulsar_mod, topic) == [("k3", b"v3"), ("k2", b"v2b")]
    # After the horizon: a new value of the deleted key, and a tombstone, both seen.
    send(p, "k1", b"v1-again")
    send(p, "k3", None)
    p.close()
    view = read_all_compacted(client, pulsar_mod, topic)
    assert view == [("k3", b"v3"), ("k2", b"v2b"), ("k1", b"v1-again"), ("k3", None)]
    # A TableView agrees with what the compacted reader saw.
    tv = client.create_table_view(topic)
    try:
        assert table_of(tv) == {"k2": b"v2b", "k1": b"v1-again"}
    finally:
        tv.close()
    # Compacting again drops the tombstone too.
    compact(admin, topic)
    assert read_all_compacted(client, pulsar_mod, topic) == [
        ("k2", b"v2b"), ("k1", b"v1-again"),
    ]


def test_only_committed_transactions_enter_the_compacted_view(
    client: Any, pulsar_mod: Any, broker: BrokerProcess, admin: Admin, topic: str
) -> None:
    # The official client has no transaction API: quasar's client writes, and the
    # client under test reads.
    writer = quasar.client.Client(broker.url, operation_timeout_seconds=10,
                                  enable_transaction=True)
    try:
        p = writer.create_producer(topic, batching_enabled=False)
        p.send(b"v0", partition_key="k")
        committed = writer.new_transaction(timeout_ms=60_000)
        p.send(b"committed", partition_key="k", txn=committed)
        committed.commit()
        # Later than the committed value, and a key of its own: had compaction
        # counted them, the view would show them.
        aborted = writer.new_transaction(timeout_ms=60_000)
        p.send(b"aborted", partition_key="k", txn=aborted)
        p.send(b"aborted", partition_key="k3", txn=aborted)
        aborted.abort()
        still_open = writer.new_transaction(timeout_ms=60_000)
        p.send(b"open", partition_key="k", txn=still_open)
        p.send(b"plain", partition_key="k2")  # behind the open transaction
        compact(admin, topic)
        # Compaction stopped before the open transaction: the view has the committed
        # value; "plain" becomes readable once the transaction ends.
        assert read_all_compacted(client, pulsar_mod, topic) == [("k", b"committed")]
        still_open.commit()
        compact(admin, topic)
        assert read_all_compacted(client, pulsar_mod, topic) == [
            ("k", b"open"), ("k2", b"plain"),
        ]
        p.close()
    finally:
        writer.close()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of this test's own: it gets killed."""
    proc = BrokerProcess(tmp_path / "data")
    proc.start()
    yield proc
    proc.stop()


def test_subscription_reads_the_compacted_view_after_a_crash(
    pulsar_mod: Any, own_broker: BrokerProcess, topic: str
) -> None:
    admin = Admin(own_broker.admin_url)
    client = make_client(pulsar_mod, own_broker.url)
    try:
        client.subscribe(topic, "table", is_read_compacted=True).close()
        produce(client, topic, [("k", b"hello-0"), ("k", b"hello-1"), ("gone", b"x")])
        p = client.create_producer(topic)
        send(p, "gone", None)
        p.close()
        compact(admin, topic)
    finally:
        client.close()
    own_broker.kill()
    own_broker.start()
    client = make_client(pulsar_mod, own_broker.url)
    try:
        c = client.subscribe(topic, "table", is_read_compacted=True)
        produce(client, topic, [("after", b"y")])
        assert receive_values(c, 2) == [("k", b"hello-1"), ("after", b"y")]
        c.close()
    finally:
        client.close()
