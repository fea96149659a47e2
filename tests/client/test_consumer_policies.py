"""Consumer policy objects and batch receive over a receive queue (no broker)."""

from __future__ import annotations

import asyncio

import pulsar
import pytest

from quasar.client import InvalidConfiguration
from quasar.client.batch_receive import batch_receive
from quasar.client.consumer_policies import (
    DEFAULT_BATCH_RECEIVE_POLICY,
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    batch_receive_policy_of,
    dead_letter_policy_of,
)
from quasar.client.dead_letter import ConsumerLetters, forwarded
from quasar.client.message import Message
from quasar.client.message_id import MessageId
from quasar.client.options import ConsumerOptions, ProducerOptions
from quasar.client.receive_queue import ReceiveQueue
from quasar.errors import AlreadyClosed


def _msg(i: int, data: bytes = b"abc") -> Message:
    return Message(data, MessageId(-1, 1, i), topic="persistent://a/b/c")


def test_official_policies_are_taken_as_ours() -> None:
    ours = dead_letter_policy_of(pulsar.ConsumerDeadLetterPolicy(3, "dlq", "audit"))
    assert (ours.max_redeliver_count, ours.dead_letter_topic) == (3, "dlq")
    assert ours.initial_subscription_name == "audit"
    batch = batch_receive_policy_of(pulsar.ConsumerBatchReceivePolicy(5, 100, 7))
    assert (batch.max_num_message, batch.max_num_bytes, batch.timeout_ms) == (5, 100, 7)
    assert batch_receive_policy_of(None) is DEFAULT_BATCH_RECEIVE_POLICY
    with pytest.raises(InvalidConfiguration):
        dead_letter_policy_of("max=3")
    with pytest.raises(InvalidConfiguration):
        ConsumerOptions("s", batch_receive_policy=object())


def test_policies_refuse_what_pulsar_refuses() -> None:
    with pytest.raises(ValueError):
        ConsumerDeadLetterPolicy(0)
    with pytest.raises(ValueError):
        ConsumerBatchReceivePolicy(0, -1, -1)


def test_retry_enable_without_a_policy_uses_the_java_default() -> None:
    options = ConsumerOptions("s", retry_enable=True)
    assert options.dead_letter_policy is not None
    assert options.dead_letter_policy.max_redeliver_count == 16


def test_unsupported_producer_options_are_refused() -> None:
    with pytest.raises(InvalidConfiguration, match="lazy_start"):
        ProducerOptions(lazy_start_partitioned_producers=True)


def test_letter_topic_names_follow_pulsar() -> None:
    async def never(topic: str, sub: str | None) -> object:
        raise AssertionError("no producer in this test")

    letters = ConsumerLetters(ConsumerDeadLetterPolicy(2), "sub", never)
    one = letters.for_topic("persistent://a/b/c")
    assert one.dead_letter_topic == "persistent://a/b/c-sub-DLQ"
    assert one.retry_topic == "persistent://a/b/c-sub-RETRY"
    # A message read from the retry topic belongs to its original topic.
    assert letters.for_topic("persistent://a/b/c-sub-RETRY") is one
    named = ConsumerLetters(ConsumerDeadLetterPolicy(2, "persistent://a/b/dead"), "s", never)
    assert named.for_topic("persistent://a/b/c").dead_letter_topic == "persistent://a/b/dead"


def test_forwarded_copy_keeps_the_message_and_names_its_origin() -> None:
    msg = Message(
        b"p",
        MessageId(-1, 4, 5),
        properties={"x": "1"},
        partition_key="k",
        ordering_key=b"o",
        event_time=9,
        topic="persistent://a/b/c",
    )
    copy = forwarded(msg, {"RECONSUMETIMES": "1"}, deliver_at_ms=123)
    assert copy.payload == b"p"
    assert copy.properties == {
        "x": "1",
        "REAL_TOPIC": "persistent://a/b/c",
        "ORIGIN_MESSAGE_ID": "(4,5,-1,-1)",
        "RECONSUMETIMES": "1",
    }
    assert (copy.partition_key, copy.ordering_key, copy.event_time) == ("k", b"o", 9)
    assert copy.deliver_at_ms == 123


def test_batch_receive_stops_at_the_count() -> None:
    async def run() -> list[int]:
        q = ReceiveQueue()
        for i in range(7):
            q.put(_msg(i))
        batch = await batch_receive(q, ConsumerBatchReceivePolicy(3, -1, 10_000))
        return [m.message_id().entry_id() for m in batch]

    assert asyncio.run(run()) == [0, 1, 2]


def test_batch_receive_leaves_a_message_that_would_pass_the_byte_limit() -> None:
    async def run() -> tuple[list[int], list[int]]:
        q = ReceiveQueue()
        for i in range(4):
            q.put(_msg(i, b"x" * 4))
        policy = ConsumerBatchReceivePolicy(-1, 10, 10_000)
        first = await batch_receive(q, policy)
        q.put(_msg(9, b"y" * 50))  # larger than the limit on its own
        rest = await batch_receive(q, policy)
        big = await batch_receive(q, policy)
        return [m.message_id().entry_id() for m in first], [
            m.message_id().entry_id() for m in rest + big
        ]

    first, later = asyncio.run(run())
    assert first == [0, 1]
    assert later == [2, 3, 9]


def test_batch_receive_returns_what_arrived_by_the_timeout() -> None:
    async def run() -> tuple[list[int], list[int]]:
        q = ReceiveQueue()
        empty = await batch_receive(q, ConsumerBatchReceivePolicy(-1, -1, 20))
        asyncio.get_running_loop().call_later(0.01, q.put, _msg(1))
        some = await batch_receive(q, ConsumerBatchReceivePolicy(5, -1, 100))
        return [m.message_id().entry_id() for m in empty], [
            m.message_id().entry_id() for m in some
        ]

    assert asyncio.run(run()) == ([], [1])


def test_batch_receive_on_a_closed_queue() -> None:
    async def run() -> None:
        q = ReceiveQueue()
        q.close()
        await batch_receive(q, ConsumerBatchReceivePolicy(5, -1, -1))

    with pytest.raises(AlreadyClosed):
        asyncio.run(run())
