"""The local end-of-transaction path answers a participant it can never reach with
``TopicNotFound`` (which the coordinator counts as ended), and counts it; a participant
that fails for a passing reason is still retried."""

from __future__ import annotations

from typing import Any, cast

import pytest
from prometheus_client.registry import CollectorRegistry

from quasar.broker.api import TopicRegistry
from quasar.broker.transactions import LocalTransactionBufferClient
from quasar.broker.txn_limits import SKIPPED_METRIC, TxnLimitMetrics
from quasar.errors import (
    InvalidTopicName,
    NotAllowedError,
    ServiceNotReady,
    TopicNotFound,
)
from quasar.protocol import TopicName
from quasar.protocol.txn_id import TxnID
from quasar.server.txn_participants import (
    SUBSCRIPTION_NAME_BYTES_MAX,
    participant_name,
    subscription_name,
)
from quasar.server.wire import TOPIC_NAME_BYTES_MAX, topic_of
from quasar.transaction.buffer_client import EndFailure, classify_end_failure
from quasar.transaction.txn_status import TxnAction

TXN = TxnID(0, 7)


class _Topic:
    def __init__(self) -> None:
        self.ended: list[tuple[TxnID, TxnAction]] = []

    async def end_txn(self, txn_id: TxnID, action: TxnAction, low_watermark: int) -> None:
        self.ended.append((txn_id, action))

    async def end_subscription_txn(
        self, sub: str, txn_id: TxnID, action: TxnAction, low_watermark: int
    ) -> None:
        self.ended.append((txn_id, action))


class _Topics:
    """Just what the end path asks of the broker service."""

    def __init__(self) -> None:
        self.loaded: dict[str, _Topic] = {}
        self.partitioned: set[str] = set()
        self.failure: Exception | None = None
        self.metadata_reads = 0

    def partitions_of(self, name: TopicName) -> int:
        self.metadata_reads += 1
        return 2 if name.full in self.partitioned else 0

    async def get_topic(self, name: TopicName, create: bool) -> Any:
        """As ``BrokerService.get_topic``: a loaded topic from memory; loading one
        checks that it is not a partitioned topic's base name."""
        assert not create
        if self.failure is not None:
            raise self.failure
        topic = self.loaded.get(name.full)
        if topic is not None:
            return topic
        if self.partitions_of(name) > 0:
            raise NotAllowedError(f"{name.full} is a partitioned topic; use its partitions")
        raise TopicNotFound(f"Topic {name.full} does not exist")


def _skipped(registry: CollectorRegistry, reason: str) -> float:
    value = registry.get_sample_value(f"{SKIPPED_METRIC}_total", {"reason": reason})
    assert value is not None
    return value


@pytest.fixture
def setup() -> tuple[_Topics, LocalTransactionBufferClient, CollectorRegistry]:
    topics = _Topics()
    registry = CollectorRegistry()
    client = LocalTransactionBufferClient(
        cast(TopicRegistry, topics), TxnLimitMetrics(registry)
    )
    return topics, client, registry


@pytest.mark.parametrize(
    ("topic", "reason"),
    [
        ("persistent://public/default/a/b", "invalid_name"),  # V1: never served
        ("persistent://public", "invalid_name"),
        ("non-persistent://public/default/t", "not_allowed"),
        ("persistent://public/default/partitioned", "not_allowed"),
        ("persistent://public/deleted/t", "not_found"),
    ],
)
async def test_an_unreachable_participant_counts_as_ended(
    setup: tuple[_Topics, LocalTransactionBufferClient, CollectorRegistry],
    topic: str,
    reason: str,
) -> None:
    topics, client, registry = setup
    topics.partitioned.add("persistent://public/default/partitioned")
    with pytest.raises(TopicNotFound) as on_partition:
        await client.end_txn_on_partition(topic, TXN, TxnAction.COMMIT, -1)
    with pytest.raises(TopicNotFound):
        await client.end_txn_on_subscription(topic, "s", TXN, TxnAction.COMMIT, -1)
    assert _skipped(registry, reason) == 2
    assert classify_end_failure(on_partition.value) is EndFailure.GONE


async def test_a_reachable_participant_is_ended(
    setup: tuple[_Topics, LocalTransactionBufferClient, CollectorRegistry],
) -> None:
    topics, client, registry = setup
    topic = topics.loaded["persistent://public/default/t"] = _Topic()
    await client.end_txn_on_partition("public/default/t", TXN, TxnAction.ABORT, -1)
    await client.end_txn_on_subscription(
        "persistent://public/default/t", "s", TXN, TxnAction.ABORT, -1
    )
    assert topic.ended == [(TXN, TxnAction.ABORT)] * 2
    assert all(_skipped(registry, r) == 0 for r in ("not_found", "invalid_name", "not_allowed"))


async def test_a_passing_failure_is_raised_for_the_coordinator_to_retry(
    setup: tuple[_Topics, LocalTransactionBufferClient, CollectorRegistry],
) -> None:
    topics, client, _ = setup
    topics.failure = ServiceNotReady("Broker is shutting down")
    with pytest.raises(ServiceNotReady):
        await client.end_txn_on_partition("public/default/t", TXN, TxnAction.COMMIT, -1)


async def test_ending_on_a_loaded_topic_reads_no_metadata(
    setup: tuple[_Topics, LocalTransactionBufferClient, CollectorRegistry],
) -> None:
    """The end path runs for every participant of every transaction: a loaded topic
    is answered from memory (it was checked when it loaded)."""
    topics, client, _ = setup
    topic = topics.loaded["persistent://public/default/t"] = _Topic()
    for _ in range(3):
        await client.end_txn_on_partition("persistent://public/default/t", TXN,
                                          TxnAction.COMMIT, -1)
        await client.end_txn_on_subscription("persistent://public/default/t", "s", TXN,
                                             TxnAction.COMMIT, -1)
    assert topic.ended == [(TXN, TxnAction.COMMIT)] * 6
    assert topics.metadata_reads == 0


# -- name lengths ----------------------------------------------------------------------
PREFIX = "persistent://public/default/"


def test_a_topic_name_is_bounded_in_utf8_bytes() -> None:
    at_bound = PREFIX + "x" * (TOPIC_NAME_BYTES_MAX - len(PREFIX))
    assert topic_of(at_bound).full == at_bound
    with pytest.raises(InvalidTopicName, match="4097 bytes"):
        topic_of(at_bound + "x")
    # Fewer characters than the bound, more bytes: two bytes each.
    wide = PREFIX + "é" * ((TOPIC_NAME_BYTES_MAX - len(PREFIX)) // 2 + 1)
    assert len(wide) < TOPIC_NAME_BYTES_MAX
    with pytest.raises(InvalidTopicName, match="longer than 4096"):
        topic_of(wide)
    with pytest.raises(InvalidTopicName):
        topic_of(PREFIX + "a/b")  # a legacy V1 name


def test_a_subscription_name_is_bounded_in_utf8_bytes() -> None:
    assert subscription_name("s" * SUBSCRIPTION_NAME_BYTES_MAX) == "s" * 1024
    with pytest.raises(InvalidTopicName, match="1025 bytes"):
        subscription_name("s" * (SUBSCRIPTION_NAME_BYTES_MAX + 1))
    with pytest.raises(InvalidTopicName, match="1026 bytes"):
        subscription_name("é" * 513)
    with pytest.raises(InvalidTopicName, match="Empty"):
        subscription_name("")


def test_a_participant_must_be_persistent() -> None:
    with pytest.raises(NotAllowedError, match="non-persistent"):
        participant_name("non-persistent://public/default/t")
    assert participant_name("public/default/t").full == PREFIX + "t"

