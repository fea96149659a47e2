"""TopicName parsing and derived names."""

from __future__ import annotations

import pytest

from quasar.errors import InvalidTopicName
from quasar.protocol import TopicName
from quasar.protocol.topic_name import (
    is_hidden_from_listings,
    is_system_cursor,
    is_system_topic,
)


@pytest.mark.parametrize(
    ("given", "full", "tenant", "namespace", "local", "cluster"),
    [
        (
            "my-topic",
            "persistent://public/default/my-topic",
            "public",
            "default",
            "my-topic",
            None,
        ),
        ("t/ns/x", "persistent://t/ns/x", "t", "ns", "x", None),
        ("persistent://t/ns/x", "persistent://t/ns/x", "t", "ns", "x", None),
        ("non-persistent://t/ns/x", "non-persistent://t/ns/x", "t", "ns", "x", None),
        ("persistent://t/c1/ns/x", "persistent://t/c1/ns/x", "t", "ns", "x", "c1"),
        (
            "persistent://t/c1/ns/a/b/c",
            "persistent://t/c1/ns/a/b/c",
            "t",
            "ns",
            "a/b/c",
            "c1",
        ),
        (
            "persistent://a-b_c=d:e.f/n.s/x y%",
            "persistent://a-b_c=d:e.f/n.s/x y%",
            "a-b_c=d:e.f",
            "n.s",
            "x y%",
            None,
        ),
        (
            "persistent://pulsar/system/transaction_coordinator_assign-partition-3",
            "persistent://pulsar/system/transaction_coordinator_assign-partition-3",
            "pulsar",
            "system",
            "transaction_coordinator_assign-partition-3",
            None,
        ),
    ],
)
def test_valid(
    given: str, full: str, tenant: str, namespace: str, local: str, cluster: str | None
) -> None:
    name = TopicName.parse(given)
    assert (name.full, name.tenant, name.namespace, name.local_name, name.cluster) == (
        full,
        tenant,
        namespace,
        local,
        cluster,
    )
    assert str(name) == full
    assert TopicName.parse(full) == name


@pytest.mark.parametrize(
    "given",
    [
        "",
        "a/b",  # two tokens
        "a/b/c/d",  # four tokens without a domain
        "persistent://t/ns/",  # empty local name
        "persistent://t/ns",
        "persistent://t",
        "http://t/ns/x",
        "://t/ns/x",
        "persistent://t!/ns/x",
        "persistent://t/n s/x",
        "persistent:///ns/x",
        "persistent://t//x",
        "persistent://t/c/ns/",
        "bad tenant/ns/x",
    ],
)
def test_invalid(given: str) -> None:
    with pytest.raises(InvalidTopicName):
        TopicName.parse(given)


def test_namespace_names() -> None:
    assert TopicName.parse("t/ns/x").namespace_name == "t/ns"
    assert TopicName.parse("persistent://t/c/ns/x").namespace_name == "t/c/ns"
    assert TopicName.parse("x").domain == "persistent"
    assert TopicName.parse("non-persistent://t/n/x").is_persistent is False


@pytest.mark.parametrize(
    ("local", "index", "base"),
    [
        ("x-partition-0", 0, "x"),
        ("x-partition-12", 12, "x"),
        ("a-partition-1-partition-2", 2, "a-partition-1"),
        ("x-partition-", -1, None),
        ("x-partition-abc", -1, None),
        ("x-partition-1x", -1, None),
        ("x-partition--1", -1, None),
        ("x-partition-01", -1, None),
        ("x-partition-99999999999", -1, None),
        ("-partition-3", -1, None),
        ("x", -1, None),
    ],
)
def test_partitions(local: str, index: int, base: str | None) -> None:
    name = TopicName.parse(f"persistent://t/ns/{local}")
    assert name.partition_index == index
    assert name.is_partition is (index >= 0)
    if base is None:
        assert name.base is name
    else:
        assert name.base == TopicName.parse(f"persistent://t/ns/{base}")
        assert name.base.partition(index) == name


def test_partition_builds_names() -> None:
    topic = TopicName.parse("my-topic")
    p3 = topic.partition(3)
    assert p3.full == "persistent://public/default/my-topic-partition-3"
    assert p3.partition_index == 3 and p3.is_partition
    assert p3.base == topic
    assert p3.partition(1) == topic.partition(1)  # a sibling, not a nested name
    assert p3 == TopicName.parse(p3.full)
    with pytest.raises(ValueError):
        topic.partition(-1)


def test_hashable_and_equal_after_normalisation() -> None:
    names = {
        TopicName.parse("x"),
        TopicName.parse("public/default/x"),
        TopicName.parse("persistent://public/default/x"),
    }
    assert len(names) == 1


def test_persistence_name() -> None:
    assert (
        TopicName.parse("t/ns/my-topic").persistence_name == "t/ns/persistent/my-topic"
    )
    assert (
        TopicName.parse("persistent://t/c/ns/a/b").persistence_name
        == "t/c/ns/persistent/a%2Fb"
    )
    assert (
        TopicName.parse("non-persistent://t/ns/x").persistence_name
        == "t/ns/non-persistent/x"
    )
    tricky = [
        "persistent://t/ns/a b",
        "persistent://t/ns/a%20b",
        "persistent://t/ns/..",
        "persistent://t/ns/%2E%2E",
        "persistent://../../etc",
        "persistent://t/c/ns/x",
        "persistent://t/c/ns%2Fx",
        "persistent://t:1/ns/x",
    ]
    valid = []
    for raw in tricky:
        try:
            valid.append(TopicName.parse(raw))
        except InvalidTopicName:
            pass
    encoded = [n.persistence_name for n in valid]
    assert len(set(encoded)) == len(valid)  # injective
    for name in encoded:
        for part in name.split("/"):
            assert part not in ("", ".", "..")
            assert all(c.isalnum() or c in "-_.~%" for c in part), name


@pytest.mark.parametrize(
    ("name", "system"),
    [
        ("persistent://pulsar/system/transaction_coordinator_assign-partition-0", True),
        ("persistent://pulsar/system/__terminated_txn_state_0", True),
        ("persistent://public/default/__transaction_buffer_snapshot", True),
        ("persistent://pulsar/system/__transaction_log_0", True),
        ("persistent://public/default/t-sub__transaction_pending_ack", True),
        ("persistent://public/default/t-partition-1-sub__transaction_pending_ack", True),
        ("persistent://public/default/orders", False),
        ("persistent://public/default/orders-partition-3", False),
        ("persistent://public/system/orders", False),
    ],
)
def test_system_topics(name: str, system: bool) -> None:
    assert is_system_topic(TopicName.parse(name)) is system


@pytest.mark.parametrize(
    ("name", "system"),
    [
        ("pulsar.dedup", True),
        ("pulsar.anything", True),
        ("__compaction", True),
        ("__table", True),
        ("my-sub", False),
        ("__compaction2", False),
        ("pulsar", False),
    ],
)
def test_system_cursors(name: str, system: bool) -> None:
    assert is_system_cursor(name) is system


@pytest.mark.parametrize(
    ("name", "hidden"),
    [
        ("persistent://public/default/orders", False),
        ("persistent://public/default/orders-partition-3", False),
        ("persistent://public/default/__change_events", True),
        ("persistent://public/default/__transaction_buffer_snapshot", True),
        ("persistent://public/default/orders-sub__transaction_pending_ack", True),
        ("persistent://public/default/orders-sub__transaction_pending_ack-partition-1", True),
        ("persistent://public/default/not__transaction_pending_ack_really", False),
    ],
)
def test_hidden_from_listings(name: str, hidden: bool) -> None:
    assert is_hidden_from_listings(TopicName.parse(name)) is hidden
